#include "session/json_token_constraint.h"

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
    : constraint_(std::move(constraint)), mask_(mask), tokenizer_(tokenizer) {}

void JsonTokenConstraint::restrict(std::span<float> logits, int64_t tokens_left) {
    // Every token adds at least one byte, so a completion of k bytes needs at most k tokens:
    // start closing while that many are still left (plus one for the end-of-generation token).
    const bool closing =
        tokens_left >= 0 && tokens_left <= int64_t(constraint_.shortest_completion().size()) + 1;
    mask_.apply(constraint_, logits, closing);
}

void JsonTokenConstraint::accept(TokenId id) {
    if (tokenizer_.is_end_of_generation(id) || tokenizer_.is_hidden(id)) return;
    (void)constraint_.advance(tokenizer_.piece(id));
}

}  // namespace strata
