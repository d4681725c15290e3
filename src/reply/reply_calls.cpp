// Tool-call text to ToolCall values. Parsing never throws: a model's output is untrusted, and a
// malformed call is an ordinary outcome (it becomes content).
#include "reply/reply_calls.h"

namespace strata {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
    return s;
}

// Discarded (is_discarded()) when the text is not exactly one JSON value.
json parse_json(std::string_view text) {
    return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// Arguments as the model gave them, as an object: a string must hold a JSON object.
std::optional<json> arguments_object(const json& args) {
    if (args.is_null()) return json::object();
    if (args.is_object()) return args;
    if (args.is_string()) {
        const std::string& text = args.get_ref<const std::string&>();
        if (trim(text).empty()) return json::object();
        json parsed = parse_json(text);
        if (!parsed.is_discarded() && parsed.is_object()) return parsed;
    }
    return std::nullopt;
}

// Splits at each `sep` outside JSON strings and brackets ("{..};{..}"). Unbalanced text is
// returned as one piece; the JSON parse then rejects it.
std::vector<std::string_view> split_top_level(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') in_string = true;
        if (c == '{' || c == '[') ++depth;
        if (c == '}' || c == ']') --depth;
        if (c == sep && depth == 0) {
            parts.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    parts.push_back(text.substr(start));
    return parts;
}

// One segment after [TOOL_CALLS]: a JSON array/object of calls, or name[ARGS]{..}.
bool append_mistral_segment(std::string_view segment, std::vector<ToolCall>& calls) {
    segment = trim(segment);
    if (segment.starts_with('[') || segment.starts_with('{')) {
        json parsed = parse_json(segment);
        if (parsed.is_discarded()) return false;
        if (parsed.is_object()) parsed = json::array({parsed});
        if (!parsed.is_array() || parsed.empty()) return false;
        for (const json& item : parsed) {
            std::optional<ToolCall> call = tool_call_from_json(item);
            if (!call) return false;
            calls.push_back(std::move(*call));
        }
        return true;
    }
    const size_t args_at = segment.find(kMistralArgs);
    if (args_at == std::string_view::npos) return false;
    std::string_view name = segment.substr(0, args_at);
    if (const size_t id_at = name.find(kMistralCallId); id_at != std::string_view::npos) {
        name = name.substr(0, id_at);
    }
    name = trim(name);
    const json args = parse_json(segment.substr(args_at + kMistralArgs.size()));
    if (name.empty() || args.is_discarded()) return false;
    std::optional<json> object = arguments_object(args);
    if (!object) return false;
    calls.push_back({std::string(name), std::move(*object)});
    return true;
}

}  // namespace

std::optional<ToolCall> tool_call_from_json(const json& j) {
    if (!j.is_object()) return std::nullopt;
    if (!j.contains("name") && j.contains("function") && j["function"].is_object()) {
        return tool_call_from_json(j["function"]);
    }
    const auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
        return std::nullopt;
    }
    json args;  // null: no arguments given
    if (j.contains("arguments")) {
        args = j["arguments"];
    } else if (j.contains("parameters")) {
        args = j["parameters"];
    }
    std::optional<json> object = arguments_object(args);
    if (!object) return std::nullopt;
    return ToolCall{name->get<std::string>(), std::move(*object)};
}

std::optional<ToolCall> parse_hermes_call(std::string_view body) {
    const json parsed = parse_json(trim(body));
    if (parsed.is_discarded()) return std::nullopt;
    return tool_call_from_json(parsed);
}

std::optional<std::vector<ToolCall>> parse_llama3_calls(std::string_view reply) {
    reply = trim(reply);
    if (reply.starts_with(kPythonTag)) reply.remove_prefix(kPythonTag.size());
    std::vector<ToolCall> calls;
    for (std::string_view part : split_top_level(reply, ';')) {
        part = trim(part);
        if (part.empty()) continue;  // "{..};" with a trailing separator
        const json parsed = parse_json(part);
        if (parsed.is_discarded()) return std::nullopt;
        std::optional<ToolCall> call = tool_call_from_json(parsed);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
    }
    if (calls.empty()) return std::nullopt;
    return calls;
}

std::optional<std::vector<ToolCall>> parse_mistral_calls(std::string_view text) {
    text = trim(text);
    if (!text.starts_with(kMistralCalls)) return std::nullopt;
    std::vector<ToolCall> calls;
    while (!text.empty()) {
        text.remove_prefix(kMistralCalls.size());
        const size_t next = text.find(kMistralCalls);
        if (!append_mistral_segment(text.substr(0, next), calls)) return std::nullopt;
        text = next == std::string_view::npos ? std::string_view() : text.substr(next);
    }
    return calls;
}

}  // namespace strata
