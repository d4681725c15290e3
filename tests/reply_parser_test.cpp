// The reply parser: for each format, the split into content, thinking and tool calls must be the
// same however the reply is cut into pieces (every cut into three pieces, byte by byte, and
// random cuts), every returned piece must be valid UTF-8, and markup must never reach content
// unless it is not a call. Detection is checked against real chat templates from
// ../shared/testdata/templates, and the forced-call schema's shape for one and two tools.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "reply/reply_parser.h"
#include "reply_outcomes.h"
#include "template/chat_template.h"
#include "test_support.h"
#include "util/utf8.h"

namespace strata {
namespace {

using json = nlohmann::ordered_json;
using test::call;
using test::expect_at_every_cut;
using test::Outcome;
using test::Setup;
using test::streamed;

ReplyFormat hermes() {
    return {ToolCallFormat::Hermes, "", "", false};
}
ReplyFormat qwen3() {
    return {ToolCallFormat::Hermes, "<think>", "</think>", false};
}
ReplyFormat deepseek_r1() {
    return {ToolCallFormat::None, "<think>", "</think>", true};
}
ReplyFormat llama3() {
    return {ToolCallFormat::Llama3Json, "", "", false};
}
ReplyFormat mistral() {
    return {ToolCallFormat::MistralToolCalls, "", "", false};
}
ReplyFormat qwen35() {
    return {ToolCallFormat::QwenXml, "<think>", "</think>", true};
}
ReplyFormat harmony() {
    return {ToolCallFormat::Harmony, "", "", false};
}
// ---------------------------------------------------------------------------------------------
// Hermes

TEST(ReplyParserHermes, TextThenTwoCallsAtEveryCut) {
    const std::string reply =
        "Checking 日本 é…\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Zürich🦙\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
        "\"arguments\": {}}\n</tool_call>\n";
    expect_at_every_cut({hermes()}, reply,
                        {"Checking 日本 é…\n", "",
                         json::array({call("get_weather", {{"city", "Zürich🦙"}}),
                                      call("get_time", json::object())})});
}

TEST(ReplyParserHermes, ArgumentsGivenAsAString) {
    const std::string reply =
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, \\\"é\\\"]}\"}</tool_call>";
    expect_at_every_cut({hermes()}, reply,
                        {"", "", json::array({call("f", {{"a", json::array({1, "é"})}})})});
    // "parameters" for "arguments", and no arguments at all, are accepted too.
    expect_at_every_cut({hermes()},
                        "<tool_call>{\"name\":\"g\",\"parameters\":{\"x\":1}}</tool_call>",
                        {"", "", json::array({call("g", {{"x", 1}})})});
    expect_at_every_cut({hermes()}, "<tool_call>{\"name\":\"h\"}</tool_call>",
                        {"", "", json::array({call("h", json::object())})});
}

TEST(ReplyParserHermes, TextAfterACallIsContent) {
    expect_at_every_cut({hermes()}, "<tool_call>{\"name\":\"f\"}</tool_call>\n\n🦙 done",
                        {"🦙 done", "", json::array({call("f", json::object())})});
}

TEST(ReplyParserHermes, LookalikeTagsAreContentUnchanged) {
    const std::string reply = "a <tools> b <tool_cal c </tool_call> <tool_call_x> <<tool_call";
    expect_at_every_cut({hermes()}, reply, {reply, "", json::array()});

    ReplyParser parser(hermes(), true, true);
    EXPECT_EQ(parser.feed("say <tool").content, "say ");  // may be a tag: held
    EXPECT_EQ(parser.feed("s>").content, "<tools>");      // is not: released as it was
    EXPECT_EQ(parser.feed("x<").content, "x");            // only the shortest suffix is held
    EXPECT_EQ(parser.feed("y").content, "<y");
}

TEST(ReplyParserHermes, UnclosedOrUnparsableBlockIsContent) {
    ReplyParser parser(hermes(), true, true);
    EXPECT_EQ(parser.feed("Sure é <tool_call>\n{\"name\": \"f\"").content, "Sure é ");
    const ReplyDelta last = parser.finish();
    EXPECT_EQ(last.content, "<tool_call>\n{\"name\": \"f\"");
    EXPECT_TRUE(last.tool_calls.empty());

    const std::string bad = "<tool_call>not json</tool_call> and <tool_call>[1]</tool_call>";
    expect_at_every_cut({hermes()}, bad, {bad, "", json::array()});
    // Arguments that are a string but not an object are not a call either.
    const std::string bad_args = "<tool_call>{\"name\":\"f\",\"arguments\":\"x\"}</tool_call>";
    expect_at_every_cut({hermes()}, bad_args, {bad_args, "", json::array()});
}

TEST(ReplyParserHermes, CallIsEmittedAsSoonAsItCloses) {
    ReplyParser parser(hermes(), true, true);
    ReplyDelta d = parser.feed("Hi <tool_call>{\"name\":\"f\",\"arguments\":{}}");
    EXPECT_EQ(d.content, "Hi ");
    EXPECT_TRUE(d.tool_calls.empty());
    d = parser.feed("</tool_call>");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "f");
}

TEST(ReplyParserHermes, WithoutToolsInTheRequestMarkupIsContent) {
    const std::string reply = "<tool_call>{\"name\":\"f\"}</tool_call>";
    expect_at_every_cut({hermes(), /*parse_tools=*/false}, reply, {reply, "", json::array()});
}

// ---------------------------------------------------------------------------------------------
// Qwen3-Coder / Qwen3.5 XML-style calls

TEST(ReplyParserQwenXml, ThinkingTextAndTwoCallsAtEveryCut) {
    // The prompt ends with "<think>\n", so the reply starts inside the reasoning.
    const std::string reply =
        "The user wants 天气 🌦.\n</think>\n\nLet me "
        "check.\n\n<tool_call>\n<function=get_weather>\n"
        "<parameter=city>\nZürich 🦙\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
        "<parameter=opts>\n{\"units\": \"metric\", \"hourly\": [1, 2]}\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>";
    expect_at_every_cut(
        {qwen35()}, reply,
        {"Let me check.\n\n", "The user wants 天气 🌦.",
         json::array({call("get_weather", {{"city", "Zürich 🦙"},
                                           {"days", 3},
                                           {"opts", {{"units", "metric"}, {"hourly", {1, 2}}}}}),
                      call("get_time", json::object())})});
}

TEST(ReplyParserQwenXml, ValuesAreTextUnlessJson) {
    const std::string reply =
        "<tool_call>\n<function=write>\n<parameter=path>\n\"a.txt\"\n</parameter>\n"
        "<parameter=text>\nline 1\nline 2\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n"
        "<parameter=none>\nnull\n</parameter>\n</function>\n</tool_call>";
    expect_at_every_cut({qwen35(), true, false}, reply,
                        {"", "",
                         json::array({call("write", {{"path", "\"a.txt\""},
                                                     {"text", "line 1\nline 2"},
                                                     {"flag", true},
                                                     {"none", nullptr}})})});
}

TEST(ReplyParserQwenXml, DeclaredStringsStayText) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "ship",
        "parameters": {"type": "object", "properties": {"zip": {"type": "string"},
        "count": {"type": "integer"}, "express": {"type": "boolean"}}}}}])");
    // Booleans as the template writes them in earlier turns (Python's str()) are booleans.
    const std::string reply =
        "<tool_call>\n<function=ship>\n<parameter=zip>\n00123\n</parameter>\n"
        "<parameter=count>\n2\n</parameter>\n<parameter=express>\nFalse\n</parameter>\n"
        "</function>\n</tool_call>";
    ReplyParser parser(qwen35(), true, false, tools);
    ReplyDelta d = parser.feed(reply);
    const ReplyDelta last = parser.finish();
    d.tool_calls.insert(d.tool_calls.end(), last.tool_calls.begin(), last.tool_calls.end());
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].arguments,
              json({{"zip", "00123"}, {"count", 2}, {"express", false}}));
    // Without the declaration, "00123" is not JSON either (leading zeros), so it is text too.
    EXPECT_EQ(
        parse_qwen_xml_call("<function=ship>\n<parameter=zip>\n12345\n</parameter>\n</function>")
            ->arguments,
        json({{"zip", 12345}}));
}

