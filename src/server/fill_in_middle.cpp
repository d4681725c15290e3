#include "server/fill_in_middle.h"

#include <array>
#include <string_view>

namespace strata::server {

namespace {

std::optional<std::string> token_text(const Array* tokens, std::optional<int64_t> id) {
    if (!tokens || !id || *id < 0 || size_t(*id) >= tokens->items.size()) return std::nullopt;
    if (const std::string* s = tokens->items[size_t(*id)].as_string()) return *s;
    return std::nullopt;
}

bool has_token(const Array* tokens, std::string_view text) {
    if (!tokens) return false;
    for (const Value& v : tokens->items) {
        if (const std::string* s = v.as_string(); s && *s == text) return true;
    }
    return false;
}

}  // namespace

std::optional<FimTokens> fill_in_middle_tokens(const GgufFile& file) {
    const Array* tokens = file.get_array("tokenizer.ggml.tokens");
    auto pre = token_text(tokens, file.get_int("tokenizer.ggml.fim_pre_token_id"));
    auto suf = token_text(tokens, file.get_int("tokenizer.ggml.fim_suf_token_id"));
    auto mid = token_text(tokens, file.get_int("tokenizer.ggml.fim_mid_token_id"));
    if (pre && suf && mid) return FimTokens{*pre, *suf, *mid};
    // Files converted before those keys existed: the spellings of Qwen/StarCoder, DeepSeek
    // Coder and CodeLlama.
    static constexpr std::array<std::array<std::string_view, 3>, 4> kKnown = {{
        {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
        {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
        {"<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"},
        {"▁<PRE>", "▁<SUF>", "▁<MID>"},
    }};
    for (const auto& set : kKnown) {
        if (has_token(tokens, set[0]) && has_token(tokens, set[1]) && has_token(tokens, set[2])) {
            return FimTokens{std::string(set[0]), std::string(set[1]), std::string(set[2])};
        }
    }
    return std::nullopt;
}

std::string fill_in_middle_prompt(const FimTokens& t, const std::string& prompt,
                                  const std::string& suffix) {
    return t.prefix + prompt + t.suffix + suffix + t.middle;
}

}  // namespace strata::server
