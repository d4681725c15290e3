// Template-driven detection of the reply format, and the schema used to force a tool call.
// Detection is by literal markers in the template source: each tool-call format has a marker no
// other family's template contains, checked from the most specific to the least.
#include "reply/reply_format.h"

#include <algorithm>

#include "reply/reply_calls.h"

namespace strata {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_identifier_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// `word` as a whole identifier: "tools" counts, "custom_tools" and "tools_in_user_message" do not.
bool mentions_identifier(std::string_view source, std::string_view word) {
    for (size_t pos = source.find(word); pos != std::string_view::npos;
         pos = source.find(word, pos + 1)) {
        const bool starts = pos == 0 || !is_identifier_char(source[pos - 1]);
        const size_t end = pos + word.size();
        const bool ends = end == source.size() || !is_identifier_char(source[end]);
        if (starts && ends) return true;
    }
    return false;
}

bool contains(std::string_view source, std::string_view marker) {
    return source.find(marker) != std::string_view::npos;
}

ToolCallFormat tool_format_of(std::string_view source) {
    // Harmony's framing is in every gpt-oss template, with or without tools.
    if (contains(source, kHarmonyChannel)) return ToolCallFormat::Harmony;
    // Mistral templates also say "tool_call" (a loop variable), and Llama's say "tool_call" and
    // "parameters", so the bracketed markers are checked first.
    if (contains(source, kMistralCalls)) return ToolCallFormat::MistralToolCalls;
    if (contains(source, kDeepSeekCallsBegin)) return ToolCallFormat::DeepSeek;
    if (contains(source, kKimiSectionBegin)) return ToolCallFormat::KimiK2;
    if (contains(source, kHermesOpen)) {
        if (contains(source, kGlmArgKey)) return ToolCallFormat::GlmXml;
        return contains(source, kQwenFunctionOpen) ? ToolCallFormat::QwenXml
                                                   : ToolCallFormat::Hermes;
    }
    // Llama 3.1/3.3 name <|python_tag|>; Llama 3.2 only asks for {"name": .., "parameters": ..}.
    if (contains(source, kPythonTag) || contains(source, "\"parameters\"")) {
        return ToolCallFormat::Llama3Json;
    }
    return ToolCallFormat::None;
}

bool has_token(const std::vector<std::string>& token_texts, std::string_view text) {
    return std::find(token_texts.begin(), token_texts.end(), text) != token_texts.end();
}

std::string_view trim_right(std::string_view s) {
    while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
    return s;
}

// The request's tool definition: Ollama/OpenAI wrap it in {"type": "function", "function": ..}.
const json& function_of(const json& tool) {
    if (tool.is_object() && tool.contains("function") && tool["function"].is_object()) {
        return tool["function"];
    }
    return tool;
}

struct ToolSpec {
    std::string name;
    json parameters;
};

Result<std::vector<ToolSpec>> read_tools(const json& tools) {
    if (!tools.is_array() || tools.empty()) {
        return err("a tool call was required but the request has no tools");
    }
    std::vector<ToolSpec> specs;
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& fn = function_of(tools[i]);
        if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) {
            return err("tools[", std::to_string(i), "]: a function needs a \"name\" string");
        }
        ToolSpec spec{fn["name"].get<std::string>(), json::object()};
        if (!fn.contains("parameters") || fn["parameters"].is_null()) {
            spec.parameters = {{"type", "object"}, {"properties", json::object()}};
        } else if (fn["parameters"].is_object()) {
            spec.parameters = fn["parameters"];
        } else {
            return err("tools[", std::to_string(i), "] (", spec.name,
                       "): \"parameters\" must be a JSON Schema object");
        }
        specs.push_back(std::move(spec));
    }
    return specs;
}

}  // namespace

std::string_view to_string(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::None:
            return "none";
        case ToolCallFormat::Hermes:
            return "hermes";
        case ToolCallFormat::Llama3Json:
            return "llama3-json";
        case ToolCallFormat::MistralToolCalls:
            return "mistral";
        case ToolCallFormat::QwenXml:
            return "qwen-xml";
        case ToolCallFormat::Harmony:
            return "harmony";
        case ToolCallFormat::DeepSeek:
            return "deepseek";
        case ToolCallFormat::KimiK2:
            return "kimi-k2";
        case ToolCallFormat::GlmXml:
            return "glm-xml";
    }
    return "none";
}