TEST(ReplyParserQwenXml, BrokenMarkupIsContent) {
    for (const std::string bad : {
             "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",  // Hermes JSON is not this format
             "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>",
             "<tool_call>\n<function=>\n</function>\n</tool_call>",
             "<tool_call>\n<function=f>\nstray<parameter=a>1</parameter></function></tool_call>",
         }) {
        expect_at_every_cut({qwen35(), true, false}, bad, {bad, "", json::array()});
    }
}

// ---------------------------------------------------------------------------------------------
// Harmony (gpt-oss)

TEST(ReplyParserHarmony, AnalysisThenFinalAtEveryCut) {
    // The prompt ends with "<|start|>assistant"; <|return|> ends generation and is not text.
    const std::string reply =
        "<|channel|>analysis<|message|>User asks 天气 🌦. Answer.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>It is sunny in Zürich 🦙.";
    expect_at_every_cut(
        {harmony()}, reply,
        {"It is sunny in Zürich 🦙.", "User asks 天气 🌦. Answer.", json::array()});
    // The same with the turn end rendered as text.
    expect_at_every_cut(
        {harmony()}, reply + "<|return|>",
        {"It is sunny in Zürich 🦙.", "User asks 天气 🌦. Answer.", json::array()});
}

TEST(ReplyParserHarmony, CallsInBothHeaderOrdersAtEveryCut) {
    // What the model writes (recipient after the channel, <|constrain|>) ...
    const std::string reply =
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"東京\"}<|call|>";
    expect_at_every_cut(
        {harmony()}, reply,
        {"", "Need weather.", json::array({call("get_weather", {{"city", "東京"}})})});
    // ... and what the template renders for earlier calls (recipient in the role part); the
    // stream usually ends at <|call|>, which is not text.
    const std::string rendered =
        "<|channel|>analysis<|message|>Two calls.<|end|>"
        "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\": [1]}<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.g <|constrain|>json<|message|>{}";
    expect_at_every_cut(
        {harmony()}, rendered,
        {"", "Two calls.", json::array({call("f", {{"a", {1}}}), call("g", json::object())})});
}

