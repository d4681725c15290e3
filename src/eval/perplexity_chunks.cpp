#include "eval/perplexity_chunks.h"

#include <algorithm>
#include <string>

namespace strata {

std::span<const int32_t> PerplexityChunks::original(int32_t c) const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(c) * n_ctx,
                                                    static_cast<size_t>(n_ctx));
}

std::vector<int32_t> PerplexityChunks::eval_tokens(int32_t c) const {
    const std::span<const int32_t> src = original(c);
    std::vector<int32_t> out(src.begin(), src.end());
    if (bos) out[0] = *bos;
    return out;
}

int32_t PerplexityChunks::target(int32_t c, int32_t j) const {
    return tokens[static_cast<size_t>(c) * n_ctx + first() + j + 1];
}

Result<PerplexityChunks> make_perplexity_chunks(std::span<const int32_t> text_tokens, int32_t n_ctx,
                                                int32_t max_chunks, std::optional<int32_t> bos) {
    if (n_ctx < 3) {
        return err("perplexity: a context of ", std::to_string(n_ctx),
                   " scores no position; use at least 3 (typically 128 to 4096)");
    }
    if (max_chunks == 0) return err("perplexity: 0 chunks requested; ask for at least 1");
    // llama.cpp asks for two windows' worth of text, though one full window would do.
    const size_t needed = 2 * static_cast<size_t>(n_ctx);
    if (text_tokens.size() < needed) {
        return err("perplexity: the text has ", std::to_string(text_tokens.size()),
                   " tokens; a context of ", std::to_string(n_ctx), " needs at least ",
                   std::to_string(needed), " (two windows, as llama.cpp requires)");
    }
    PerplexityChunks p;
    p.n_ctx = n_ctx;
    const size_t available = text_tokens.size() / static_cast<size_t>(n_ctx);
    p.n_chunk = static_cast<int32_t>(
        max_chunks < 0 ? available : std::min(available, static_cast<size_t>(max_chunks)));
    p.tokens.assign(text_tokens.begin(),
                    text_tokens.begin() + static_cast<ptrdiff_t>(p.n_chunk) * n_ctx);
    p.bos = bos;
    return p;
}

}  // namespace strata
