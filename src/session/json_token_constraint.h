// Structured output in the generation loop: a JsonConstraint (json_constraint.h) applied to
// the model's tokens. Before each draw the tokens that would break the JSON are masked out.
//
// The token budget (num_predict and the context) is kept so that the answer parses whenever
// it holds at least tokens_to_finish() tokens: a plan, bytes that finish the value, is kept
// with the fewest tokens that spell it. A token is drawn only if what it leaves can still be
// finished in the tokens then left, and once the budget equals the plan's cost only the plan's
// tokens are allowed.
#pragma once

#include <memory>
#include <string>

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
    bool leaves_room(TokenId id, int64_t tokens_left) const override;
    void accept(TokenId id) override;
    bool finished() const override { return constraint_.complete(); }

    // The fewest tokens that finish the value from here (from the start: the fewest any
    // answer takes, as far as the shortest answer shows); TokenMask::kCannotSpell when the
    // vocabulary cannot write it.
    uint32_t tokens_to_finish() const { return plan_cost_; }

  private:
    // Sets plan_ to the cheaper of the plan kept so far and the constraint's shortest
    // completion from here.
    void update_plan();

    JsonConstraint constraint_;
    const TokenMask& mask_;
    const Tokenizer& tokenizer_;
    // Bytes that finish the value from the current state, and the fewest tokens spelling them.
    std::string plan_;
    uint32_t plan_cost_ = 0;
};

}  // namespace strata