TEST(ReplyParserHarmony, PreambleAndTextWithoutHeaderAreContent) {
    expect_at_every_cut({harmony()},
                        "<|channel|>commentary<|message|>Checking…<|end|><|start|>assistant"
                        "<|channel|>final<|message|>Done.",
                        {"Checking…Done.", "", json::array()});
    expect_at_every_cut({harmony()}, "  plain answer <|no tag|>",
                        {"  plain answer <|no tag|>", "", json::array()});
}

TEST(ReplyParserHarmony, BadCallsAndUnfinishedHeadersAreContent) {
    const std::string bad_json =
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{not json";
    expect_at_every_cut({harmony()}, bad_json, {bad_json, "", json::array()});
    const std::string unfinished = "<|channel|>final";
    expect_at_every_cut({harmony()}, unfinished, {unfinished, "", json::array()});
    // Without tools in the request a call message is content (its body only).
    expect_at_every_cut({harmony(), /*parse_tools=*/false},
                        "<|channel|>commentary to=functions.f<|message|>{}",
                        {"{}", "", json::array()});
}

TEST(ReplyParserHarmony, ThinkingOffDropsTheAnalysis) {
    expect_at_every_cut({harmony(), true, /*separate_thinking=*/false},
                        "<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final"
                        "<|message|>Hi",
                        {"Hi", "", json::array()});
}

TEST(ReplyParserHarmony, FinalTextStreamsAsItComes) {
    ReplyParser parser(harmony(), true, true);
    EXPECT_EQ(parser.feed("<|channel|>analysis<|message|>a").thinking, "a");
    EXPECT_EQ(parser.feed("b<|e").thinking, "b");  // "<|e" may begin <|end|>: held
    ReplyDelta d = parser.feed("nd|><|start|>assistant<|channel|>final<|message|>Hel");
    EXPECT_EQ(d.thinking, "");
    EXPECT_EQ(d.content, "Hel");
    EXPECT_EQ(parser.feed("lo").content, "lo");
    EXPECT_EQ(parser.finish().content, "");
}

// ---------------------------------------------------------------------------------------------
// Thinking

TEST(ReplyParserThinking, ThinkingThenCallAtEveryCut) {
    const std::string reply =
        "<think>\nThe user wants 天气 🌦.\n</think>\n\n<tool_call>\n{\"name\": "
        "\"get_weather\", "
        "\"arguments\": {\"city\": \"東京\"}}\n</tool_call>";
    expect_at_every_cut({qwen3()}, reply,
                        {"", "The user wants 天气 🌦.",
                         json::array({call("get_weather", {{"city", "東京"}})})});
}

TEST(ReplyParserThinking, CharactersRightAgainstTheTags) {
    expect_at_every_cut({qwen3()}, "  <think>日本</think>🦙é answer",
                        {"🦙é answer", "日本", json::array()});
    // Whitespace inside the reasoning stays; only that around the tags goes.
    expect_at_every_cut({qwen3()}, "<think>a \n b\n\n</think>\n\nc\n",
                        {"c\n", "a \n b", json::array()});
}

TEST(ReplyParserThinking, ReplyWithoutThinkingIsContent) {
    expect_at_every_cut({qwen3()}, "Hello <think>x</think>",
                        {"Hello <think>x</think>", "", json::array()});
    expect_at_every_cut({qwen3()}, "<thinking>no</thinking>",
                        {"<thinking>no</thinking>", "", json::array()});
    expect_at_every_cut({qwen3()}, "<thi", {"<thi", "", json::array()});
}

TEST(ReplyParserThinking, PromptEndingInsideThinking) {
    expect_at_every_cut({deepseek_r1()}, "\nOkay, 2+2 🤔\n</think>\n\nThe answer is 4.",
                        {"The answer is 4.", "Okay, 2+2 🤔", json::array()});
    // The model repeating the open tag does not put it in the reasoning.
    expect_at_every_cut({deepseek_r1()}, "<think>\nhmm</think>ok", {"ok", "hmm", json::array()});
    // Cut off before the close tag: all of it was reasoning.
    expect_at_every_cut({deepseek_r1()}, "still é thinking",
                        {"", "still é thinking", json::array()});
}

TEST(ReplyParserThinking, ThinkingOffKeepsTextVerbatim) {
    const std::string reply = "<think>x</think>\n\ny";
    expect_at_every_cut({qwen3(), true, /*separate_thinking=*/false}, reply,
                        {reply, "", json::array()});
    expect_at_every_cut({deepseek_r1(), true, false}, "x</think>y",
                        {"x</think>y", "", json::array()});
}

TEST(ReplyParserThinking, ToolMarkupInsideThinkingStaysThinking) {
    expect_at_every_cut({qwen3()}, "<think>maybe <tool_call>?</think>no",
                        {"no", "maybe <tool_call>?", json::array()});
}

// ---------------------------------------------------------------------------------------------
// Llama 3 JSON

TEST(ReplyParserLlama3, WholeReplyIsACall) {
    expect_at_every_cut({llama3()},
                        "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Kraków\"}}",
                        {"", "", json::array({call("get_weather", {{"city", "Kraków"}})})});
    expect_at_every_cut(
        {llama3()},
        "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"s\": \"x;y}\"}}; "
        "{\"name\": \"b\", \"parameters\": \"{}\"}",
        {"", "", json::array({call("a", {{"s", "x;y}"}}), call("b", json::object())})});
}

TEST(ReplyParserLlama3, AnythingElseIsContent) {
    for (const std::string reply :
         {"Hello {\"name\": \"f\"}", "{not a call", "{\"a\": 1}",
          "<|python_tag|>brave_search.call(q=\"é\")", "<|python", " 🦙 {"}) {
        expect_at_every_cut({llama3()}, reply, {reply, "", json::array()});
    }
    // Plain text streams out at once; only a reply that starts like a call waits for the end.
    ReplyParser parser(llama3(), true, true);
    EXPECT_EQ(parser.feed("Hi").content, "Hi");
}

// ---------------------------------------------------------------------------------------------
// Mistral

TEST(ReplyParserMistral, JsonArrayOfCalls) {
    expect_at_every_cut(
        {mistral()},
        "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": \"é\"}, \"id\": "
        "\"abcdefghi\"}, {\"name\": \"g\", \"arguments\": \"{}\"}]",
        {"", "", json::array({call("f", {{"a", "é"}}), call("g", json::object())})});
}

TEST(ReplyParserMistral, NameArgsForm) {
    expect_at_every_cut(
        {mistral()},
        "Let me look 🔍[TOOL_CALLS]search[ARGS]{\"q\": \"日本\"}[TOOL_CALLS]time[CALL_ID]"
        "abc123XYZ[ARGS]{}",
        {"Let me look 🔍", "",
         json::array({call("search", {{"q", "日本"}}), call("time", json::object())})});
}

TEST(ReplyParserMistral, BrokenCallsAreContent) {
    for (const std::string reply : {"[TOOL_CALLS] [{\"name\": \"f\"", "[TOOL_CALLS]f[ARGS]nope",
                                    "[TOOL_CALLS][]", "[TOOL_CALL] x"}) {
        expect_at_every_cut({mistral()}, reply, {reply, "", json::array()});
    }
}

// ---------------------------------------------------------------------------------------------
// Characters split across pieces

TEST(ReplyParser, CharacterSplitAcrossPiecesIsHeldWhole) {
    ReplyParser parser(ReplyFormat{}, false, false);
    EXPECT_EQ(parser.feed("a\xE6\x97").content, "a");  // first two bytes of 日
    EXPECT_EQ(parser.feed("\xA5\xF0\x9F").content, "日");
    EXPECT_EQ(parser.feed("\xA6\x99").content, "🦙");
    EXPECT_EQ(parser.feed("\xC3").content, "");
    EXPECT_EQ(parser.finish().content, "\xC3");  // left unfinished: passed on as it is
}

// ---------------------------------------------------------------------------------------------
// Detection on real templates

std::filesystem::path templates_dir() {
    return test::testdata_dir() / "templates";
}

std::string read_template(const std::string& name) {
    std::ifstream in(templates_dir() / (name + ".jinja"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

json read_expected(const std::string& name) {
    std::ifstream in(templates_dir() / (name + ".expected.json"), std::ios::binary);
    return json::parse(in);
}

struct Expected {
    std::string name;
    bool tools, thinking;
    ToolCallFormat format;
};

TEST(DetectCapabilities, RealTemplates) {
    STRATA_REQUIRE_TESTDATA();
    const std::vector<Expected> expected = {
        {"Qwen-Qwen2.5-7B-Instruct", true, false, ToolCallFormat::Hermes},
        {"Qwen-Qwen3-0.6B", true, true, ToolCallFormat::Hermes},
        // It never renders a tools list, but writes earlier calls in DeepSeek's own markup.
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", false, true, ToolCallFormat::DeepSeek},
        {"google-gemma-2-2b-it", false, false, ToolCallFormat::None},
        {"meta-llama-Llama-3.1-8B-Instruct", true, false, ToolCallFormat::Llama3Json},
        {"meta-llama-Llama-3.2-3B-Instruct", true, false, ToolCallFormat::Llama3Json},
        {"meta-llama-Llama-3.3-70B-Instruct", true, false, ToolCallFormat::Llama3Json},
        {"microsoft-Phi-3.5-mini-instruct", false, false, ToolCallFormat::None},
        {"mistralai-Mistral-Nemo-Instruct-2407", true, false, ToolCallFormat::MistralToolCalls},
        {"mixtral-style-inst", false, false, ToolCallFormat::None},
    };
    for (const Expected& e : expected) {
        const std::string source = read_template(e.name);
        ASSERT_FALSE(source.empty()) << e.name;
        const TemplateCapabilities caps = detect_capabilities(source, {});
        EXPECT_EQ(caps.tools, e.tools) << e.name;
        EXPECT_EQ(caps.thinking, e.thinking) << e.name;
        EXPECT_EQ(to_string(caps.format.tools), to_string(e.format)) << e.name;
        EXPECT_EQ(caps.format.think_open, e.thinking ? "<think>" : "") << e.name;
        EXPECT_EQ(caps.format.think_close, e.thinking ? "</think>" : "") << e.name;
        EXPECT_FALSE(caps.format.starts_in_thinking) << e.name;
    }
}

TEST(DetectCapabilities, HarmonyAndQwenXml) {
    const std::string gpt_oss =
        "{%- if tools %}{{- render_tool_namespace('functions', tools) }}{%- endif %}"
        "{{- '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}";
    TemplateCapabilities caps = detect_capabilities(gpt_oss, {});
    EXPECT_EQ(caps.format.tools, ToolCallFormat::Harmony);
    EXPECT_TRUE(caps.tools);
    EXPECT_TRUE(caps.thinking);
    EXPECT_EQ(caps.format.think_open, "");
    EXPECT_FALSE(detect_capabilities(gpt_oss, {"a", "b"}).thinking);
    EXPECT_TRUE(detect_capabilities(gpt_oss, {"<|channel|>"}).thinking);

    const std::string qwen35 =
        "{%- if tools %}<tools>{%- endif %}{{- '<tool_call>\\n<function=' + tool_call.name + "
        "'>\\n' }}{{- '<think>\\n' }}{{- '</think>' }}";
    caps = detect_capabilities(qwen35, {});
    EXPECT_EQ(caps.format.tools, ToolCallFormat::QwenXml);
    EXPECT_TRUE(caps.thinking);
    EXPECT_EQ(caps.format.think_open, "<think>");
    EXPECT_FALSE(forced_call_grammar(ToolCallFormat::QwenXml, json::array(), "").ok());
}

// gpt-oss's own template (kept in the repository): detected as Harmony with tools and thinking,
// it renders the request's reasoning effort, and what it renders for an assistant's reasoning
// and call parses back to the same reasoning and call.
TEST(DetectCapabilities, GptOssTemplateRoundTrip) {
    std::ifstream in(
        std::filesystem::path(STRATA_SOURCE_DIR) / "tests/data/templates/openai-gpt-oss-20b.jinja",
        std::ios::binary);
    std::stringstream source;
    source << in.rdbuf();
    ASSERT_FALSE(source.str().empty());
    const TemplateCapabilities caps = detect_capabilities(source.str(), {});
    EXPECT_EQ(caps.format.tools, ToolCallFormat::Harmony);
    EXPECT_TRUE(caps.tools);
    EXPECT_TRUE(caps.thinking);

    auto tmpl = ChatTemplate::parse(source.str(), "gpt-oss");
    ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
    const json tool = {
        {"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"description", "Weather"},
          {"parameters",
           {{"type", "object"},
            {"properties", {{"city", {{"type", "string"}, {"description", "City"}}}}},
            {"required", {"city"}}}}}}};
    const json user = {{"role", "user"}, {"content", "Weather in 東京?"}};
    json context = {{"messages", {user}},
                    {"tools", {tool}},
                    {"add_generation_prompt", true},
                    {"reasoning_effort", "high"}};
    auto prompt = tmpl->render(context);
    ASSERT_TRUE(prompt.ok()) << prompt.error().message;
    EXPECT_NE(prompt->find("Reasoning: high"), std::string::npos);
    ASSERT_TRUE(prompt->ends_with("<|start|>assistant"));

    context["messages"] = {
        user,
        {{"role", "assistant"},
         {"thinking", "Need the weather."},
         {"content", ""},
         {"tool_calls",
          {{{"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", {{"city", "東京"}}}}}}}}}};
    context["add_generation_prompt"] = false;
    auto with_call = tmpl->render(context);
    ASSERT_TRUE(with_call.ok()) << with_call.error().message;
    // The reply is what follows the prompt's "<|start|>assistant".
    const size_t reply_at = with_call->find("<|start|>assistant", prompt->size() - 18);
    ASSERT_NE(reply_at, std::string::npos);
    const std::string reply = with_call->substr(reply_at + 18);
    expect_at_every_cut(
        {harmony()}, reply,
        {"", "Need the weather.", json::array({call("get_weather", {{"city", "東京"}})})});
}

TEST(DetectCapabilities, VocabularyConfirmsThinkingMarkers) {
    const std::string source = "{{ '<think>' }}{{ x.split('</think>') }}";
    EXPECT_TRUE(detect_capabilities(source, {}).thinking);
    EXPECT_TRUE(detect_capabilities(source, {"a", "<think>", "</think>"}).thinking);
    EXPECT_FALSE(detect_capabilities(source, {"a", "<", "think", ">"}).thinking);
    // Identifiers that only contain "tools" do not count.
    EXPECT_FALSE(detect_capabilities("{{ custom_tools }}{{ tools_in_user_message }}", {}).tools);
    EXPECT_TRUE(detect_capabilities("{% if tools %}", {}).tools);
}

TEST(FormatForPrompt, RenderedPromptsDecideStartsInThinking) {
    STRATA_REQUIRE_TESTDATA();
    // DeepSeek-R1's generation prompt ends with "<think>\n": the reply starts inside reasoning.
    const std::string r1 = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B";
    const TemplateCapabilities r1_caps = detect_capabilities(read_template(r1), {});
    // Qwen3 opens nothing unless thinking is disabled, when it renders an empty closed block.
    const std::string q3 = "Qwen-Qwen3-0.6B";
    const TemplateCapabilities q3_caps = detect_capabilities(read_template(q3), {});
    int checked = 0;
    for (const auto& [caps, name, want] :
         {std::tuple{r1_caps, r1, true}, std::tuple{q3_caps, q3, false}}) {
        const json expected = read_expected(name);  // kept alive: the loop walks into it
        for (const json& c : expected["cases"]) {
            if (!c.contains("expected") || !c["context"].value("add_generation_prompt", false))
                continue;
            const std::string prompt = c["expected"].get<std::string>();
            if (prompt.ends_with("<｜tool▁outputs▁end｜>"))
                continue;  // after a tool result: no think
            const ReplyFormat on = format_for_prompt(caps, prompt, true);
            EXPECT_EQ(on.starts_in_thinking, want) << name << " " << c["name"];
            EXPECT_EQ(on.think_open, "<think>");
            const ReplyFormat off = format_for_prompt(caps, prompt, false);
            EXPECT_FALSE(off.starts_in_thinking);
            EXPECT_TRUE(off.think_open.empty() && off.think_close.empty());
            ++checked;
        }
    }
    EXPECT_GE(checked, 8);
    EXPECT_TRUE(
        format_for_prompt(q3_caps, "<|im_start|>assistant\n<think>\n\n", true).starts_in_thinking);
}

// ---------------------------------------------------------------------------------------------
// Forcing a call

json weather_tool() {
    return json::parse(R"({"type": "function", "function": {"name": "get_weather",
        "description": "Weather now", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}})");
}

