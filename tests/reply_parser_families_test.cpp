// The reply parser on DeepSeek V3 / R1 / V3.1, Kimi K2 and GLM-4.5 replies: thinking and each
// family's tool-call markup, at every cut of the text (see reply_outcomes.h), unclosed and
// broken markup, and the detection of each format from the families' templates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "reply/reply_parser.h"
#include "reply_outcomes.h"
#include "server/generation_job.h"
#include "template/chat_template.h"

namespace strata {
namespace {

using json = nlohmann::ordered_json;
using test::call;
using test::expect_at_every_cut;

// DeepSeek V3.1 with thinking on: the prompt ends with "<think>".
ReplyFormat deepseek_v31() {
    return {ToolCallFormat::DeepSeek, "<think>", "</think>", true};
}
ReplyFormat deepseek_v3() {
    return {ToolCallFormat::DeepSeek, "", "", false};
}
ReplyFormat kimi_k2() {
    return {ToolCallFormat::KimiK2, "<think>", "</think>", false};
}
ReplyFormat glm45() {
    return {ToolCallFormat::GlmXml, "<think>", "</think>", false};
}

// ---------------------------------------------------------------------------------------------
// DeepSeek V3, R1, V3.1

TEST(ReplyParserDeepSeek, V3CallsInJsonFencesAtEveryCut) {
    const std::string reply =
        "Let me check 天气 "
        "🌦.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
        "get_weather\n```json\n{\"city\": \"Zürich🦙\", \"days\": "
        "2}\n```<｜tool▁call▁end｜>\n"
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    expect_at_every_cut({deepseek_v3()}, reply,
                        {"Let me check 天气 🌦.", "",
                         json::array({call("get_weather", {{"city", "Zürich🦙"}, {"days", 2}}),
                                      call("get_time", json::object())})});
}

// V3.1 thinks after a prompt that ends with "<think>", and writes name, separator, arguments.
TEST(ReplyParserDeepSeek, V31ThinkingThenCallsAtEveryCut) {
    const std::string reply =
        "The user wants 東京.</think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
        "get_weather<｜tool▁sep｜>{\"city\": \"東京\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>"
        "search<｜tool▁sep｜>{\"query\": \"a<b\", \"limit\": 3}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>";
    expect_at_every_cut({deepseek_v31()}, reply,
                        {"Checking.", "The user wants 東京.",
                         json::array({call("get_weather", {{"city", "東京"}}),
                                      call("search", {{"query", "a<b"}, {"limit", 3}})})});
    // R1's template opens <think> in the prompt as well, and the reasoning is not the answer.
    expect_at_every_cut({deepseek_v31(), false}, "\nhmm 🤔\n</think>\n\n42 <｜tool▁sep｜>",
                        {"42 <｜tool▁sep｜>", "hmm 🤔", json::array()});
}

// A reply that ends right after the last call, before <｜tool▁calls▁end｜>, still has its calls;
// broken ones come back verbatim.
TEST(ReplyParserDeepSeek, UnclosedAndBrokenSections) {
    const std::string unclosed =
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>";
    expect_at_every_cut({deepseek_v3()}, unclosed, {"", "", json::array({call("f", {{"a", 1}})})});
    for (const std::string bad : {
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": "
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
             "<｜tool▁calls▁begin｜>stray<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
             "<｜tool▁calls▁end｜>",
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f "
             "{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```"
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         }) {
        expect_at_every_cut({deepseek_v3()}, bad, {bad, "", json::array()});
    }
    // Without tools in the request the markup is text.
    expect_at_every_cut({deepseek_v3(), false}, unclosed, {unclosed, "", json::array()});
}

// ---------------------------------------------------------------------------------------------
// Kimi K2

TEST(ReplyParserKimi, ThinkingThenSectionAtEveryCut) {
    const std::string reply =
        "<think>需要查天气 🌦</think>I'll check.<|tool_calls_section_begin|>\n"
        "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        "{\"city\": \"Zürich\", \"units\": [\"metric\"]}<|tool_call_end|>\n"
        "<|tool_call_begin|>functions.get.time:1<|tool_call_argument_begin|>{}<|tool_call_end|>\n"
        "<|tool_calls_section_end|>";
    expect_at_every_cut(
        {kimi_k2()}, reply,
        {"I'll check.", "需要查天气 🌦",
         json::array({call("get_weather", {{"city", "Zürich"}, {"units", {"metric"}}}),
                      call("get.time", json::object())})});
}

TEST(ReplyParserKimi, TextAfterTheSectionAndBrokenCalls) {
    expect_at_every_cut(
        {kimi_k2()},
        "<|tool_calls_section_begin|><|tool_call_begin|>search:3<|tool_call_argument_begin|>"
        "{\"query\": \"x\"}<|tool_call_end|><|tool_calls_section_end|>\n\nDone é",
        {"Done é", "", json::array({call("search", {{"query", "x"}})})});
    for (const std::string bad : {
             "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0{}<|tool_call_end|>"
             "<|tool_calls_section_end|>",
             "<|tool_calls_section_begin|><|tool_call_begin|>functions.:0"
             "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
             "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
             "<|tool_call_argument_begin|>\"text\"<|tool_call_end|><|tool_calls_section_end|>",
             "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
             "<|tool_call_argument_begin|>{\"a\":",
         }) {
        expect_at_every_cut({kimi_k2()}, bad, {bad, "", json::array()});
    }
}

// ---------------------------------------------------------------------------------------------
// GLM-4.5

TEST(ReplyParserGlm, ThinkingThenCallsAtEveryCut) {
    const std::string reply =
        "<think>The user wants 天气.</think>\nChecking 🦙.\n<tool_call>get_weather\n"
        "<arg_key>city</arg_key>\n<arg_value>Zürich, CH</arg_value>\n<arg_key>days</arg_key>\n"
        "<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"hourly\": [1, 2]}"
        "</arg_value>\n</tool_call>\n<tool_call>get_time</tool_call>";
    expect_at_every_cut(
        {glm45()}, reply,
        {"Checking 🦙.\n", "The user wants 天气.",
         json::array({call("get_weather",
                           {{"city", "Zürich, CH"}, {"days", 3}, {"opts", {{"hourly", {1, 2}}}}}),
                      call("get_time", json::object())})});
    // GLM-4.7 writes the same without newlines.
    expect_at_every_cut(
        {glm45()},
        "<tool_call>f<arg_key>a</arg_key><arg_value>true</arg_value><arg_key>b</arg_key>"
        "<arg_value> two words\n</arg_value></tool_call>",
        {"", "", json::array({call("f", {{"a", true}, {"b", " two words\n"}})})});
}

TEST(ReplyParserGlm, DeclaredStringsStayTextAndBrokenCallsAreContent) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "ship",
        "parameters": {"type": "object", "properties": {"zip": {"type": "string"}}}}}])");
    EXPECT_EQ(parse_glm_call("ship\n<arg_key>zip</arg_key>\n<arg_value>12345</arg_value>", tools)
                  ->arguments,
              json({{"zip", "12345"}}));
    EXPECT_EQ(
        parse_glm_call("ship\n<arg_key>zip</arg_key>\n<arg_value>12345</arg_value>")->arguments,
        json({{"zip", 12345}}));
    for (const std::string bad : {
             "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",  // Hermes JSON
             "<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>",
             "<tool_call>f\n<arg_value>1</arg_value>\n</tool_call>",
             "<tool_call>\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
             "<tool_call>f\nstray<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
         }) {
        expect_at_every_cut({glm45(), true, false}, bad, {bad, "", json::array()});
    }
}

