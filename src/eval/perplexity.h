// Perplexity of a model over a text, and its divergence from a saved base run, computed as
// llama.cpp's perplexity tool does so the figures are comparable (chunking: perplexity_chunks.h,
// statistics: logit_stats.h, base files: kld_file.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "eval/logit_stats.h"
#include "tokenizer/tokenizer.h"

namespace strata {

struct PerplexityOptions {
    int32_t n_ctx = 0;         // tokens per chunk; 0: the base file's, else 512
    int32_t max_chunks = -1;   // < 0: every full chunk of the text
    std::string save_base;     // write full log-probabilities here (llama.cpp's .kld format)
    std::string compare_base;  // compare with this .kld; its tokens are evaluated (no text needed)
};

struct PerplexityReport {
    int32_t n_ctx = 0;
    int32_t n_chunk = 0;
    int64_t scored = 0;  // tokens scored
    double ppl = 0, ppl_err = 0;
    double mean_nll = 0;
    std::vector<double> chunk_ppl;  // running estimate after each chunk
    std::optional<KlStats> kl;      // with compare_base
    double seconds = 0;
    int64_t evaluated = 0;  // tokens evaluated (n_chunk * n_ctx)
};

// Called after each chunk with (chunks done, chunks in all, running perplexity).
using PerplexityProgress = std::function<void(int32_t, int32_t, double)>;

// `text` is ignored when options.compare_base is set. The engine's context must hold n_ctx
// tokens; its cache is cleared for every chunk.
Result<PerplexityReport> compute_perplexity(engine::Engine& engine, const Tokenizer& tokenizer,
                                            const std::string& text,
                                            const PerplexityOptions& options,
                                            const PerplexityProgress& progress = {});

}  // namespace strata
