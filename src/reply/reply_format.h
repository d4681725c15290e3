// What a model's reply looks like: which tool-call markup it writes and which tags wrap its
// reasoning. Read from the chat template (the only place a GGUF says how tools are shown to the
// model), so the server knows what to accept (`tools`, `think`) and how to split the reply
// (ReplyParser), and what to force when a request demands a tool call (forced_call_grammar).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace strata {

enum class ToolCallFormat {
    None,
    // <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>, any number, text allowed before
    // (Qwen2.5, Qwen3, Hermes 2/3).
    Hermes,
    // The whole reply is {"name": .., "parameters"|"arguments": {..}}, optionally after
    // <|python_tag|>, several separated by ';' (Llama 3.1/3.2/3.3).
    Llama3Json,
    // [TOOL_CALLS] [{"name": .., "arguments": {..}}, ..], or the newer
    // [TOOL_CALLS]name[ARGS]{..} repeated (Mistral, Mistral-Nemo, Mistral Small).
    MistralToolCalls,
    // <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>..</function>\n</tool_call>
    // (Qwen3-Coder, Qwen3.5): XML-like, one <parameter> per argument, values as plain text.
    QwenXml,
    // OpenAI's Harmony (gpt-oss): the whole reply is messages on channels,
    // <|channel|>analysis<|message|>..<|end|><|start|>assistant<|channel|>final<|message|>..,
    // and a call is a commentary message to a function:
    // <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>.
    Harmony,
    // DeepSeek V3, R1 and V3.1: <｜tool▁calls▁begin｜> then per call
    // <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜> (V3.1:
    // <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>), then <｜tool▁calls▁end｜>.
    DeepSeek,
    // Kimi K2 / K2.5: <|tool_calls_section_begin|> then per call
    // <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{..}<|tool_call_end|>, then
    // <|tool_calls_section_end|>.
    KimiK2,
    // GLM-4.5 / 4.6 / 4.7: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>..
    // </tool_call>, values written as text (strings) or JSON (anything else).
    GlmXml,
};

// Name for logs and test messages: "none", "hermes", "llama3-json", "mistral", "qwen-xml",
// "harmony", "deepseek", "kimi-k2", "glm-xml".
std::string_view to_string(ToolCallFormat format);

struct ReplyFormat {
    ToolCallFormat tools = ToolCallFormat::None;
    std::string think_open, think_close;  // "<think>", "</think>"; empty: no thinking support
    // The rendered prompt already ends with think_open (DeepSeek-R1, Qwen3 forced thinking): the
    // reply begins inside the reasoning.
    bool starts_in_thinking = false;
};

struct TemplateCapabilities {
    bool tools = false;     // the template renders a `tools` list (it may still have format None)
    bool thinking = false;  // the model writes reasoning between format.think_open/think_close
    ReplyFormat format;     // starts_in_thinking is left false: it depends on the prompt
};

// Reads the template source for tool-call markers ("<|channel|>" for Harmony, "[TOOL_CALLS]",
// DeepSeek's "<｜tool▁calls▁begin｜>", Kimi's "<|tool_calls_section_begin|>", "<tool_call>" with
// "<arg_key>", with "<function=" or alone, "<|python_tag|>" or a JSON "parameters" instruction) and
// thinking markers ("<think>" with "</think>"; Harmony's analysis channel). token_texts is the
// vocabulary (may be empty): when given, thinking also needs
// "<think>" and "</think>" to be tokens, since templates copied between models sometimes keep
// the tags only to strip them from old turns.
TemplateCapabilities detect_capabilities(std::string_view template_source,
                                         const std::vector<std::string>& token_texts);

// The format for one request: starts_in_thinking when the rendered prompt ends with think_open
// (ignoring trailing whitespace). With thinking_enabled false the think markers are cleared, so
// the reply is all content.
ReplyFormat format_for_prompt(const TemplateCapabilities& caps, std::string_view rendered_prompt,
                              bool thinking_enabled);

// Forcing a tool call (tool_choice "required", or one named function): generation is constrained
// to prefix + JSON that matches `schema` + suffix. The schema describes one call object,
// {"name": .., "arguments": {..}} ("parameters" for Llama3Json), as anyOf over the tools so that
// each name goes with its own parameters.
struct ForcedCallGrammar {
    std::string prefix, suffix;
    nlohmann::ordered_json schema;
};

// tools: the request's tools array ([{"type": "function", "function": {"name", "parameters"}}],
// a bare {"name", "parameters"} is accepted too). only_function: restrict to that tool.
Result<ForcedCallGrammar> forced_call_grammar(ToolCallFormat format,
                                              const nlohmann::ordered_json& tools,
                                              std::string_view only_function = "");

}  // namespace strata
