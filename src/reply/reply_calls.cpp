// Tool-call text to ToolCall values. Parsing never throws: a model's output is untrusted, and a
// malformed call is an ordinary outcome (it becomes content).
#include "reply/reply_calls.h"

#include <algorithm>

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

namespace {

// The text between `open` (up to and including the '>' that ends it) and `close`, starting at
// `pos`; advances pos past close. The name in "<function=NAME>" goes to `name`.
bool take_tag(std::string_view text, size_t& pos, std::string_view open, std::string_view close,
              std::string_view& name, std::string_view& value) {
    const size_t start = text.find(open, pos);
    if (start == std::string_view::npos || !trim(text.substr(pos, start - pos)).empty()) {
        return false;
    }
    const size_t name_begin = start + open.size();
    const size_t name_end = text.find('>', name_begin);
    if (name_end == std::string_view::npos) return false;
    name = trim(text.substr(name_begin, name_end - name_begin));
    const size_t close_at = text.find(close, name_end + 1);
    if (close_at == std::string_view::npos) return false;
    value = text.substr(name_end + 1, close_at - name_end - 1);
    pos = close_at + close.size();
    return !name.empty();
}

// The JSON Schema of parameter `key` of function `name` in the request's tools, or null.
const json& parameter_schema(const json& tools, std::string_view name, std::string_view key) {
    static const json none;
    if (!tools.is_array()) return none;
    for (const json& tool : tools) {
        const json& fn = tool.is_object() && tool.contains("function") ? tool["function"] : tool;
        if (!fn.is_object() || fn.value("name", "") != name) continue;
        const auto params = fn.find("parameters");
        if (params == fn.end() || !params->is_object()) return none;
        const auto props = params->find("properties");
        if (props == params->end() || !props->is_object()) return none;
        const auto it = props->find(std::string(key));
        return it == props->end() ? none : *it;
    }
    return none;
}

// The parameter's declared type ("string", "boolean", ...), or "" when it has no single one.
std::string declared_type(const json& schema) {
    if (!schema.is_object()) return {};
    const auto type = schema.find("type");
    return type != schema.end() && type->is_string() ? type->get<std::string>() : std::string();
}

// A value written as text: the declared string type keeps it as it is, anything else that is
// JSON becomes that. Qwen's markup puts a newline after the opening tag and before the closing
// one (markup_newlines); GLM's does not.
json parameter_value(std::string_view raw, const json& schema, bool markup_newlines) {
    if (markup_newlines && raw.starts_with('\n')) raw.remove_prefix(1);
    if (markup_newlines && raw.ends_with('\n')) raw.remove_suffix(1);
    const std::string_view t = trim(raw);
    const std::string type = declared_type(schema);
    if (type == "string") return std::string(raw);
    // Qwen's templates write earlier calls' booleans with Python's str(): True, False.
    if (type == "boolean" && (t == "True" || t == "False")) return t == "True";
    // A quoted JSON string keeps its quotes as text.
    if (!t.empty() && t.front() != '"') {
        json parsed = parse_json(t);
        if (!parsed.is_discarded()) return parsed;
    }
    return std::string(raw);
}

}  // namespace

std::optional<ToolCall> parse_qwen_xml_call(std::string_view body, const json& tools) {
    body = trim(body);
    constexpr std::string_view kFunctionClose = "</function>";
    constexpr std::string_view kParameterOpen = "<parameter=";
    constexpr std::string_view kParameterClose = "</parameter>";
    if (!body.starts_with(kQwenFunctionOpen) || !body.ends_with(kFunctionClose)) {
        return std::nullopt;
    }
    const size_t name_end = body.find('>');
    if (name_end == std::string_view::npos || name_end + 1 > body.size() - kFunctionClose.size()) {
        return std::nullopt;
    }
    const std::string_view name =
        trim(body.substr(kQwenFunctionOpen.size(), name_end - kQwenFunctionOpen.size()));
    if (name.empty()) return std::nullopt;
    const std::string_view params =
        body.substr(name_end + 1, body.size() - kFunctionClose.size() - name_end - 1);
    ToolCall call{std::string(name), json::object()};
    size_t pos = 0;
    while (!trim(params.substr(pos)).empty()) {
        std::string_view key, value;
        if (!take_tag(params, pos, kParameterOpen, kParameterClose, key, value)) {
            return std::nullopt;
        }
        call.arguments[std::string(key)] =
            parameter_value(value, parameter_schema(tools, call.name, key), true);
    }
    return call;
}

