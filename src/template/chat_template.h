// Chat templates: turn a conversation (JSON messages, tools, flags) into the prompt text a model
// was trained on. A GGUF file usually carries its template as `tokenizer.chat_template` (a
// Jinja2 program, rendered here by strata's own interpreter, see jinja_template.h); when it does
// not, a built-in template for the model's family is chosen by default_chat_family().
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gguf/gguf_file.h"
#include "template/jinja_template.h"
#include "util/result.h"

namespace strata {

// Prompt formats with a built-in template.
enum class ChatFamily {
    ChatML,   // <|im_start|>role\n...<|im_end|>\n (Qwen, Yi, many fine-tunes)
    Llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
    Llama2,   // <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
    Mistral,  // <s>[INST] ... [/INST]...</s>, system text prepended to the first user turn
    Gemma,    // <start_of_turn>user\n...<end_of_turn>\n, assistant as "model"
    Phi3,     // <|user|>\n...<|end|>\n<|assistant|>\n
};

std::string_view chat_family_name(ChatFamily family);
// The Jinja source of the built-in template.
std::string_view builtin_chat_template_source(ChatFamily family);

struct DefaultChatChoice {
    ChatFamily family;
    std::string reason;  // why, for messages: "the vocabulary has <|im_start|>"
};

// The rule for a model without tokenizer.chat_template, first match wins:
//   1. the vocabulary has <|start_header_id|> and <|eot_id|>          -> Llama3
//   2. the vocabulary has <|im_start|>                                  -> ChatML
//   3. the vocabulary has <start_of_turn>, or the architecture is gemma* -> Gemma
//   4. the vocabulary has <|user|> and <|assistant|>, or arch is phi3  -> Phi3
//   5. the vocabulary has [INST] as a single token                      -> Mistral
//   6. a SentencePiece vocabulary (tokenizer.ggml.model "llama")        -> Llama2
//   7. anything else                                                    -> ChatML
DefaultChatChoice default_chat_family(std::string_view architecture,
                                      const std::vector<std::string>& tokens,
                                      std::string_view tokenizer_model);
DefaultChatChoice default_chat_family(const GgufFile& file);

// The texts of tokenizer.ggml.tokens (empty when the file has none).
std::vector<std::string> vocabulary_tokens(const GgufFile& file);

class ChatTemplate {
  public:
    // `name` names the template in error messages.
    static Result<ChatTemplate> parse(std::string_view source, std::string name = "chat template");
    static ChatTemplate builtin(ChatFamily family);
    // The file's tokenizer.chat_template, or the built-in default for its family. The bos and
    // eos token texts come from the vocabulary (tokenizer.ggml.tokens at bos/eos_token_id).
    static Result<ChatTemplate> from_gguf(const GgufFile& file);

    // Renders with `context` as variables (messages, add_generation_prompt, tools, ...). When
    // the context does not set bos_token / eos_token, the vocabulary's texts are used.
    Result<std::string> render(const nlohmann::ordered_json& context,
                               const jinja::RenderOptions& options = {}) const;

    const std::string& name() const { return template_.name(); }
    // Where the template came from: "tokenizer.chat_template", or "built-in ChatML (...)".
    const std::string& origin() const { return origin_; }
    const std::optional<std::string>& bos_token() const { return bos_token_; }
    const std::optional<std::string>& eos_token() const { return eos_token_; }

  private:
    ChatTemplate(jinja::Template t, std::string origin)
        : template_(std::move(t)), origin_(std::move(origin)) {}
    jinja::Template template_;
    std::string origin_;
    std::optional<std::string> bos_token_, eos_token_;
};

}  // namespace strata
