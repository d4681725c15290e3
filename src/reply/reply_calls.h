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

// A Harmony call message: the recipient ("functions.NAME", as in the header's to=) and the
// message body, a JSON object of arguments.
std::optional<ToolCall> parse_harmony_call(std::string_view recipient, std::string_view body);

// A whole Llama 3 reply: optional <|python_tag|>, then one or more call objects separated by ';'.
std::optional<std::vector<ToolCall>> parse_llama3_calls(std::string_view reply);

// Text from the first [TOOL_CALLS] on: each [TOOL_CALLS] is followed by a JSON array (or one
// object) of calls, or by name[ARGS]{..} (optionally name[CALL_ID]id[ARGS]{..}).
std::optional<std::vector<ToolCall>> parse_mistral_calls(std::string_view text);

}  // namespace strata
