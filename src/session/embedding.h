// Text embeddings from a generative model: the final hidden state (after the output norm) of
// every token, averaged. strata runs causal language models, not pooling embedding models, so
// this mean-pooled state is what it offers for /api/embed and the like; it is a reasonable
// sentence vector, though not as good for retrieval as a model trained for it.
#pragma once

#include <vector>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace strata {

struct Embedding {
    std::vector<float> vector;
    uint32_t tokens = 0;  // tokens evaluated (after any cut)
};

// Evaluates `tokens` from position 0 (the engine's context is cleared first and left holding
// them) and mean-pools their hidden states. Tokens beyond the context: an error unless
// `truncate`, which keeps the first ones that fit.
Result<Embedding> embed_tokens(engine::Engine& engine, std::vector<TokenId> tokens, bool truncate);

// Scales to unit L2 length (a zero vector stays zero).
void l2_normalize(std::vector<float>& v);

}  // namespace strata
