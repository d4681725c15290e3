#include "session/json_token_constraint.h"

#include <algorithm>

namespace strata {

std::unique_ptr<TokenMask> make_token_mask(const Tokenizer& tokenizer) {
    const auto n = uint32_t(tokenizer.vocab().size());
    std::vector<std::string> bytes(n);
    std::vector<bool> eog(n);
    for (uint32_t id = 0; id < n; ++id) {
        const TokenId t = TokenId(id);
        eog[id] = tokenizer.is_end_of_generation(t);
        if (!tokenizer.is_hidden(t)) bytes[id] = tokenizer.piece(t);
    }
    return std::make_unique<TokenMask>(std::move(bytes), std::move(eog));
}

JsonTokenConstraint::JsonTokenConstraint(JsonConstraint constraint, const TokenMask& mask,
                                         const Tokenizer& tokenizer)
    : constraint_(std::move(constraint)), mask_(mask), tokenizer_(tokenizer) {
    plan_ = constraint_.shortest_completion();
    plan_cost_ = mask_.spelling_costs(plan_)[0];
}

void JsonTokenConstraint::update_plan() {
    // The shortest completion in bytes is not always the cheapest in tokens, and it may change
    // as tokens come, so the kept plan (still valid after a token that began it) competes.
    std::string shortest = constraint_.shortest_completion();
    if (shortest == plan_) return;
    const uint32_t cost = mask_.spelling_costs(shortest)[0];
    if (cost <= plan_cost_) {
        plan_ = std::move(shortest);
        plan_cost_ = cost;
    }
}

void JsonTokenConstraint::restrict(std::span<float> logits, int64_t tokens_left) {
    update_plan();
    // A vocabulary that cannot spell the plan (no single-byte tokens) closes as soon as the
    // plan's bytes, at a token each, would no longer fit.
    const int64_t cost =
        plan_cost_ == TokenMask::kCannotSpell ? int64_t(plan_.size()) + 1 : int64_t(plan_cost_);
    if (tokens_left >= 0 && tokens_left <= cost) {
        mask_.apply_closing(constraint_, logits, plan_, tokens_left);
    } else {
        mask_.apply(constraint_, logits);
    }
}

bool JsonTokenConstraint::leaves_room(TokenId id, int64_t tokens_left) const {
    if (tokens_left < 0 || plan_cost_ == TokenMask::kCannotSpell ||
        tokenizer_.is_end_of_generation(id) || tokenizer_.is_hidden(id)) {
        return true;
    }
    const std::string piece = tokenizer_.piece(id);
    // Never ask for more than the plan needed before: when the budget is already short, the
    // plan's own tokens are the best there is.
    const int64_t room = std::max<int64_t>(tokens_left, plan_cost_) - 1;
    if (plan_.starts_with(piece) &&
        mask_.spelling_costs(std::string_view(plan_).substr(piece.size()))[0] <= room) {
        return true;
    }
    JsonConstraint after = constraint_;
    if (!after.advance(piece)) return true;  // not ours to judge: the mask decides
    if (after.complete()) return true;
    const uint32_t cost = mask_.spelling_costs(after.shortest_completion())[0];
    return cost != TokenMask::kCannotSpell && int64_t(cost) <= room;
}

void JsonTokenConstraint::accept(TokenId id) {
    if (tokenizer_.is_end_of_generation(id) || tokenizer_.is_hidden(id)) return;
    const std::string piece = tokenizer_.piece(id);
    (void)constraint_.advance(piece);
    if (plan_.starts_with(piece)) {
        plan_.erase(0, piece.size());
        plan_cost_ = mask_.spelling_costs(plan_)[0];
    } else {
        plan_ = constraint_.shortest_completion();
        plan_cost_ = mask_.spelling_costs(plan_)[0];
    }
}

}  // namespace strata
