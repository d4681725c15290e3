// Decoding the text of tool calls once the reply parser has cut it out of the stream. Each
// function accepts what real models write (arguments as an object or as a string holding one,
// "parameters" for "arguments") and returns nothing when the text is not a call, in which case
// the parser gives the text back as content.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// The markup of the tool-call formats, shared by the parser that cuts calls out of the stream
// and the decoders below.
inline constexpr std::string_view kHermesOpen = "<tool_call>";
inline constexpr std::string_view kHermesClose = "</tool_call>";
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";
inline constexpr std::string_view kQwenFunctionOpen = "<function=";
// Harmony (gpt-oss) framing.
inline constexpr std::string_view kHarmonyStart = "<|start|>";
inline constexpr std::string_view kHarmonyChannel = "<|channel|>";
inline constexpr std::string_view kHarmonyMessage = "<|message|>";
inline constexpr std::string_view kHarmonyEnd = "<|end|>";
inline constexpr std::string_view kHarmonyCall = "<|call|>";
inline constexpr std::string_view kHarmonyReturn = "<|return|>";

// DeepSeek V3 / R1 / V3.1: a section of calls, each call
// "type<｜tool▁sep｜>NAME\n```json\nARGS\n```" (V3, R1) or "NAME<｜tool▁sep｜>ARGS" (V3.1).
inline constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
// Kimi K2: a section of calls, each "functions.NAME:IDX<|tool_call_argument_begin|>{..}".
inline constexpr std::string_view kKimiSectionBegin = "<|tool_calls_section_begin|>";
inline constexpr std::string_view kKimiSectionEnd = "<|tool_calls_section_end|>";
inline constexpr std::string_view kKimiCallBegin = "<|tool_call_begin|>";
inline constexpr std::string_view kKimiArgumentBegin = "<|tool_call_argument_begin|>";
inline constexpr std::string_view kKimiCallEnd = "<|tool_call_end|>";
// GLM-4.5 / 4.6 / 4.7: <tool_call>NAME <arg_key>K</arg_key><arg_value>V</arg_value>..</tool_call>.
inline constexpr std::string_view kGlmArgKey = "<arg_key>";

// JSON's whitespace.
inline bool is_json_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

struct ToolCall {
    std::string name;
    nlohmann::ordered_json arguments;  // always an object
};

// One call object: {"name": "f", "arguments"|"parameters": {..} or "{..}" or absent}, also
// wrapped as {"function": {..}}.
std::optional<ToolCall> tool_call_from_json(const nlohmann::ordered_json& j);

// The body between <tool_call> and </tool_call>.
std::optional<ToolCall> parse_hermes_call(std::string_view body);

// The body between <tool_call> and </tool_call> in Qwen3-Coder / Qwen3.5 style:
// <function=NAME> then <parameter=KEY>VALUE</parameter> for each argument, then </function>.
// The newline after each opening tag and before each closing one is markup. Values are text:
// a parameter that the request's tools declare as a string stays one ("00123" is a zip code);
// any other value that is JSON (number, boolean, null, array, object) is taken as that.
// tools: the request's tools array, or null.
std::optional<ToolCall> parse_qwen_xml_call(std::string_view body,
                                            const nlohmann::ordered_json& tools = nullptr);

// The text between <｜tool▁calls▁begin｜> and <｜tool▁calls▁end｜>: one or more
// <｜tool▁call▁begin｜>..<｜tool▁call▁end｜>, in DeepSeek V3's form (the type "function", the
// separator, the name, then the arguments in a ```json fence) or V3.1's (name, separator,
// arguments).
std::optional<std::vector<ToolCall>> parse_deepseek_calls(std::string_view section);

// The text between <|tool_calls_section_begin|> and <|tool_calls_section_end|>: one or more
// <|tool_call_begin|>ID<|tool_call_argument_begin|>{..}<|tool_call_end|>, where ID is
// "functions.NAME:INDEX" (the name is taken from it).
std::optional<std::vector<ToolCall>> parse_kimi_calls(std::string_view section);

// The body between <tool_call> and </tool_call> in GLM-4.5's style: the name (up to a newline or
// the first <arg_key>), then <arg_key>KEY</arg_key> and <arg_value>VALUE</arg_value> per
// argument, with or without newlines between them. The template writes strings as they are and
// other values as JSON, so a value is JSON-typed where it parses as a number, boolean, null,
// array or object, and text otherwise, or always text when the request's tools declare the
// parameter a string.
std::optional<ToolCall> parse_glm_call(std::string_view body,
                                       const nlohmann::ordered_json& tools = nullptr);

// A Harmony call message: the recipient ("functions.NAME", as in the header's to=) and the
// message body, a JSON object of arguments.
std::optional<ToolCall> parse_harmony_call(std::string_view recipient, std::string_view body);

// A whole Llama 3 reply: optional <|python_tag|>, then one or more call objects separated by ';'.
std::optional<std::vector<ToolCall>> parse_llama3_calls(std::string_view reply);

// Text from the first [TOOL_CALLS] on: each [TOOL_CALLS] is followed by a JSON array (or one
// object) of calls, or by name[ARGS]{..} (optionally name[CALL_ID]id[ARGS]{..}).
std::optional<std::vector<ToolCall>> parse_mistral_calls(std::string_view text);

}  // namespace strata