namespace {

// Splits a section into the bodies between `begin` and `end`, which must follow one another
// with only whitespace around them. The last call may lack `end` when the reply stopped right
// after its arguments (the caller decides whether an unclosed section counts).
std::optional<std::vector<std::string_view>> section_bodies(std::string_view section,
                                                            std::string_view begin,
                                                            std::string_view end) {
    std::vector<std::string_view> bodies;
    section = trim(section);
    while (!section.empty()) {
        if (!section.starts_with(begin)) return std::nullopt;
        section.remove_prefix(begin.size());
        const size_t end_at = section.find(end);
        bodies.push_back(section.substr(0, end_at));
        if (end_at == std::string_view::npos) break;
        section = trim(section.substr(end_at + end.size()));
    }
    if (bodies.empty()) return std::nullopt;
    return bodies;
}

// "```json\n{..}\n```" or "{..}" to the arguments object.
std::optional<json> fenced_arguments(std::string_view text) {
    text = trim(text);
    if (text.starts_with("```")) {
        const size_t line_end = text.find('\n');
        if (line_end == std::string_view::npos || !text.ends_with("```")) return std::nullopt;
        text = trim(text.substr(line_end + 1, text.size() - 3 - line_end - 1));
    }
    const json args = parse_json(text);
    if (args.is_discarded()) return std::nullopt;
    return arguments_object(args);
}

std::optional<ToolCall> parse_deepseek_call(std::string_view body) {
    const size_t sep = body.find(kDeepSeekSep);
    if (sep == std::string_view::npos) return std::nullopt;
    std::string_view head = trim(body.substr(0, sep));
    std::string_view tail = body.substr(sep + kDeepSeekSep.size());
    // V3 and R1 put the call's type first and the name on the line after the separator; V3.1
    // puts the name first and the arguments right after the separator.
    if (head == "function" && !trim(tail).starts_with('{')) {
        tail = trim(tail);
        const size_t line_end = tail.find('\n');
        head = trim(tail.substr(0, line_end));
        tail = line_end == std::string_view::npos ? std::string_view() : tail.substr(line_end);
    }
    if (head.empty()) return std::nullopt;
    std::optional<json> args = fenced_arguments(tail);
    if (!args) return std::nullopt;
    return ToolCall{std::string(head), std::move(*args)};
}

std::optional<ToolCall> parse_kimi_call(std::string_view body) {
    const size_t arg_at = body.find(kKimiArgumentBegin);
    if (arg_at == std::string_view::npos) return std::nullopt;
    std::string_view name = trim(body.substr(0, arg_at));
    constexpr std::string_view kFunctions = "functions.";
    if (name.starts_with(kFunctions)) name.remove_prefix(kFunctions.size());
    // The call's index in the reply (":0", ":1", ..) follows the name.
    if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) {
        const std::string_view index = name.substr(colon + 1);
        if (!index.empty() && index.find_first_not_of("0123456789") == std::string_view::npos) {
            name = name.substr(0, colon);
        }
    }
    if (name.empty()) return std::nullopt;
    const json args = parse_json(trim(body.substr(arg_at + kKimiArgumentBegin.size())));
    if (args.is_discarded()) return std::nullopt;
    std::optional<json> object = arguments_object(args);
    if (!object) return std::nullopt;
    return ToolCall{std::string(name), std::move(*object)};
}

template <typename ParseOne>
std::optional<std::vector<ToolCall>> parse_section(std::string_view section, std::string_view begin,
                                                   std::string_view end, ParseOne parse_one) {
    const auto bodies = section_bodies(section, begin, end);
    if (!bodies) return std::nullopt;
    std::vector<ToolCall> calls;
    for (std::string_view body : *bodies) {
        std::optional<ToolCall> call = parse_one(body);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
    }
    return calls;
}

// The text after `open` up to `close`, both fixed tags, starting at pos (only whitespace
// before `open`); advances pos past close.
bool take_fixed_tag(std::string_view text, size_t& pos, std::string_view open,
                    std::string_view close, std::string_view& value) {
    const size_t start = text.find(open, pos);
    if (start == std::string_view::npos || !trim(text.substr(pos, start - pos)).empty()) {
        return false;
    }
    const size_t close_at = text.find(close, start + open.size());
    if (close_at == std::string_view::npos) return false;
    value = text.substr(start + open.size(), close_at - start - open.size());
    pos = close_at + close.size();
    return true;
}

}  // namespace

std::optional<std::vector<ToolCall>> parse_deepseek_calls(std::string_view section) {
    return parse_section(section, kDeepSeekCallBegin, kDeepSeekCallEnd, parse_deepseek_call);
}

std::optional<std::vector<ToolCall>> parse_kimi_calls(std::string_view section) {
    return parse_section(section, kKimiCallBegin, kKimiCallEnd, parse_kimi_call);
}

std::optional<ToolCall> parse_glm_call(std::string_view body, const json& tools) {
    constexpr std::string_view kArgKeyClose = "</arg_key>";
    constexpr std::string_view kArgValueOpen = "<arg_value>";
    constexpr std::string_view kArgValueClose = "</arg_value>";
    body = trim(body);
    const size_t name_end = std::min(body.find('\n'), body.find(kGlmArgKey));
    const std::string_view name = trim(body.substr(0, name_end));
    // A JSON body is Hermes' format, not this one.
    if (name.empty() || name.find_first_of("<>{}\"") != std::string_view::npos) {
        return std::nullopt;
    }
    ToolCall call{std::string(name), json::object()};
    const std::string_view args =
        name_end == std::string_view::npos ? std::string_view() : body.substr(name_end);
    size_t pos = 0;
    while (!trim(args.substr(pos)).empty()) {
        std::string_view key, value;
        if (!take_fixed_tag(args, pos, kGlmArgKey, kArgKeyClose, key) ||
            !take_fixed_tag(args, pos, kArgValueOpen, kArgValueClose, value)) {
            return std::nullopt;
        }
        key = trim(key);
        if (key.empty()) return std::nullopt;
        call.arguments[std::string(key)] =
            parameter_value(value, parameter_schema(tools, call.name, key), false);
    }
    return call;
}

std::optional<ToolCall> parse_harmony_call(std::string_view recipient, std::string_view body) {
    constexpr std::string_view kFunctions = "functions.";
    recipient = trim(recipient);
    if (recipient.starts_with(kFunctions)) recipient.remove_prefix(kFunctions.size());
    if (recipient.empty()) return std::nullopt;
    const json args = parse_json(trim(body));
    if (args.is_discarded()) return std::nullopt;
    std::optional<json> object = arguments_object(args);
    if (!object) return std::nullopt;
    return ToolCall{std::string(recipient), std::move(*object)};
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