// ---------------------------------------------------------------------------------------------
// The families' own templates (tests/data/templates): the format each is detected as, and what
// each renders for an assistant's call parses back to that call.

std::string read_family_template(const std::string& file) {
    std::ifstream in(std::filesystem::path(STRATA_SOURCE_DIR) / "tests/data/templates" / file,
                     std::ios::binary);
    std::stringstream source;
    source << in.rdbuf();
    return source.str();
}

const json kWeatherTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"parameters",
       {{"type", "object"},
        {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}}}}}}};

struct RoundTrip {
    std::string file;
    ToolCallFormat format;
    bool tools_listed;  // renders the request's tools (V3.1's does not: they go in the system)
    bool thinking;
    json context;          // besides messages, tools and add_generation_prompt
    json assistant;        // the assistant's message with its call
    std::string turn_end;  // what the template writes after the call, not the model's text
    bool starts_in_thinking;
};

json merged(json base, const json& extra) {
    base.update(extra);
    return base;
}

void check_round_trip(const RoundTrip& r) {
    SCOPED_TRACE(r.file);
    const std::string source = read_family_template(r.file);
    ASSERT_FALSE(source.empty());
    const TemplateCapabilities caps = detect_capabilities(source, {});
    EXPECT_EQ(to_string(caps.format.tools), to_string(r.format));
    EXPECT_EQ(caps.tools, r.tools_listed);
    EXPECT_EQ(caps.thinking, r.thinking);
    auto tmpl = ChatTemplate::parse(source, r.file);
    ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;

    const json user = {{"role", "user"}, {"content", "Weather in 東京?"}};
    json context = r.context;
    context["tools"] = json::array({kWeatherTool});
    context["messages"] = json::array({user});
    context["add_generation_prompt"] = true;
    auto prompt = tmpl->render(context);
    ASSERT_TRUE(prompt.ok()) << prompt.error().message;
    const ReplyFormat format = format_for_prompt(caps, *prompt, true);
    EXPECT_EQ(format.starts_in_thinking, r.starts_in_thinking) << *prompt;

    context["messages"] = json::array({user, r.assistant});
    context["add_generation_prompt"] = false;
    auto whole = tmpl->render(context);
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    ASSERT_TRUE(whole->starts_with(*prompt)) << *prompt << "\n---\n" << *whole;
    std::string reply = whole->substr(prompt->size());
    ASSERT_TRUE(reply.ends_with(r.turn_end)) << reply;
    reply.resize(reply.size() - r.turn_end.size());

    ReplyParser parser(format, true, true, context["tools"]);
    ReplyDelta d = parser.feed(reply);
    const ReplyDelta last = parser.finish();
    d.content += last.content;
    d.tool_calls.insert(d.tool_calls.end(), last.tool_calls.begin(), last.tool_calls.end());
    EXPECT_EQ(d.content, "") << reply;
    ASSERT_EQ(d.tool_calls.size(), 1u) << reply;
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(d.tool_calls[0].arguments, json({{"city", "東京"}, {"days", 2}}));
}

