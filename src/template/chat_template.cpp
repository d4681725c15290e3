#include "template/chat_template.h"

#include <algorithm>
#include <cassert>

#include <nlohmann/json.hpp>

namespace strata {

namespace {

// Built-in templates. Message content that is not a string (an assistant turn that only makes
// tool calls has content null) renders as empty text.

constexpr std::string_view kChatML = R"JINJA(
{%- for message in messages -%}
    {%- set content = message['content'] if message['content'] is string else '' -%}
    {{- '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)JINJA";

constexpr std::string_view kLlama3 = R"JINJA(
{{- bos_token -}}
{%- for message in messages -%}
    {%- set content = message['content'] if message['content'] is string else '' -%}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + content | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)JINJA";

// Llama 2: the system prompt goes inside the first [INST] block between <<SYS>> markers; every
// user turn opens with bos_token, every assistant turn closes with eos_token.
constexpr std::string_view kLlama2 = R"JINJA(
{%- set ns = namespace(system='') -%}
{%- if messages and messages[0]['role'] == 'system' -%}
    {%- set ns.system = messages[0]['content'] -%}
    {%- set messages = messages[1:] -%}
{%- endif -%}
{%- for message in messages -%}
    {%- set content = message['content'] if message['content'] is string else '' -%}
    {%- if message['role'] == 'user' -%}
        {%- if loop.first and ns.system -%}
            {%- set content = '<<SYS>>\n' + ns.system + '\n<</SYS>>\n\n' + content -%}
        {%- endif -%}
        {{- bos_token + '[INST] ' + content | trim + ' [/INST]' -}}
    {%- elif message['role'] == 'assistant' -%}
        {{- ' ' + content | trim + ' ' + eos_token -}}
    {%- endif -%}
{%- endfor -%}
)JINJA";

// Mistral (v1 instruct format): no system role, so system text is prepended to the first user
// message; assistant turns end with eos_token.
constexpr std::string_view kMistral = R"JINJA(
{{- bos_token -}}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
    {%- set content = message['content'] if message['content'] is string else '' -%}
    {%- if message['role'] == 'system' -%}
        {%- set ns.system = ns.system + content + '\n\n' -%}
    {%- elif message['role'] == 'user' -%}
        {{- '[INST] ' + ns.system + content + ' [/INST]' -}}
        {%- set ns.system = '' -%}
    {%- elif message['role'] == 'assistant' -%}
        {{- content + eos_token -}}
    {%- endif -%}
{%- endfor -%}
)JINJA";

// Gemma has user and model turns only; system text opens the first user turn.
constexpr std::string_view kGemma = R"JINJA(
{{- bos_token -}}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
    {%- set content = message['content'] if message['content'] is string else '' -%}
    {%- if message['role'] == 'system' -%}
        {%- set ns.system = ns.system + content | trim + '\n\n' -%}
    {%- elif message['role'] in ['user', 'assistant'] -%}
        {%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}
        {%- set text = ns.system + content | trim if role == 'user' else content | trim -%}
        {%- if role == 'user' -%}{%- set ns.system = '' -%}{%- endif -%}
        {{- '<start_of_turn>' + role + '\n' + text + '<end_of_turn>\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)JINJA";

constexpr std::string_view kPhi3 = R"JINJA(
{%- for message in messages -%}
    {%- set content = message['content'] if message['content'] is string else '' -%}
    {%- if message['role'] == 'system' and content -%}
        {{- '<|system|>\n' + content + '<|end|>\n' -}}
    {%- elif message['role'] == 'user' -%}
        {{- '<|user|>\n' + content + '<|end|>\n' -}}
    {%- elif message['role'] == 'assistant' -%}
        {{- '<|assistant|>\n' + content + '<|end|>\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|assistant|>\n' -}}
{%- else -%}
    {{- eos_token -}}
{%- endif -%}
)JINJA";

bool has_token(const std::vector<std::string>& tokens, std::string_view t) {
    return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

std::optional<std::string> token_text(const GgufFile& file, const std::vector<std::string>& tokens,
                                      std::string_view id_key) {
    const auto id = file.get_int(id_key);
    if (!id || *id < 0 || static_cast<uint64_t>(*id) >= tokens.size()) return std::nullopt;
    return tokens[static_cast<size_t>(*id)];
}

}  // namespace

std::vector<std::string> vocabulary_tokens(const GgufFile& file) {
    std::vector<std::string> tokens;
    if (const Array* a = file.get_array("tokenizer.ggml.tokens")) {
        tokens.reserve(a->items.size());
        for (const auto& v : a->items) {
            if (const std::string* s = v.as_string()) tokens.push_back(*s);
        }
    }
    return tokens;
}

std::string_view chat_family_name(ChatFamily family) {
    switch (family) {
        case ChatFamily::ChatML:
            return "ChatML";
        case ChatFamily::Llama3:
            return "Llama 3";
        case ChatFamily::Llama2:
            return "Llama 2";
        case ChatFamily::Mistral:
            return "Mistral";
        case ChatFamily::Gemma:
            return "Gemma";
        case ChatFamily::Phi3:
            return "Phi-3";
    }
    return "ChatML";
}

std::string_view builtin_chat_template_source(ChatFamily family) {
    switch (family) {
        case ChatFamily::ChatML:
            return kChatML;
        case ChatFamily::Llama3:
            return kLlama3;
        case ChatFamily::Llama2:
            return kLlama2;
        case ChatFamily::Mistral:
            return kMistral;
        case ChatFamily::Gemma:
            return kGemma;
        case ChatFamily::Phi3:
            return kPhi3;
    }
    return kChatML;
}

DefaultChatChoice default_chat_family(std::string_view architecture,
                                      const std::vector<std::string>& tokens,
                                      std::string_view tokenizer_model) {
    if (has_token(tokens, "<|start_header_id|>") && has_token(tokens, "<|eot_id|>")) {
        return {ChatFamily::Llama3, "the vocabulary has <|start_header_id|> and <|eot_id|>"};
    }
    if (has_token(tokens, "<|im_start|>")) {
        return {ChatFamily::ChatML, "the vocabulary has <|im_start|>"};
    }
    if (has_token(tokens, "<start_of_turn>")) {
        return {ChatFamily::Gemma, "the vocabulary has <start_of_turn>"};
    }
    if (architecture.substr(0, 5) == "gemma") {
        return {ChatFamily::Gemma, "the architecture is " + std::string(architecture)};
    }
    if (has_token(tokens, "<|user|>") && has_token(tokens, "<|assistant|>")) {
        return {ChatFamily::Phi3, "the vocabulary has <|user|> and <|assistant|>"};
    }
    if (architecture == "phi3") return {ChatFamily::Phi3, "the architecture is phi3"};
    if (has_token(tokens, "[INST]")) {
        return {ChatFamily::Mistral, "the vocabulary has [INST] as a token"};
    }
    if (tokenizer_model == "llama") {
        return {ChatFamily::Llama2, "the vocabulary is SentencePiece (tokenizer.ggml.model llama)"};
    }
    return {ChatFamily::ChatML, "no family-specific tokens; ChatML is the common default"};
}

DefaultChatChoice default_chat_family(const GgufFile& file) {
    return default_chat_family(file.get_string("general.architecture").value_or(""),
                               vocabulary_tokens(file),
                               file.get_string("tokenizer.ggml.model").value_or(""));
}

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string name) {
    STRATA_ASSIGN(jinja::Template t, jinja::Template::parse(source, std::move(name)));
    return ChatTemplate(std::move(t), "template text");
}

ChatTemplate ChatTemplate::builtin(ChatFamily family) {
    const std::string name = "built-in " + std::string(chat_family_name(family)) + " template";
    auto t = jinja::Template::parse(builtin_chat_template_source(family), name);
    assert(t.ok() && "built-in chat templates parse");
    return ChatTemplate(std::move(*t), name);
}

Result<ChatTemplate> ChatTemplate::from_gguf(const GgufFile& file) {
    const std::vector<std::string> tokens = vocabulary_tokens(file);
    std::optional<ChatTemplate> chosen;
    if (auto source = file.get_string("tokenizer.chat_template")) {
        auto t = jinja::Template::parse(*source, file.path + ": tokenizer.chat_template");
        if (!t) return t.take_error();
        chosen = ChatTemplate(std::move(*t), "tokenizer.chat_template");
    } else {
        const DefaultChatChoice choice =
            default_chat_family(file.get_string("general.architecture").value_or(""), tokens,
                                file.get_string("tokenizer.ggml.model").value_or(""));
        chosen = builtin(choice.family);
        chosen->origin_ = "built-in " + std::string(chat_family_name(choice.family)) +
                          " template (the file has no tokenizer.chat_template; " + choice.reason +
                          ")";
    }
    chosen->bos_token_ = token_text(file, tokens, "tokenizer.ggml.bos_token_id");
    chosen->eos_token_ = token_text(file, tokens, "tokenizer.ggml.eos_token_id");
    return std::move(*chosen);
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context,
                                         const jinja::RenderOptions& options) const {
    const bool fill_bos = bos_token_ && context.is_object() && !context.contains("bos_token");
    const bool fill_eos = eos_token_ && context.is_object() && !context.contains("eos_token");
    if (!fill_bos && !fill_eos) return template_.render(context, options);
    nlohmann::ordered_json filled = context;
    if (fill_bos) filled["bos_token"] = *bos_token_;
    if (fill_eos) filled["eos_token"] = *eos_token_;
    return template_.render(filled, options);
}

}  // namespace strata