json time_tool() {  // no parameters at all
    return json::parse(R"({"type": "function", "function": {"name": "get_time"}})");
}

json call_schema(const std::string& name, const json& params, const std::string& key) {
    return {{"type", "object"},
            {"properties", {{"name", {{"const", name}}}, {key, params}}},
            {"required", {"name", key}}};
}

TEST(ForcedCallGrammar, OneTool) {
    const json params = weather_tool()["function"]["parameters"];
    const auto g = forced_call_grammar(ToolCallFormat::Hermes, json::array({weather_tool()}));
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->prefix, "<tool_call>\n");
    EXPECT_EQ(g->suffix, "\n</tool_call>");
    EXPECT_EQ(g->schema, call_schema("get_weather", params, "arguments"));

    const auto llama =
        forced_call_grammar(ToolCallFormat::Llama3Json, json::array({weather_tool()}));
    ASSERT_TRUE(llama.ok());
    EXPECT_EQ(llama->prefix + llama->suffix, "");
    EXPECT_EQ(llama->schema, call_schema("get_weather", params, "parameters"));

    const auto m =
        forced_call_grammar(ToolCallFormat::MistralToolCalls, json::array({weather_tool()}));
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->prefix, "[TOOL_CALLS][");
    EXPECT_EQ(m->suffix, "]");
}

