// Text embeddings from a generative model: the final hidden state (after the output norm) of
// every token, averaged. strata runs causal language models, not pooling embedding models, so
// this mean-pooled state is what it offers for /api/embed and the like; it is a reasonable
// sentence vector, though not as good for retrieval as a model trained for it.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "session/sequence_evaluator.h"
#include "tokenizer/tokenizer.h"

namespace strata {

struct Embedding {
    std::vector<float> vector;
    uint32_t tokens = 0;  // tokens evaluated (after any cut)
};

// Why there is no embedding: a front end answers an input too long for the context as the
// request's fault, and anything else as its own.
enum class EmbedError {
    ContextOverflow,  // more tokens than the context holds, and the input may not be cut
    Evaluation,       // the engine failed, or there was nothing to evaluate
};

struct EmbedFailure {
    EmbedError kind;
    std::string message;
};

// An embedding, or why there is none.
using EmbedResult = std::variant<Embedding, EmbedFailure>;

// Evaluates `tokens` in sequence `seq` from position 0 (its context is cleared first and left
// holding them) and mean-pools their hidden states. With `shared` (an engine the sequences share,
// session/sequence_evaluator.h) the evaluation goes through it, in the steps of the other
// sequences' generations; without, the engine is this call's while it runs. Tokens beyond the
// context: ContextOverflow unless `truncate`, which keeps the first ones that fit.
EmbedResult embed_tokens(engine::Engine& engine, std::vector<TokenId> tokens, bool truncate,
                         int seq = 0, SequenceEvaluator* shared = nullptr);

// Scales to unit L2 length (a zero vector stays zero).
void l2_normalize(std::vector<float>& v);

}  // namespace strata
