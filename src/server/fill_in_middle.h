// Fill-in-the-middle (Ollama's `suffix`, the `insert` capability): models trained for it have
// prefix, suffix and middle tokens, and the prompt is prefix + text + suffix + rest + middle;
// the model then writes what goes between.
#pragma once

#include <optional>
#include <string>

#include "gguf/gguf_file.h"

namespace strata::server {

struct FimTokens {
    std::string prefix, suffix, middle;  // token texts, parsed as special tokens
};

// From tokenizer.ggml.fim_{pre,suf,mid}_token_id, or the usual token texts (<|fim_prefix|>,
// <fim_prefix>, ▁<PRE>, ...); nullopt when the vocabulary has no complete set.
std::optional<FimTokens> fill_in_middle_tokens(const GgufFile& file);

// The prompt text for `prompt` before the gap and `suffix` after it (prefix-suffix-middle order,
// the one every family above was trained with).
std::string fill_in_middle_prompt(const FimTokens& t, const std::string& prompt,
                                  const std::string& suffix);

}  // namespace strata::server
