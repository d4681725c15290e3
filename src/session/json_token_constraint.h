// Structured output in the generation loop: a JsonConstraint (json_constraint.h) applied to
// the model's tokens. Before each draw the tokens that would break the JSON are masked out;
// when the answer's token budget is about to run out, only tokens that close the value are
// left, so that even an answer cut by num_predict or the context parses.
#pragma once

#include <memory>

#include "constrain/json_constraint.h"
#include "session/generation.h"
#include "tokenizer/tokenizer.h"

namespace strata {

// The vocabulary as the constraint sees it: each token's bytes; control tokens (whose text
// is never part of the answer) as nothing, so they are never allowed inside the JSON.
std::unique_ptr<TokenMask> make_token_mask(const Tokenizer& tokenizer);

class JsonTokenConstraint : public TokenConstraint {
  public:
    JsonTokenConstraint(JsonConstraint constraint, const TokenMask& mask,
                        const Tokenizer& tokenizer);
    void restrict(std::span<float> logits, int64_t tokens_left) override;
    void accept(TokenId id) override;
    bool finished() const override { return constraint_.complete(); }

  private:
    JsonConstraint constraint_;
    const TokenMask& mask_;
    const Tokenizer& tokenizer_;
};

}  // namespace strata
