// Continuous batching in strata serve: a model planned for several sequences decodes concurrent
// requests together, and each answer is still exactly what `strata run` gives alone with the
// same seed (sampling, stop conditions and all); a long prompt joins while others decode; more
// requests than sequences wait their turn; an embedding runs beside a generation.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <sstream>

#include "gguf/reader.h"
#include "model/model_info.h"
#include "plan/plan.h"
#include "server_test_support.h"

namespace strata::test {
namespace {

// The tiny model's plan with KV caches for `n_seq` sequences, as strata serve makes it.
Plan plan_with_sequences(uint32_t n_seq) {
    auto file = read_gguf(server_models().tiny);
    EXPECT_TRUE(file.ok());
    auto info = load_model_info(std::move(*file));
    EXPECT_TRUE(info.ok());
    PlanOptions o;
    o.n_ctx = 1024;  // what the test server serves
    o.n_seq = n_seq;
    Budgets b;
    b.ram = 1ull << 32;
    auto plan = make_plan(*info, HardwareProfile{}, b, o);
    EXPECT_TRUE(plan.ok()) << plan.error().message;
    return *plan;
}

// The value of a sample line of /metrics.
double metric(TestServer& srv, const std::string& name) {
    std::istringstream in(srv.get("/metrics")->body);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    }
    ADD_FAILURE() << name << " is not in /metrics";
    return 0;
}

TEST(ServerBatching, ConcurrentRequestsDecodeTogetherAndGetTheAnswersOfStrataRun) {
    TestServer srv(server::ServerOptions{}, {server_models().tiny}, {}, 0,
                   {plan_with_sequences(4)});
    // Six requests on four sequences: two wait for a sequence. One prompt is long (hundreds of
    // tokens: it is evaluated in chunks beside the others' decode steps).
    std::string long_prompt;
    for (int i = 0; i < 60; ++i) long_prompt += "the river runs past the old mill and ";
    const std::vector<std::pair<int, std::string>> asks = {
        {11, "Once upon a time"}, {12, "The river"},      {13, long_prompt},
        {14, "A story about"},    {15, "In the morning"}, {16, "Once upon a time"}};
    constexpr int kTokens = 24;
    std::vector<std::future<json>> answers;
    for (const auto& [seed, prompt] : asks) {
        answers.push_back(std::async(std::launch::async, [&, seed, prompt] {
            auto r = srv.post("/api/generate", sampled_request(seed, prompt, kTokens));
            EXPECT_EQ(r->status, 200) << r->body;
            return json::parse(r->body);
        }));
    }
    std::vector<json> got;
    for (auto& f : answers) got.push_back(f.get());
    for (size_t i = 0; i < asks.size(); ++i) {
        auto run = run_strata("run " + shell_quote(server_models().tiny) + " " +
                              sampled_run_flags(asks[i].first, asks[i].second, kTokens));
        ASSERT_EQ(run.exit_code, 0) << run.err;
        const json expected = json::parse(run.out);
        EXPECT_EQ(got[i]["response"], expected["text"]) << "seed " << asks[i].first;
        EXPECT_EQ(got[i]["eval_count"], expected["timings"]["generated_tokens"])
            << "seed " << asks[i].first;
    }
    // They were decoded together: passes held several sequences, and there were fewer passes
    // than the tokens generated.
    const double steps = metric(srv, "strata_batch_steps_total");
    const double widest = metric(srv, "strata_batch_widest");
    std::printf("[ figures  ] %zu requests on 4 sequences: %.0f passes, widest %.0f, mean %.2f\n",
                asks.size(), steps, widest,
                metric(srv, "strata_batch_sequences_total") / std::max(steps, 1.0));
    EXPECT_GE(widest, 2);
    EXPECT_LT(steps, double(asks.size() * kTokens));
}

TEST(ServerBatching, AConversationKeepsItsSequenceAndItsCachedPrefix) {
    TestServer srv(server::ServerOptions{}, {server_models().tiny}, {}, 0,
                   {plan_with_sequences(2)});
    const json first = {{"model", "tiny"},
                        {"messages", json::array({{{"role", "user"}, {"content", "Hello there"}}})},
                        {"stream", false},
                        {"options", {{"seed", 3}, {"num_predict", 6}}}};
    auto r1 = srv.post("/api/chat", first);
    ASSERT_EQ(r1->status, 200);
    const json a1 = json::parse(r1->body);
    json second = first;
    second["messages"].push_back(a1["message"]);
    second["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
    auto r2 = srv.post("/api/chat", second);
    ASSERT_EQ(r2->status, 200);
    const json a2 = json::parse(r2->body);
    // The second turn was given the sequence holding the first turn (not the idle one, which
    // the least-recently-used rule alone would pick), so only its new tokens were evaluated:
    // fewer than the first prompt and answer it repeats.
    EXPECT_LT(a2["prompt_eval_count"].get<int>(),
              a1["prompt_eval_count"].get<int>() + a1["eval_count"].get<int>());
}

// Clients that hang up, requests refused for their length and normal ones, all at once on a
// batched model: the refused ones get their 400, the hung-up ones stop, the others still get the
// answer they get alone, and the server goes on serving.
TEST(ServerBatching, HangUpsAndRefusalsDoNotDisturbTheOthers) {
    TestServer srv(server::ServerOptions{}, {server_models().tiny}, {}, 0,
                   {plan_with_sequences(4)});
    std::string too_long;
    for (int i = 0; i < 700; ++i) too_long += "word and ";  // over the 1024-token context
    const std::vector<std::string> prompts = {"Once upon a time", "The river", "A story about",
                                              "In the morning"};
    std::vector<std::future<json>> normal;
    std::vector<std::future<int>> refused;
    std::vector<std::future<bool>> gone;
    for (int i = 0; i < 4; ++i) {
        gone.push_back(std::async(std::launch::async, [&] {
            httplib::Client c = srv.client();
            httplib::Request req;
            req.method = "POST";
            req.path = "/api/generate";
            req.body = json{{"model", "tiny"}, {"prompt", "x"}, {"options", {{"num_predict", 800}}}}
                           .dump();
            int chunks = 0;
            req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
                return ++chunks < 3;
            };
            httplib::Response res;
            httplib::Error error = httplib::Error::Success;
            return c.send(req, res, error);
        }));
        normal.push_back(std::async(std::launch::async, [&, i] {
            auto r = srv.post("/api/generate", sampled_request(40 + i, prompts[size_t(i)], 20));
            EXPECT_EQ(r->status, 200) << r->body;
            return json::parse(r->body);
        }));
        refused.push_back(std::async(std::launch::async, [&] {
            json body = {
                {"model", "tiny"}, {"prompt", too_long}, {"truncate", false}, {"stream", false}};
            return srv.post("/api/generate", body)->status;
        }));
    }
    for (auto& f : gone) EXPECT_FALSE(f.get()) << "a client that hung up read the whole answer";
    for (auto& f : refused) EXPECT_EQ(f.get(), 400);
    std::vector<json> together;
    for (auto& f : normal) together.push_back(f.get());
    // The same requests one at a time.
    for (int i = 0; i < 4; ++i) {
        auto r = srv.post("/api/generate", sampled_request(40 + i, prompts[size_t(i)], 20));
        ASSERT_EQ(r->status, 200);
        EXPECT_EQ(json::parse(r->body)["response"], together[size_t(i)]["response"]) << i;
    }
    EXPECT_EQ(srv.server().stats().client_gone, 4u);
}

// An embedding asked for while a generation streams on the same model (planned for two
// sequences) runs beside it, in the same steps, and is answered before the generation ends; the
// embedding and the generation are each the answer it gets alone.
TEST(ServerBatching, AnEmbeddingRunsBesideAGenerationAndBothAnswersAreRight) {
    TestServer srv(server::ServerOptions{}, {server_models().tiny}, {}, 0,
                   {plan_with_sequences(2)});
    const json embed = {{"model", "tiny"},
                        {"input", {"the river runs past the old mill", "hello"}}};
    json generate = {{"model", "tiny"},
                     {"prompt", "Once upon a time"},
                     {"stream", false},
                     {"options", {{"temperature", 0}, {"num_predict", 600}}}};
    auto r = srv.post("/api/embed", embed);
    ASSERT_EQ(r->status, 200) << r->body;
    const json embedding_alone = json::parse(r->body);
    r = srv.post("/api/generate", generate);
    ASSERT_EQ(r->status, 200) << r->body;
    const json generation_alone = json::parse(r->body);
    // Long enough that the embedding comes while it runs.
    ASSERT_GE(generation_alone["eval_count"].get<int>(), 300);

    const uint64_t generations_before = srv.server().stats().generations;
    generate["stream"] = true;
    httplib::Client c = srv.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/api/generate";
    req.body = generate.dump();
    std::string streamed;
    json embedding_beside;
    bool generation_running = false;
    // At the generation's first chunk, this client asks for the embedding and waits for it.
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        streamed.append(data, n);
        if (embedding_beside.is_null()) {
            auto e = srv.post("/api/embed", embed);
            EXPECT_EQ(e->status, 200) << e->body;
            embedding_beside = json::parse(e->body);
            generation_running = srv.server().stats().generations == generations_before;
        }
        return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    ASSERT_TRUE(c.send(req, res, error));
    EXPECT_TRUE(generation_running) << "the embedding waited for the generation to end";
    EXPECT_EQ(embedding_beside["embeddings"], embedding_alone["embeddings"]);
    std::string text;
    for (const json& line : ndjson_lines(streamed)) text += line.value("response", "");
    EXPECT_EQ(text, generation_alone["response"]);
    EXPECT_GE(metric(srv, "strata_batch_widest"), 2);
}

}  // namespace
}  // namespace strata::test
