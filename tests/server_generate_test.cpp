// strata serve: generation through the native and OpenAI APIs (contract cases 7-25, 28, 29, 32,
// 37-39, 43), structured output, tools, KV prefix reuse, embeddings (33, 34, 42).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include "server_test_support.h"

namespace strata::test {
namespace {

class ServerGenerate : public SharedServerTest<ServerGenerate> {
  protected:
    static json post_json(const std::string& path, const json& body) {
        auto r = srv_->post(path, body);
        EXPECT_EQ(r->status, 200) << path << " " << body.dump() << " -> " << r->body;
        return json::parse(r->body);
    }
};

const json kGreedy = {{"temperature", 0}, {"num_predict", 12}};

TEST_F(ServerGenerate, GenerateStreamsNdjsonWithFinalMetrics) {
    auto r =
        srv_->post_raw("/api/generate",
                       json{{"model", "tiny"}, {"prompt", "Hi"}, {"options", kGreedy}}.dump(), "");
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
    auto lines = ndjson_lines(r->body);
    ASSERT_GE(lines.size(), 2u);
    std::string text;
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
        EXPECT_EQ(lines[i]["done"], false);
        ASSERT_TRUE(lines[i]["response"].is_string());
        EXPECT_TRUE(valid_utf8(lines[i]["response"]));
        EXPECT_FALSE(lines[i].contains("eval_count"));  // metrics only on the final chunk
        EXPECT_EQ(lines[i]["model"], "tiny");
        text += lines[i]["response"].get<std::string>();
    }
    const json& fin = lines.back();
    EXPECT_EQ(fin["done"], true);
    EXPECT_EQ(fin["done_reason"], "length");
    EXPECT_EQ(fin["eval_count"], 12);
    for (const char* k : {"total_duration", "load_duration", "prompt_eval_count",
                          "prompt_eval_duration", "eval_duration"}) {
        EXPECT_TRUE(fin[k].is_number_integer()) << k;
    }
    EXPECT_GE(fin["total_duration"].get<int64_t>(), fin["eval_duration"].get<int64_t>());
    EXPECT_TRUE(fin["context"].is_array());
    EXPECT_FALSE(text.empty());
    // The same request without streaming: one object with the same text.
    json one =
        post_json("/api/generate",
                  {{"model", "tiny"}, {"prompt", "Hi"}, {"stream", false}, {"options", kGreedy}});
    EXPECT_EQ(one["done"], true);
    EXPECT_EQ(one["response"], text);
}

TEST_F(ServerGenerate, SeedRepeatsAndNumPredictLimits) {
    json req = {{"model", "tiny"},
                {"prompt", "x"},
                {"stream", false},
                {"options", {{"num_predict", 3}, {"seed", 1}}}};
    json a = post_json("/api/generate", req), b = post_json("/api/generate", req);
    EXPECT_EQ(a["done_reason"], "length");
    EXPECT_LE(a["eval_count"].get<int>(), 3);
    EXPECT_EQ(a["response"], b["response"]);
}

TEST_F(ServerGenerate, LogprobsOfGreedyTokensAreTheTopAlternative) {
    json r = post_json("/api/generate", {{"model", "tiny"},
                                         {"prompt", "Once"},
                                         {"stream", false},
                                         {"logprobs", true},
                                         {"top_logprobs", 3},
                                         {"options", kGreedy}});
    ASSERT_TRUE(r["logprobs"].is_array()) << r.dump();
    ASSERT_EQ(r["logprobs"].size(), r["eval_count"].get<size_t>());
    std::string joined;
    for (const json& t : r["logprobs"]) {
        ASSERT_EQ(t["top_logprobs"].size(), 3u);
        EXPECT_LE(t["logprob"].get<double>(), 0.0);
        // Greedy with no penalties takes the model's most likely token.
        EXPECT_EQ(t["token"], t["top_logprobs"][0]["token"]);
        EXPECT_NEAR(t["logprob"].get<double>(), t["top_logprobs"][0]["logprob"].get<double>(),
                    1e-6);
        EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(),
                  t["top_logprobs"][1]["logprob"].get<double>());
        joined += t["token"].get<std::string>();
    }
    // The tokens spell the answer (byte tokens of a split character aside, which both sides write
    // as U+FFFD).
    const std::string response = r["response"];
    if (valid_utf8(joined)) {
        EXPECT_EQ(joined, response);
    }
    // Streamed, every token's entry arrives on some chunk.
    auto lines = ndjson_lines(
        srv_->post(
                "/api/generate",
                {{"model", "tiny"}, {"prompt", "Once"}, {"logprobs", true}, {"options", kGreedy}})
            ->body);
    size_t streamed = 0;
    for (const json& l : lines) streamed += l.value("logprobs", json::array()).size();
    EXPECT_EQ(streamed, r["eval_count"].get<size_t>());
    // OpenAI chat: choices[0].logprobs.content.
    json oa =
        post_json("/v1/chat/completions", {{"model", "tiny"},
                                           {"max_tokens", 4},
                                           {"temperature", 0},
                                           {"logprobs", true},
                                           {"top_logprobs", 2},
                                           {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
    EXPECT_EQ(oa["choices"][0]["logprobs"]["content"].size(), 4u);
}

TEST_F(ServerGenerate, StopStringIsNeverEmitted) {
    json free =
        post_json("/api/generate", {{"model", "tiny"},
                                    {"prompt", "Once"},
                                    {"stream", false},
                                    {"options", {{"temperature", 0}, {"num_predict", 40}}}});
    const std::string text = free["response"];
    ASSERT_GT(text.size(), 8u);
    const std::string stop = text.substr(text.size() / 2, 2);
    auto r = srv_->post("/api/generate",
                        {{"model", "tiny"},
                         {"prompt", "Once"},
                         {"options", {{"temperature", 0}, {"num_predict", 40}, {"stop", {stop}}}}});
    auto lines = ndjson_lines(r->body);
    std::string streamed;
    for (const json& l : lines) streamed += l.value("response", "");
    EXPECT_EQ(streamed, text.substr(0, text.find(stop)));
    EXPECT_EQ(lines.back()["done_reason"], "stop");
}

TEST_F(ServerGenerate, LoadUnloadRawAndKeepAlive) {
    EXPECT_EQ(post_json("/api/generate", {{"model", "tiny"}})["done_reason"], "load");
    EXPECT_EQ(post_json("/api/generate", {{"model", "tiny"}, {"keep_alive", 0}})["done_reason"],
              "unload");
    EXPECT_EQ(
        post_json("/api/chat", {{"model", "tiny"}, {"messages", json::array()}})["done_reason"],
        "load");
    json raw = post_json("/api/generate", {{"model", "tiny"},
                                           {"prompt", "x"},
                                           {"raw", true},
                                           {"stream", false},
                                           {"options", kGreedy}});
    EXPECT_FALSE(raw.contains("context"));
    for (const json& ka : {json("10m"), json(300), json(-1), json("0")}) {
        post_json("/api/generate", {{"model", "tiny"},
                                    {"prompt", "x"},
                                    {"stream", false},
                                    {"keep_alive", ka},
                                    {"options", kGreedy}});
    }
    post_json("/api/generate", {{"model", "tiny"},
                                {"prompt", "x"},
                                {"stream", false},
                                {"format", ""},
                                {"options",
                                 {{"num_predict", 2},
                                  {"mirostat", 2},
                                  {"tfs_z", 1},
                                  {"numa", false},
                                  {"low_vram", true}}}});
    post_json("/api/generate", {{"model", "tiny"},
                                {"prompt", "x"},
                                {"stream", false},
                                {"format", nullptr},
                                {"options", kGreedy}});
}

TEST_F(ServerGenerate, JsonFormatAlwaysParses) {
    for (int seed = 1; seed <= 3; ++seed) {
        json r = post_json("/api/generate", {{"model", "tiny"},
                                             {"prompt", "data"},
                                             {"stream", false},
                                             {"format", "json"},
                                             {"options", {{"seed", seed}, {"num_predict", 60}}}});
        json parsed = json::parse(r["response"].get<std::string>(), nullptr, false);
        EXPECT_TRUE(parsed.is_object()) << r["response"];
    }
    const json schema = {
        {"type", "object"},
        {"properties", {{"age", {{"type", "integer"}}}, {"ok", {{"type", "boolean"}}}}},
        {"required", {"age", "ok"}}};
    json r = post_json("/api/chat", {{"model", "tiny"},
                                     {"stream", false},
                                     {"format", schema},
                                     {"messages", {{{"role", "user"}, {"content", "age?"}}}},
                                     {"options", {{"seed", 4}, {"num_predict", 40}}}});
    json parsed = json::parse(r["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << r["message"]["content"];
    EXPECT_TRUE(parsed["age"].is_number_integer());
    EXPECT_TRUE(parsed["ok"].is_boolean());
}

// The fewest tokens a request's answer needs, when a 400 names it ("... takes at least 5 tokens").
int named_minimum(const std::string& body) {
    std::smatch m;
    if (!std::regex_search(body, m, std::regex("at least ([0-9]+) tokens"))) return -1;
    return std::stoi(m[1]);
}

// A `format` under a num_predict too small for any answer is refused with 400 naming the
// minimum; from that minimum on, every answer parses and keeps to the schema, however the
// model wanders (here into strings of at least 12 characters, which one token opens).
TEST_F(ServerGenerate, FormatUnderSmallNumPredictParsesOrIsRefusedNamingTheMinimum) {
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"age", {{"type", "integer"}}},
          {"ok", {{"type", "boolean"}}},
          {"notes", {{"type", "array"}, {"items", {{"type", "string"}, {"minLength", 12}}}}}}},
        {"required", {"age", "ok", "notes"}}};
    auto keeps_to_schema = [](const json& v) {
        if (!v.is_object() || v.size() != 3 || !v["age"].is_number_integer() ||
            !v["ok"].is_boolean() || !v["notes"].is_array()) {
            return false;
        }
        for (const json& note : v["notes"]) {
            if (!note.is_string() || note.get<std::string>().size() < 12) return false;
        }
        return true;
    };
    for (const json& format : {json("json"), schema}) {
        int minimum = -1;
        for (int n = 1; n <= 60; ++n) {
            for (int seed = 1; seed <= (n > 12 ? 4 : 1); ++seed) {
                const json req = {{"model", "tiny"},
                                  {"prompt", "data"},
                                  {"stream", false},
                                  {"format", format},
                                  {"options", {{"seed", seed}, {"num_predict", n}}}};
                auto r = srv_->post("/api/generate", req);
                SCOPED_TRACE(req.dump() + " -> " + r->body);
                if (r->status == 400) {
                    // Refused only below the minimum, and always with the same one.
                    const int named = named_minimum(r->body);
                    EXPECT_GT(named, n);
                    EXPECT_TRUE(minimum == -1 || minimum == named);
                    minimum = named;
                    continue;
                }
                ASSERT_EQ(r->status, 200);
                EXPECT_LE(minimum, n);
                const json body = json::parse(r->body);
                const json v = json::parse(body["response"].get<std::string>(), nullptr, false);
                if (format.is_string()) {
                    EXPECT_TRUE(v.is_object());
                } else {
                    EXPECT_TRUE(keeps_to_schema(v));
                }
                EXPECT_LE(body["eval_count"].get<int>(), n);
            }
        }
        // The schema's shortest answer, {"age":0,"ok":true,"notes":[]}, is not one token.
        if (format.is_string()) continue;
        ASSERT_GT(minimum, 1);
        // A stream is refused the same way, before its first line.
        auto streamed = srv_->post("/api/generate", {{"model", "tiny"},
                                                     {"prompt", "data"},
                                                     {"format", format},
                                                     {"options", {{"num_predict", 1}}}});
        EXPECT_EQ(streamed->status, 400);
        EXPECT_EQ(named_minimum(streamed->body), minimum) << streamed->body;
        // OpenAI's response_format and max_tokens follow the same rule.
        json oa = {
            {"model", "tiny"},
            {"max_tokens", minimum - 1},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", format}}}}},
            {"messages", {{{"role", "user"}, {"content", "data"}}}}};
        auto refused = srv_->post("/v1/chat/completions", oa);
        EXPECT_EQ(refused->status, 400);
        EXPECT_EQ(named_minimum(refused->body), minimum) << refused->body;
        oa["max_tokens"] = minimum;
        json ok = post_json("/v1/chat/completions", oa);
        const std::string content = ok["choices"][0]["message"]["content"];
        EXPECT_TRUE(keeps_to_schema(json::parse(content, nullptr, false))) << content;
    }
}

// A forced tool call under a small num_predict is refused naming the minimum, or comes back
// as a parsed call whose arguments keep to the function's schema, never as raw markup.
TEST_F(ServerGenerate, ForcedToolCallUnderSmallNumPredictIsACallOrRefused) {
    STRATA_REQUIRE_TESTDATA();
    const json tools = {
        {{"type", "function"},
         {"function",
          {{"name", "get_weather"},
           {"parameters",
            {{"type", "object"},
             {"properties",
              {{"city", {{"type", "string"}, {"minLength", 3}}}, {"days", {{"type", "integer"}}}}},
             {"required", {"city"}}}}}}}};
    const json ask = {{"role", "user"}, {"content", "What's the weather in Paris?"}};
    auto first = srv_->post("/api/chat", {{"model", "tools"},
                                          {"stream", false},
                                          {"tools", tools},
                                          {"tool_choice", "required"},
                                          {"messages", {ask}},
                                          {"options", {{"num_predict", 1}}}});
    ASSERT_EQ(first->status, 400) << first->body;
    const int minimum = named_minimum(first->body);
    ASSERT_GT(minimum, 1) << first->body;
    for (int n = minimum - 2; n <= minimum + 30; ++n) {
        for (const json& choice : {json("required"), json("get_weather")}) {
            const json req = {{"model", "tools"},  {"stream", false},
                              {"tools", tools},    {"tool_choice", choice},
                              {"messages", {ask}}, {"options", {{"seed", n}, {"num_predict", n}}}};
            auto r = srv_->post("/api/chat", req);
            SCOPED_TRACE(req.dump() + " -> " + r->body);
            if (r->status == 400) {
                EXPECT_EQ(named_minimum(r->body), minimum);
                EXPECT_LT(n, minimum);
                continue;
            }
            ASSERT_EQ(r->status, 200);
            EXPECT_GE(n, minimum);
            const json body = json::parse(r->body);
            const json& msg = body["message"];
            EXPECT_EQ(msg["content"].get<std::string>().find("tool_call"), std::string::npos);
            ASSERT_TRUE(msg["tool_calls"].is_array());
            ASSERT_EQ(msg["tool_calls"].size(), 1u);
            const json& f = msg["tool_calls"][0]["function"];
            EXPECT_EQ(f["name"], "get_weather");
            ASSERT_TRUE(f["arguments"].is_object());
            ASSERT_TRUE(f["arguments"]["city"].is_string());
            EXPECT_GE(f["arguments"]["city"].get<std::string>().size(), 3u);
        }
    }
    // The OpenAI API names the same minimum.
    json oa = {{"model", "tools"},
               {"tools", tools},
               {"tool_choice", "required"},
               {"max_tokens", 1},
               {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}}};
    auto r = srv_->post("/v1/chat/completions", oa);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(named_minimum(r->body), minimum) << r->body;
}

