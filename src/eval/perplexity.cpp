#include "eval/perplexity.h"

#include <chrono>
#include <optional>

#include "eval/kld_file.h"
#include "eval/perplexity_chunks.h"

namespace strata {

namespace {

std::optional<int32_t> bos_if_added(const Tokenizer& tok) {
    const Vocab& v = tok.vocab();
    if (v.add_bos() && v.contains(v.special().bos)) return v.special().bos;
    return std::nullopt;
}

// The chunks to evaluate: from the base file when comparing (its tokens, its n_ctx), else from
// the text tokenized once with BOS where the vocabulary adds it.
Result<PerplexityChunks> plan_chunks(const Tokenizer& tok, const std::string& text,
                                     const PerplexityOptions& o, const KldReader* base) {
    if (base) {
        const KldHeader& h = base->header();
        if (o.n_ctx != 0 && o.n_ctx != h.n_ctx) {
            return err("--ctx " + std::to_string(o.n_ctx) + " differs from the base file's " +
                       std::to_string(h.n_ctx) + " (" + base->path() + ")");
        }
        const int32_t n_chunk = o.max_chunks < 0 ? h.n_chunk : std::min(o.max_chunks, h.n_chunk);
        return make_perplexity_chunks(h.tokens, h.n_ctx, n_chunk, bos_if_added(tok));
    }
    TokenizeOptions to;
    to.add_special = tok.vocab().add_bos();
    to.parse_special = false;  // the text is data
    const std::vector<TokenId> ids = tok.tokenize(text, to);
    return make_perplexity_chunks(ids, o.n_ctx ? o.n_ctx : 512, o.max_chunks, bos_if_added(tok));
}

}  // namespace

Result<PerplexityReport> compute_perplexity(engine::Engine& engine, const Tokenizer& tokenizer,
                                            const std::string& text,
                                            const PerplexityOptions& options,
                                            const PerplexityProgress& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<KldReader> base;
    if (!options.compare_base.empty()) {
        STRATA_ASSIGN(base, KldReader::open(options.compare_base));
        if (uint32_t(base->header().n_vocab) != engine.n_vocab()) {
            return err("the base file " + options.compare_base + " has a vocabulary of " +
                       std::to_string(base->header().n_vocab) + " tokens, the model " +
                       std::to_string(engine.n_vocab()));
        }
    }
    STRATA_ASSIGN(const PerplexityChunks chunks,
                  plan_chunks(tokenizer, text, options, base ? &*base : nullptr));
    if (uint32_t(chunks.n_ctx) > engine.n_ctx()) {
        return err("chunks of " + std::to_string(chunks.n_ctx) +
                   " tokens do not fit the context of " + std::to_string(engine.n_ctx()));
    }
    std::optional<KldWriter> writer;
    if (!options.save_base.empty()) {
        STRATA_ASSIGN(writer,
                      KldWriter::create(options.save_base, chunks.n_ctx, int32_t(engine.n_vocab()),
                                        chunks.n_chunk, chunks.tokens));
    }

    PerplexityReport rep;
    rep.n_ctx = chunks.n_ctx;
    rep.n_chunk = chunks.n_chunk;
    PerplexityAccumulator ppl;
    KlAccumulator kl;
    const size_t nv = engine.n_vocab();
    std::vector<float> logits, logp, base_logp;
    for (int32_t c = 0; c < chunks.n_chunk; ++c) {
        engine.truncate(0);
        const std::vector<int32_t> toks = chunks.eval_tokens(c);
        STRATA_TRY(engine.eval(toks, engine::LogitsWanted::All, logits));
        rep.evaluated += int64_t(toks.size());
        for (int32_t j = 0; j < chunks.scored_per_chunk(); ++j) {
            const std::span<const float> row(&logits[size_t(chunks.first() + j) * nv], nv);
            log_softmax(row, logp);
            ppl.add(-double(logp[size_t(chunks.target(c, j))]));
            if (writer) STRATA_TRY(writer->append(row));
            if (base) {
                STRATA_TRY(base->read_record(c, j, base_logp));
                kl.add(base_logp, logp);
            }
        }
        ppl.end_chunk();
        if (progress) progress(c + 1, chunks.n_chunk, ppl.ppl());
    }
    engine.truncate(0);
    if (writer) STRATA_TRY(writer->finish());
    rep.scored = int64_t(ppl.count());
    rep.ppl = ppl.ppl();
    rep.ppl_err = ppl.ppl_uncertainty();
    rep.mean_nll = ppl.mean_nll();
    rep.chunk_ppl = ppl.chunk_ppl();
    if (base) rep.kl = kl.stats();
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
}

}  // namespace strata