TEST(ForcedCallGrammar, TwoToolsPairEachNameWithItsParameters) {
    const auto g =
        forced_call_grammar(ToolCallFormat::Hermes, json::array({weather_tool(), time_tool()}));
    ASSERT_TRUE(g.ok()) << g.error().message;
    const json empty_params = {{"type", "object"}, {"properties", json::object()}};
    EXPECT_EQ(
        g->schema,
        json({{"anyOf",
               {call_schema("get_weather", weather_tool()["function"]["parameters"], "arguments"),
                call_schema("get_time", empty_params, "arguments")}}}));
}

TEST(ForcedCallGrammar, NamedFunction) {
    const json tools = json::array({weather_tool(), time_tool()});
    const auto g = forced_call_grammar(ToolCallFormat::Hermes, tools, "get_time");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->schema["properties"]["name"], json({{"const", "get_time"}}));
    EXPECT_FALSE(g->schema.contains("anyOf"));

    const auto unknown = forced_call_grammar(ToolCallFormat::Hermes, tools, "get_news");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("get_news"), std::string::npos);
    EXPECT_NE(unknown.error().message.find("get_weather, get_time"), std::string::npos);
}

TEST(ForcedCallGrammar, Errors) {
    EXPECT_FALSE(forced_call_grammar(ToolCallFormat::None, json::array({weather_tool()})).ok());
    EXPECT_FALSE(forced_call_grammar(ToolCallFormat::Hermes, json::array()).ok());
    EXPECT_FALSE(
        forced_call_grammar(ToolCallFormat::Hermes, json::array({json{{"function", 3}}})).ok());
    EXPECT_FALSE(forced_call_grammar(ToolCallFormat::Hermes,
                                     json::parse(R"([{"name": "f", "parameters": "x"}])"))
                     .ok());
}

}  // namespace
}  // namespace strata