TEST_F(ServerGenerate, ChatStreamsAssistantMessages) {
    auto r = srv_->post("/api/chat", {{"model", "tiny"},
                                      {"options", kGreedy},
                                      {"messages", {{{"role", "USER"}, {"content", "Hello"}}}}});
    ASSERT_EQ(r->status, 200);
    auto lines = ndjson_lines(r->body);
    ASSERT_GE(lines.size(), 2u);
    std::string text;
    for (const json& l : lines) {
        EXPECT_EQ(l["message"]["role"], "assistant");
        ASSERT_TRUE(l["message"]["content"].is_string());
        text += l["message"]["content"].get<std::string>();
    }
    EXPECT_EQ(lines.back()["done"], true);
    EXPECT_TRUE(lines.back()["eval_count"].is_number_integer());
    EXPECT_FALSE(text.empty());
    json one = post_json("/api/chat", {{"model", "tiny"},
                                       {"stream", false},
                                       {"options", kGreedy},
                                       {"messages", {{{"role", "user"}, {"content", "Hello"}}}}});
    EXPECT_EQ(one["message"]["content"], text);
}

TEST_F(ServerGenerate, FinalChunkCarriesTheDiskBytesOfTheAnswer) {
    for (const char* path : {"/api/chat", "/api/generate"}) {
        json body = {{"model", "tiny"},
                     {"stream", false},
                     {"options", {{"temperature", 0}, {"num_predict", 4}}}};
        if (std::string(path) == "/api/chat") {
            body["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
        } else {
            body["prompt"] = "Hi";
        }
        auto r = srv_->post(path, body);
        ASSERT_EQ(r->status, 200) << r->body;
        const json fin = json::parse(r->body);
        ASSERT_TRUE(fin["strata_eval_disk_bytes"].is_number_unsigned()) << path << r->body;
        // The test models are loaded whole: their answers read nothing from the file.
        EXPECT_EQ(fin["strata_eval_disk_bytes"], 0) << path;
    }
}

TEST_F(ServerGenerate, ResentHistoryReusesTheKvCache) {
    json messages = {
        {{"role", "system"}, {"content", "You are a friendly helper who tells stories."}},
        {{"role", "user"}, {"content", "Tell me a story about a river and a tree."}}};
    json first = post_json(
        "/api/chat",
        {{"model", "tiny"}, {"stream", false}, {"options", kGreedy}, {"messages", messages}});
    messages.push_back(first["message"]);
    messages.push_back({{"role", "user"}, {"content", "And then?"}});
    json second = post_json(
        "/api/chat",
        {{"model", "tiny"}, {"stream", false}, {"options", kGreedy}, {"messages", messages}});
    // Only what follows the common prefix is evaluated: far fewer tokens than the whole
    // conversation (which is longer than the first prompt).
    EXPECT_LT(second["prompt_eval_count"].get<int>(), first["prompt_eval_count"].get<int>());
}

TEST_F(ServerGenerate, ForcedToolCallComesBackParsed) {
    STRATA_REQUIRE_TESTDATA();
    const json tools = {{{"type", "function"},
                         {"function",
                          {{"name", "get_weather"},
                           {"description", "Weather of a city"},
                           {"parameters",
                            {{"type", "object"},
                             {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                             {"required", {"city"}}}}}}}};
    json req = {{"model", "tools"},
                {"stream", false},
                {"tools", tools},
                {"tool_choice", "required"},
                {"messages", {{{"role", "user"}, {"content", "What's the weather in Paris?"}}}},
                {"options", {{"seed", 3}, {"num_predict", 80}}}};
    json r = post_json("/api/chat", req);
    ASSERT_TRUE(r["message"]["tool_calls"].is_array()) << r.dump();
    const json& call = r["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_TRUE(call["function"]["arguments"].is_object());
    EXPECT_TRUE(call["function"]["arguments"]["city"].is_string());
    EXPECT_EQ(r["message"]["content"].get<std::string>().find("<tool_call>"), std::string::npos);
    // Streaming: the call arrives in a done:false chunk, then the final chunk.
    req["stream"] = true;
    auto lines = ndjson_lines(srv_->post("/api/chat", req)->body);
    bool saw_call = false;
    for (const json& l : lines) {
        if (l["message"].contains("tool_calls")) {
            saw_call = true;
            EXPECT_EQ(l["done"], false);
        }
    }
    EXPECT_TRUE(saw_call);
    EXPECT_EQ(lines.back()["done"], true);
    // The follow-up with the tool's answer is rendered through the template and answered.
    json follow = {{"model", "tools"},
                   {"stream", false},
                   {"tools", tools},
                   {"options", {{"num_predict", 8}, {"seed", 1}}},
                   {"messages",
                    {{{"role", "user"}, {"content", "What's the weather in Paris?"}},
                     r["message"],
                     {{"role", "tool"}, {"content", "18C"}, {"tool_name", "get_weather"}}}}};
    json answer = post_json("/api/chat", follow);
    EXPECT_TRUE(answer["message"]["content"].is_string());
    // Arguments given as a JSON string in the history are accepted too.
    follow["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{\"city\":\"Paris\"}";
    post_json("/api/chat", follow);
    // OpenAI shape: arguments as a string, finish_reason tool_calls.
    json oa = post_json("/v1/chat/completions",
                        {{"model", "tools"},
                         {"tools", tools},
                         {"tool_choice", "required"},
                         {"seed", 3},
                         {"max_tokens", 80},
                         {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}}});
    const json& c = oa["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls");
    ASSERT_TRUE(c["message"]["tool_calls"][0]["function"]["arguments"].is_string());
    EXPECT_TRUE(
        json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>())
            .is_object());
    // OpenAI's object shape names the function on the native API too; an unknown name and a
    // shape that names none are refused.
    req["stream"] = false;
    req["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    json named = post_json("/api/chat", req);
    ASSERT_TRUE(named["message"]["tool_calls"].is_array()) << named.dump();
    EXPECT_EQ(named["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    req["tool_choice"]["function"]["name"] = "get_time";
    auto unknown = srv_->post("/api/chat", req);
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->status, 400);
    EXPECT_NE(unknown->body.find("get_time"), std::string::npos) << unknown->body;
    req["tool_choice"] = {{"type", "function"}};
    EXPECT_EQ(srv_->post("/api/chat", req)->status, 400);
}

TEST_F(ServerGenerate, ThinkFalseIsAcceptedOnAnyModel) {
    post_json("/api/chat", {{"model", "tiny"},
                            {"stream", false},
                            {"think", false},
                            {"options", kGreedy},
                            {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
}

TEST_F(ServerGenerate, EmbeddingsAreNormalizedAndOrdered) {
    json one = post_json("/api/embed", {{"model", "tiny"}, {"input", "hello"}});
    ASSERT_EQ(one["embeddings"].size(), 1u);
    double ss = 0;
    for (double x : one["embeddings"][0]) ss += x * x;
    EXPECT_NEAR(ss, 1.0, 1e-4);
    json three =
        post_json("/api/embed", {{"model", "tiny"}, {"input", {"a river", "hello", "the tree"}}});
    ASSERT_EQ(three["embeddings"].size(), 3u);
    for (size_t i = 0; i < 256; ++i) {
        EXPECT_NEAR(three["embeddings"][1][i].get<double>(), one["embeddings"][0][i].get<double>(),
                    1e-5);
    }
    EXPECT_NE(three["embeddings"][0], three["embeddings"][2]);
    EXPECT_EQ(post_json("/api/embed", {{"model", "tiny"}, {"input", json::array()}})["embeddings"],
              json::array());
    json cut = post_json("/api/embed", {{"model", "tiny"}, {"input", "hello"}, {"dimensions", 8}});
    ASSERT_EQ(cut["embeddings"][0].size(), 8u);
    ss = 0;
    for (double x : cut["embeddings"][0]) ss += x * x;
    EXPECT_NEAR(ss, 1.0, 1e-4);
    std::string long_text;
    for (int i = 0; i < 1200; ++i) long_text += " river";
    auto r =
        srv_->post("/api/embed", {{"model", "tiny"}, {"input", long_text}, {"truncate", false}});
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("context length"), std::string::npos);
    json legacy = post_json("/api/embeddings", {{"model", "tiny"}, {"prompt", "hello"}});
    EXPECT_EQ(legacy["embedding"].size(), 256u);
    EXPECT_EQ(post_json("/api/embeddings", {{"model", "tiny"}, {"prompt", ""}})["embedding"],
              json::array());
    // OpenAI: base64 is the little-endian float32 of the float answer.
    json f = post_json("/v1/embeddings", {{"model", "tiny"}, {"input", "hello"}});
    json b = post_json("/v1/embeddings",
                       {{"model", "tiny"}, {"input", "hello"}, {"encoding_format", "base64"}});
    const std::string b64 = b["data"][0]["embedding"];
    EXPECT_EQ(b64.size(), (256u * 4 + 2) / 3 * 4);
    EXPECT_EQ(f["data"][0]["embedding"].size(), 256u);
}

// An embedding input longer than the served context, when it may not be cut, is the request's
// fault: 400 with both lengths, in Ollama's words, from every embeddings endpoint. Allowed to cut
// (the default), the server embeds the tokens that fit.
TEST_F(ServerGenerate, AnEmbeddingInputLongerThanTheContextIs400WithBothLengths) {
    std::string long_text;
    for (int i = 0; i < 1500; ++i) long_text += " river";
    const std::vector<std::pair<std::string, json>> asks = {
        {"/api/embed", {{"model", "tiny"}, {"input", long_text}, {"truncate", false}}},
        {"/api/embeddings", {{"model", "tiny"}, {"prompt", long_text}, {"truncate", false}}},
        {"/v1/embeddings", {{"model", "tiny"}, {"input", long_text}, {"truncate", false}}}};
    for (const auto& [path, body] : asks) {
        auto r = srv_->post(path, body);
        EXPECT_EQ(r->status, 400) << path << ": " << r->body;
        EXPECT_NE(r->body.find("the input length exceeds the context length ("), std::string::npos)
            << r->body;
        EXPECT_NE(r->body.find(" tokens, the context holds 1024)"), std::string::npos) << r->body;
    }
    json cut = post_json("/api/embed", {{"model", "tiny"}, {"input", long_text}});
    EXPECT_EQ(cut["prompt_eval_count"], 1024);
    EXPECT_EQ(cut["embeddings"][0].size(), 256u);
}

// /metrics answers in Prometheus's text format and counts what the server did.
TEST_F(ServerGenerate, MetricsCountRequestsTokensAndLoads) {
    post_json("/api/generate", {{"model", "tiny"},
                                {"prompt", "hello"},
                                {"stream", false},
                                {"options", {{"num_predict", 4}, {"seed", 1}}}});
    auto r = srv_->get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
    std::map<std::string, double> values;
    std::istringstream lines(r->body);
    const std::regex sample(R"(^([a-z_]+(\{[^}]*\})?) (-?[0-9.eE+-]+|NaN)$)");
    for (std::string line; std::getline(lines, line);) {
        if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) continue;
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, sample)) << "not a sample: " << line;
        values[m[1].str()] = std::stod(m[3].str());
    }
    EXPECT_GE(values["strata_requests_total{endpoint=\"/api/generate\",status=\"200\"}"], 1);
    EXPECT_GE(values["strata_generated_tokens_total"], 1);
    EXPECT_GE(values["strata_prompt_tokens_total"], 1);
    EXPECT_GE(values["strata_model_loads_total"], 1);
    EXPECT_GE(values["strata_models_loaded"], 1);
    EXPECT_GT(values["strata_tokens_per_second"], 0);
    for (const char* name :
         {"strata_queue_depth", "strata_active_sequences", "strata_disk_read_bytes_total",
          "strata_expert_cache_hit_ratio{level=\"ram\"}",
          "strata_expert_cache_hit_ratio{level=\"gpu\"}"}) {
        EXPECT_TRUE(values.count(name)) << name;
    }
}

// A prompt over the context with truncate false is refused in Ollama's words on every endpoint.
TEST_F(ServerGenerate, ContextOverflowIsReportedInOllamasWords) {
    std::string long_text;
    for (int i = 0; i < 1200; ++i) long_text += " river";
    const json generate = {
        {"model", "tiny"}, {"prompt", long_text}, {"stream", false}, {"truncate", false}};
    const json chat = {{"model", "tiny"},
                       {"messages", {{{"role", "user"}, {"content", long_text}}}},
                       {"stream", false},
                       {"truncate", false}};
    for (const auto& [path, body] :
         {std::pair{"/api/generate", generate}, std::pair{"/api/chat", chat}}) {
        auto r = srv_->post(path, body);
        ASSERT_TRUE(r) << path;
        EXPECT_EQ(r->status, 400) << path;
        EXPECT_NE(r->body.find("the input length exceeds the context length"), std::string::npos)
            << path << ": " << r->body;
    }
}

// n > 1 on the OpenAI endpoints is refused with the reason, not answered with one choice.
TEST_F(ServerGenerate, OpenAIMoreThanOneChoiceIsRefused) {
    const json messages = {{{"role", "user"}, {"content", "hi"}}};
    auto two =
        srv_->post("/v1/chat/completions", {{"model", "tiny"}, {"messages", messages}, {"n", 2}});
    ASSERT_TRUE(two);
    EXPECT_EQ(two->status, 400);
    EXPECT_NE(two->body.find("n > 1 is not supported"), std::string::npos) << two->body;
    auto bad = srv_->post("/v1/completions", {{"model", "tiny"}, {"prompt", "hi"}, {"n", 0}});
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    auto one = srv_->post("/v1/chat/completions",
                          {{"model", "tiny"}, {"messages", messages}, {"n", 1}, {"max_tokens", 2}});
    ASSERT_TRUE(one);
    EXPECT_EQ(one->status, 200) << one->body;
}

TEST_F(ServerGenerate, OpenAIChatAndCompletions) {
    json req = {{"model", "tiny"},
                {"max_tokens", 6},
                {"temperature", 0},
                {"messages", {{{"role", "user"}, {"content", "Hello"}}}}};
    json r = post_json("/v1/chat/completions", req);
    EXPECT_EQ(r["object"], "chat.completion");
    EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string());
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["usage"]["total_tokens"].get<int>(),
              r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
    req["stream"] = true;
    req["stream_options"] = {{"include_usage", true}};
    auto s = srv_->post("/v1/chat/completions", req);
    EXPECT_NE(s->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    auto events = sse_events(s->body);
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
    std::string text;
    for (size_t i = 0; i + 3 < events.size(); ++i) {
        EXPECT_EQ(events[i]["id"], events[0]["id"]);
        EXPECT_EQ(events[i]["created"], events[0]["created"]);
        if (i > 0) {
            EXPECT_FALSE(events[i]["choices"][0]["delta"].contains("role"));
        }
        text += events[i]["choices"][0]["delta"].value("content", "");
    }
    const json& finish = events[events.size() - 3];
    EXPECT_EQ(finish["choices"][0]["delta"], json::object());
    EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
    const json& usage = events[events.size() - 2];
    EXPECT_EQ(usage["choices"], json::array());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
    EXPECT_EQ(text, r["choices"][0]["message"]["content"]);
    json c =
        post_json("/v1/completions", {{"model", "tiny"}, {"prompt", "1,2,3,"}, {"max_tokens", 5}});
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_TRUE(c["choices"][0]["text"].is_string());
}

}  // namespace
}  // namespace strata::test