TemplateCapabilities detect_capabilities(std::string_view template_source,
                                         const std::vector<std::string>& token_texts) {
    TemplateCapabilities caps;
    caps.tools = mentions_identifier(template_source, "tools");
    caps.format.tools = tool_format_of(template_source);

    const bool template_thinks =
        contains(template_source, kThinkOpen) && contains(template_source, kThinkClose);
    const bool vocab_agrees = token_texts.empty() || (has_token(token_texts, kThinkOpen) &&
                                                      has_token(token_texts, kThinkClose));
    caps.thinking = template_thinks && vocab_agrees;
    if (caps.format.tools == ToolCallFormat::Harmony) {
        // Reasoning is the analysis channel; the parser knows the framing, so no tags are set.
        caps.thinking = token_texts.empty() || has_token(token_texts, kHarmonyChannel);
        return caps;
    }
    if (caps.thinking) {
        caps.format.think_open = kThinkOpen;
        caps.format.think_close = kThinkClose;
    }
    return caps;
}

ReplyFormat format_for_prompt(const TemplateCapabilities& caps, std::string_view rendered_prompt,
                              bool thinking_enabled) {
    ReplyFormat format = caps.format;
    if (!thinking_enabled || !caps.thinking) {
        format.think_open.clear();
        format.think_close.clear();
        format.starts_in_thinking = false;
        return format;
    }
    format.starts_in_thinking = trim_right(rendered_prompt).ends_with(format.think_open);
    return format;
}

Result<ForcedCallGrammar> forced_call_grammar(ToolCallFormat format, const json& tools,
                                              std::string_view only_function) {
    ForcedCallGrammar grammar;
    // The literal text around one call object, as the model writes it.
    switch (format) {
        case ToolCallFormat::None:
            return err(
                "this model's chat template has no known tool-call format, so a tool call "
                "cannot be required");
        case ToolCallFormat::Hermes:
            grammar.prefix = "<tool_call>\n";
            grammar.suffix = "\n</tool_call>";
            break;
        case ToolCallFormat::Llama3Json:
            break;  // the reply is the bare object
        case ToolCallFormat::MistralToolCalls:
            grammar.prefix = "[TOOL_CALLS][";
            grammar.suffix = "]";
            break;
        case ToolCallFormat::QwenXml:
        case ToolCallFormat::Harmony:
        case ToolCallFormat::DeepSeek:
        case ToolCallFormat::KimiK2:
        case ToolCallFormat::GlmXml:
            // The function name sits in the markup, not in a JSON object, so one schema cannot
            // describe the call.
            return err("forcing a tool call (tool_choice) is not supported for this model's ",
                       to_string(format), " tool-call format; leave tool_choice at \"auto\"");
    }
    STRATA_ASSIGN(std::vector<ToolSpec> specs, read_tools(tools));
    if (!only_function.empty()) {
        const auto it = std::find_if(specs.begin(), specs.end(),
                                     [&](const ToolSpec& s) { return s.name == only_function; });
        if (it == specs.end()) {
            std::string names;
            for (const ToolSpec& s : specs) names += (names.empty() ? "" : ", ") + s.name;
            return err("tool_choice names the function \"", only_function,
                       "\" but the request's tools are: ", names);
        }
        specs = {*it};
    }

    const char* args_key = format == ToolCallFormat::Llama3Json ? "parameters" : "arguments";
    json branches = json::array();
    for (const ToolSpec& s : specs) {
        json call = {{"type", "object"},
                     {"properties", {{"name", {{"const", s.name}}}, {args_key, s.parameters}}},
                     {"required", {"name", args_key}}};
        branches.push_back(std::move(call));
    }
    grammar.schema = branches.size() == 1 ? branches[0] : json{{"anyOf", branches}};
    return grammar;
}

}  // namespace strata
