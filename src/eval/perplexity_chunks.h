// How llama.cpp's perplexity tool cuts a text into evaluation windows, so that strata scores the
// same tokens at the same positions and its numbers (and .kld files) line up with llama.cpp's:
//   * the whole text is tokenized once, with BOS if the vocabulary adds it (the caller's job);
//   * it must have at least 2 * n_ctx tokens (llama.cpp refuses shorter texts);
//   * n_chunk = min(requested, n_tokens / n_ctx) consecutive, non-overlapping windows of n_ctx
//     tokens; the rest of the text is unused;
//   * each window is evaluated from an empty cache with its first token replaced by BOS when the
//     vocabulary adds BOS (the replaced id is not kept: a .kld file stores the original ids);
//   * positions first = n_ctx/2 .. n_ctx-2 are scored, position p predicting token p + 1: the
//     second half of each window, so every prediction has at least n_ctx/2 tokens of context.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "util/result.h"

namespace strata {

struct PerplexityChunks {
    int32_t n_ctx = 0;
    int32_t n_chunk = 0;
    std::vector<int32_t> tokens;  // n_chunk * n_ctx original ids, as a .kld header stores them
    std::optional<int32_t> bos;   // replaces each window's first token when set

    int32_t first() const { return n_ctx / 2; }
    int32_t scored_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
    int64_t scored_total() const { return int64_t{n_chunk} * scored_per_chunk(); }

    // The ids of chunk c as the text has them.
    std::span<const int32_t> original(int32_t c) const;
    // The ids the model is fed for chunk c: original(c) with the first one replaced by BOS.
    std::vector<int32_t> eval_tokens(int32_t c) const;
    // The token that scored position first() + j of chunk c predicts.
    int32_t target(int32_t c, int32_t j) const;
};

// text_tokens: the whole text, tokenized as described above. max_chunks < 0 takes every full
// window. bos: the BOS id if the vocabulary adds BOS, else nullopt.
Result<PerplexityChunks> make_perplexity_chunks(std::span<const int32_t> text_tokens, int32_t n_ctx,
                                                int32_t max_chunks, std::optional<int32_t> bos);

}  // namespace strata
