#include "session/embedding.h"

#include <cmath>

namespace strata {

EmbedResult embed_tokens(engine::Engine& engine, std::vector<TokenId> tokens, bool truncate,
                         int seq, SequenceEvaluator* shared) {
    if (tokens.empty()) return EmbedFailure{EmbedError::Evaluation, "nothing to embed: no tokens"};
    const uint32_t n_ctx = engine.n_ctx();
    if (tokens.size() > n_ctx) {
        if (!truncate) {
            return EmbedFailure{EmbedError::ContextOverflow,
                                "the input length exceeds the context length (" +
                                    std::to_string(tokens.size()) + " tokens, the context holds " +
                                    std::to_string(n_ctx) + ")"};
        }
        tokens.resize(n_ctx);
    }
    engine.truncate(0, seq);
    std::vector<float> hidden;
    Result<void> evaluated;
    if (shared) {
        // Steps wait for this sequence from here until its hidden states are out.
        const JoinedSequence joined(shared, seq);
        evaluated = shared->eval(seq, tokens, engine::LogitsWanted::Hidden, hidden, nullptr);
    } else {
        evaluated = engine.eval(tokens, engine::LogitsWanted::Hidden, hidden, seq);
    }
    if (!evaluated) return EmbedFailure{EmbedError::Evaluation, evaluated.error().message};
    const size_t d = engine.hparams().n_embd;
    Embedding e;
    e.tokens = uint32_t(tokens.size());
    e.vector.assign(d, 0.0f);
    // Summed in double: thousands of rows of float would lose the small components.
    std::vector<double> sum(d, 0.0);
    for (size_t t = 0; t < tokens.size(); ++t) {
        const float* row = hidden.data() + t * d;
        for (size_t i = 0; i < d; ++i) sum[i] += row[i];
    }
    for (size_t i = 0; i < d; ++i) e.vector[i] = float(sum[i] / double(tokens.size()));
    return e;
}

void l2_normalize(std::vector<float>& v) {
    double ss = 0;
    for (float x : v) ss += double(x) * x;
    if (ss <= 0) return;
    const double inv = 1.0 / std::sqrt(ss);
    for (float& x : v) x = float(x * inv);
}

}  // namespace strata