TEST(DetectCapabilities, FamilyTemplatesRoundTrip) {
    const json string_call = {
        {"type", "function"},
        {"id", "functions.get_weather:0"},
        {"function",
         {{"name", "get_weather"}, {"arguments", "{\"city\": \"東京\", \"days\": 2}"}}}};
    json object_call = string_call;
    object_call["function"]["arguments"] = {{"city", "東京"}, {"days", 2}};
    const json assistant = {{"role", "assistant"}, {"content", nullptr}};
    // DeepSeek V3.1 without thinking: the prompt ends with "</think>", the reply is the calls.
    check_round_trip({"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallFormat::DeepSeek, false, true,
                      json{{"thinking", false}, {"bos_token", "<｜begin▁of▁sentence｜>"}},
                      merged(assistant, {{"tool_calls", {string_call}}}), "<｜end▁of▁sentence｜>",
                      false});
    check_round_trip({"moonshotai-Kimi-K2-Instruct-0905.jinja", ToolCallFormat::KimiK2, true, false,
                      json::object(), merged(assistant, {{"tool_calls", {object_call}}}),
                      "<|im_end|>", false});
    check_round_trip({"zai-org-GLM-4.5.jinja", ToolCallFormat::GlmXml, true, true, json::object(),
                      merged(assistant, {{"content", ""}, {"tool_calls", {object_call}}}), "",
                      false});
}

// DeepSeek V3.1's template concatenates a call's arguments as text, so the object arguments of an
// Ollama request fail to render, as in Python; the server renders them again as JSON text.
TEST(DetectCapabilities, DeepSeekV31NeedsArgumentsAsText) {
    auto tmpl = ChatTemplate::parse(read_family_template("deepseek-ai-DeepSeek-V3.1.jinja"));
    ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
    const json messages = {
        {{"role", "user"}, {"content", "Weather?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "東京"}}}}}}}}},
        {{"role", "tool"}, {"content", "sunny"}}};
    EXPECT_FALSE(tmpl->render({{"messages", messages}, {"add_generation_prompt", true}}).ok());
    auto text = tmpl->render(
        {{"messages", server::tool_arguments_as_text(messages)}, {"add_generation_prompt", true}});
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_NE(text->find("get_weather<｜tool▁sep｜>{\"city\":\"東京\"}<｜tool▁call▁end｜>"),
              std::string::npos)
        << *text;
    EXPECT_EQ(server::tool_arguments_as_text(messages)[0], messages[0]);
}

// R1's generation prompt opens the reasoning; its calls are V3's form.
TEST(DetectCapabilities, DeepSeekR1OpensThinkingInThePrompt) {
    const std::string source = read_family_template("deepseek-ai-DeepSeek-R1.jinja");
    ASSERT_FALSE(source.empty());
    const TemplateCapabilities caps = detect_capabilities(source, {});
    EXPECT_EQ(caps.format.tools, ToolCallFormat::DeepSeek);
    EXPECT_TRUE(caps.thinking);
    auto tmpl = ChatTemplate::parse(source, "r1");
    ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
    auto prompt = tmpl->render(
        {{"messages", {{{"role", "user"}, {"content", "2+2?"}}}}, {"add_generation_prompt", true}});
    ASSERT_TRUE(prompt.ok()) << prompt.error().message;
    EXPECT_TRUE(format_for_prompt(caps, *prompt, true).starts_in_thinking);
    EXPECT_FALSE(format_for_prompt(caps, *prompt, false).starts_in_thinking);
    expect_at_every_cut({format_for_prompt(caps, *prompt, true)},
                        "Add them.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
                        "<｜tool▁sep｜>add\n```json\n{\"a\": 2, \"b\": 2}\n```<｜tool▁call▁end｜>"
                        "<｜tool▁calls▁end｜>",
                        {"", "Add them.", json::array({call("add", {{"a", 2}, {"b", 2}})})});
}

}  // namespace
}  // namespace strata
