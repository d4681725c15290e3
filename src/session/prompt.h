// From what a user typed to prompt tokens: the chat template (when the model has one) and
// tokenization that adds the vocabulary's BOS only where the rendered text lacks it (templates
// often write the BOS text themselves; a second BOS changes the model's output).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata {

// Tokens of a prompt: special-token text is parsed (templates write <|im_start|> and the like),
// BOS is added when the vocabulary asks for it and the text does not already begin with it.
std::vector<TokenId> tokenize_prompt(const Tokenizer& tokenizer, const std::string& text);

// The conversation rendered with the template and add_generation_prompt, ready to tokenize.
// messages: [{"role": ..., "content": ...}, ...].
Result<std::string> render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages);

}  // namespace strata
