// strata serve: the endpoints that need no generation (contract cases 1-6, 30, 31, 35, 36, 41),
// request-level errors (26, 27, 40) and the transport limits.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "gguf/reader.h"
#include "plan/plan.h"
#include "server_test_support.h"

namespace strata::test {
namespace {

class ServerBasics : public SharedServerTest<ServerBasics> {};

json body_of(const httplib::Result& r) {
    return json::parse(r->body);
}

TEST_F(ServerBasics, HealthAndVersion) {
    auto r = srv_->get("/");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "Ollama is running");
    auto c = srv_->client();
    auto h = c.Head("/");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_TRUE(h->body.empty());
    auto v = srv_->get("/api/version");
    ASSERT_TRUE(v);
    EXPECT_TRUE(std::regex_search(body_of(v)["version"].get<std::string>(),
                                  std::regex(R"(^\d+\.\d+\.\d+)")));
}

TEST_F(ServerBasics, TagsListEveryModelWithStableDigest) {
    auto a = body_of(srv_->get("/api/tags"));
    auto b = body_of(srv_->get("/api/tags"));
    ASSERT_TRUE(a["models"].is_array());
    ASSERT_EQ(a["models"].size(), 2u);
    const json& m = a["models"][0];
    EXPECT_EQ(m["name"], "tiny:latest");
    EXPECT_EQ(m["model"], m["name"]);
    EXPECT_TRUE(std::regex_match(m["digest"].get<std::string>(), std::regex("[0-9a-f]{64}")));
    EXPECT_EQ(m["digest"], b["models"][0]["digest"]);
    EXPECT_NE(m["digest"], a["models"][1]["digest"]);
    EXPECT_TRUE(std::regex_match(m["modified_at"].get<std::string>(),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)")));
    for (const char* k :
         {"parent_model", "format", "family", "families", "parameter_size", "quantization_level"}) {
        EXPECT_TRUE(m["details"].contains(k)) << k;
    }
    EXPECT_EQ(m["details"]["format"], "gguf");
    EXPECT_EQ(m["details"]["family"], "llama");
    EXPECT_EQ(m["details"]["quantization_level"], "Q8_0");
    EXPECT_GT(m["size"].get<uint64_t>(), 1000u);
}

TEST_F(ServerBasics, ShowByModelNameOrShortName) {
    for (const json& req : {json{{"model", "tiny:latest"}}, json{{"name", "tiny:latest"}},
                            json{{"model", "tiny"}}, json{{"model", " TINY "}}}) {
        auto r = srv_->post("/api/show", req);
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << req.dump() << " " << r->body;
        json j = body_of(r);
        ASSERT_TRUE(j["model_info"].is_object());
        EXPECT_EQ(j["model_info"]["general.architecture"], "llama");
        EXPECT_GT(j["model_info"]["llama.context_length"].get<int64_t>(), 0);
        EXPECT_LE(j["model_info"]["llama.context_length"].get<int64_t>(), 1024);
        EXPECT_EQ(j["details"]["format"], "gguf");
        EXPECT_NE(std::find(j["capabilities"].begin(), j["capabilities"].end(), "completion"),
                  j["capabilities"].end());
        // Long arrays (the vocabulary) are left out unless verbose.
        EXPECT_EQ(j["model_info"]["tokenizer.ggml.tokens"], json::array());
    }
    if (have_testdata()) {  // tools.gguf carries Qwen2.5's template only then
        json tools = body_of(srv_->post("/api/show", {{"model", "tools"}}));
        EXPECT_NE(std::find(tools["capabilities"].begin(), tools["capabilities"].end(), "tools"),
                  tools["capabilities"].end());
    }
    json verbose = body_of(srv_->post("/api/show", {{"model", "tiny"}, {"verbose", true}}));
    EXPECT_GT(verbose["model_info"]["tokenizer.ggml.tokens"].size(), 100u);
}

TEST_F(ServerBasics, ShowErrors) {
    auto r = srv_->post("/api/show", json::object());
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(body_of(r)["error"], "model is required");
    r = srv_->post("/api/show", {{"model", "nope"}});
    EXPECT_EQ(r->status, 404);
    EXPECT_NE(body_of(r)["error"].get<std::string>().find("not found"), std::string::npos);
}

TEST_F(ServerBasics, PsListsLoadedModels) {
    auto r = srv_->get("/api/ps");
    ASSERT_EQ(r->status, 200);
    ASSERT_TRUE(body_of(r)["models"].is_array());
    // Loading through an empty generate, then it is listed.
    auto load = srv_->post("/api/generate", {{"model", "tiny"}});
    ASSERT_EQ(load->status, 200);
    EXPECT_EQ(body_of(load)["done_reason"], "load");
    json ps = body_of(srv_->get("/api/ps"));
    ASSERT_GE(ps["models"].size(), 1u);
    for (const char* k : {"name", "model", "expires_at", "size_vram", "context_length"}) {
        EXPECT_TRUE(ps["models"][0].contains(k)) << k;
    }
}

TEST_F(ServerBasics, UnknownPathsMethodsAndCors) {
    auto r = srv_->get("/api/nothing");
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->body, "404 page not found");
    r = srv_->get("/api/chat");
    EXPECT_EQ(r->status, 405);
    auto c = srv_->client();
    httplib::Headers h = {{"Origin", "http://localhost:5173"},
                          {"Access-Control-Request-Method", "POST"}};
    auto o = c.Options("/api/chat", h);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->status, 204);
    EXPECT_EQ(o->get_header_value("Access-Control-Allow-Origin"), "http://localhost:5173");
    httplib::Headers evil = {{"Origin", "http://evil.example"}};
    auto e = c.Get("/api/version", evil);
    EXPECT_FALSE(e->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServerBasics, MalformedRequestsGet400) {
    struct Case {
        const char* path;
        std::string body;
        int status;
    };
    const std::vector<Case> cases = {
        {"/api/chat", "", 400},
        {"/api/chat", R"({"model":)", 400},
        {"/api/chat", R"({"model":"tiny","messages":[],"stream":"yes"})", 400},
        {"/api/chat", R"({"model":"tiny","messages":"hi"})", 400},
        {"/api/chat", R"({"model":"","messages":[{"role":"user","content":"x"}]})", 400},
        {"/api/chat", R"({"model":"nope","messages":[{"role":"user","content":"x"}]})", 404},
        {"/api/chat",
         R"({"model":"nope","messages":[{"role":"user","content":"x"}],"stream":false})", 404},
        {"/api/generate", R"({"model":"nope","prompt":"x"})", 404},
        {"/api/generate", R"({"model":"tiny","prompt":"x","raw":true,"system":"s"})", 400},
        {"/api/generate", R"({"model":"tiny","prompt":"x","options":{"temperature":"hot"}})", 400},
        {"/api/generate", R"({"model":"tiny","prompt":"x","keep_alive":"10 minutes"})", 400},
        {"/api/generate", R"({"model":"tiny","prompt":"x","format":"yaml"})", 400},
        {"/api/generate", R"({"model":"tiny","prompt":"x","logprobs":true,"top_logprobs":21})",
         400},
        {"/api/chat", R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"think":true})",
         400},
        {"/api/chat",
         R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"think":"extreme"})", 400},
        {"/api/chat",
         R"({"model":"tiny","messages":[{"role":"user","content":"x","images":["aGVsbG8="]}]})",
         400},
        {"/api/chat",
         R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})",
         400},
        {"/api/embed", R"({"model":"tiny","input":[1,2]})", 400},
        {"/api/embed", R"({"model":"nope","input":"x"})", 404},
        {"/api/pull", R"({"name":"nope"})", 404},
        {"/api/create", R"({"model":"x"})", 501},
        {"/api/push", R"({"model":"tiny"})", 501},
        {"/api/copy", R"({"source":"tiny","destination":"x"})", 501},
    };
    for (const Case& c : cases) {
        auto r = srv_->post_raw(c.path, c.body, "application/x-www-form-urlencoded");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, c.status) << c.path << " " << c.body << " -> " << r->body;
        EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
        json j = json::parse(r->body, nullptr, false);
        ASSERT_TRUE(j.is_object()) << r->body;
        EXPECT_TRUE(j["error"].is_string()) << r->body;
    }
    auto d = srv_->client().Delete("/api/delete", R"({"name":"nope"})", "application/json");
    EXPECT_EQ(d->status, 404);
}

TEST_F(ServerBasics, PullOfAServedModelSucceeds) {
    auto r = srv_->post("/api/pull", {{"name", "tiny"}});
    ASSERT_EQ(r->status, 200);
    auto lines = ndjson_lines(r->body);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back()["status"], "success");
    r = srv_->post("/api/pull", {{"model", "tiny"}, {"stream", false}});
    EXPECT_EQ(body_of(r)["status"], "success");
}

TEST_F(ServerBasics, OpenAIModelsAndErrors) {
    json models = body_of(srv_->get("/v1/models"));
    EXPECT_EQ(models["object"], "list");
    EXPECT_EQ(models["data"][0]["id"], "tiny:latest");
    EXPECT_EQ(models["data"][0]["object"], "model");
    json one = body_of(srv_->get("/v1/models/tiny:latest"));
    EXPECT_EQ(one["id"], "tiny:latest");
    EXPECT_EQ(srv_->get("/v1/models/nope")->status, 404);
    auto r = srv_->post("/v1/chat/completions", {{"model", "tiny"}, {"messages", json::array()}});
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(body_of(r)["error"]["type"], "invalid_request_error");
    r = srv_->post("/v1/chat/completions",
                   {{"model", "nope"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(body_of(r)["error"]["type"], "not_found_error");
    json image = {
        {"model", "tiny"},
        {"messages",
         {{{"role", "user"},
           {"content", {{{"type", "image_url"}, {"image_url", {{"url", "https://x/y.png"}}}}}}}}}};
    EXPECT_EQ(srv_->post("/v1/chat/completions", image)->status, 400);
    r = srv_->post("/v1/embeddings",
                   {{"model", "tiny"}, {"input", "x"}, {"encoding_format", "int8"}});
    EXPECT_EQ(r->status, 400);
    r = srv_->post("/v1/embeddings", {{"model", "tiny"}, {"input", json::array()}});
    EXPECT_EQ(r->status, 400);
}

std::vector<std::string> loaded_names(const TestServer& srv) {
    const json ps = json::parse(srv.get("/api/ps")->body);
    std::vector<std::string> names;
    for (const json& m : ps["models"]) names.push_back(m["name"]);
    return names;
}

TEST(ServerModels, AliasesNameModelsAndTheRamBudgetKeepsOneLoaded) {
    // Room for one of the two models (the same size) but not both.
    const uint64_t one = std::filesystem::file_size(server_models().tiny);
    const std::vector<std::string> paths = {server_models().tiny, server_models().tools};
    const std::vector<std::string> aliases = {"first", ""};
    TestServer srv(server::ServerOptions{}, paths, aliases, one + one / 2);
    json tags = json::parse(srv.get("/api/tags")->body);
    EXPECT_EQ(tags["models"][0]["name"], "first:latest");
    EXPECT_EQ(srv.post("/api/show", {{"model", "tiny"}})->status, 404);
    const json req = {{"prompt", "x"}, {"stream", false}, {"options", {{"num_predict", 2}}}};
    json a = req, b = req;
    a["model"] = "first";
    b["model"] = "tools";
    ASSERT_EQ(srv.post("/api/generate", a)->status, 200);
    EXPECT_EQ(loaded_names(srv), std::vector<std::string>{"first:latest"});
    ASSERT_EQ(srv.post("/api/generate", b)->status, 200);
    EXPECT_EQ(loaded_names(srv), std::vector<std::string>{"tools:latest"});
}

TEST(ServerModels, ThePlanCountsWhatAModelTakesOfTheBudget) {
    // Room for both files many times over, but each plan counts more than half the budget (as a
    // long context's KV cache would): only one stays loaded.
    const std::vector<std::string> paths = {server_models().tiny, server_models().tools};
    const uint64_t budget = 64 * std::filesystem::file_size(server_models().tiny);
    std::vector<Plan> plans;
    for (const std::string& path : paths) {
        auto file = read_gguf(path);
        ASSERT_TRUE(file.ok()) << file.error().message;
        auto info = load_model_info(std::move(*file));
        ASSERT_TRUE(info.ok()) << info.error().message;
        PlanOptions o;
        o.n_ctx = 1024;  // what the test server serves
        Budgets b;
        b.ram = budget;
        auto plan = make_plan(*info, HardwareProfile{}, b, o);
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        EXPECT_EQ(plan->mode, PlanMode::Resident);
        plan->memory.total = plan->memory.process() + budget / 2 + 1;  // the model's share
        plans.push_back(std::move(*plan));
    }
    TestServer srv(server::ServerOptions{}, paths, {}, budget, plans);
    const json req = {{"prompt", "x"}, {"stream", false}, {"options", {{"num_predict", 2}}}};
    json a = req, b = req;
    a["model"] = "tiny";
    b["model"] = "tools";
    ASSERT_EQ(srv.post("/api/generate", a)->status, 200);
    EXPECT_EQ(loaded_names(srv), std::vector<std::string>{"tiny:latest"});
    ASSERT_EQ(srv.post("/api/generate", b)->status, 200);
    EXPECT_EQ(loaded_names(srv), std::vector<std::string>{"tools:latest"});
}

TEST(ServerModels, KeepAliveEndsAndUnloads) {
    TestServer srv;
    ASSERT_EQ(srv.post("/api/generate", {{"model", "tiny"},
                                         {"prompt", "x"},
                                         {"stream", false},
                                         {"keep_alive", "200ms"},
                                         {"options", {{"num_predict", 2}}}})
                  ->status,
              200);
    json ps = json::parse(srv.get("/api/ps")->body);
    ASSERT_EQ(ps["models"].size(), 1u);
    EXPECT_NE(ps["models"][0]["expires_at"], "2318-01-01T00:00:00Z");
    // The worker unloads it when the keep-alive ends; give it ample time.
    for (int i = 0; i < 100 && !loaded_names(srv).empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(loaded_names(srv).empty());
    // keep_alive -1: never expires.
    srv.post("/api/generate", {{"model", "tiny"}, {"keep_alive", -1}});
    ps = json::parse(srv.get("/api/ps")->body);
    ASSERT_EQ(ps["models"].size(), 1u);
    EXPECT_EQ(ps["models"][0]["expires_at"], "2318-01-01T00:00:00Z");
}

// Requests on one reused connection are answered at once: without TCP_NODELAY each waited
// for the client's delayed ACK (about 40 ms), so ten took 400 ms or more.
TEST(ServerLimits, AReusedConnectionAnswersWithoutDelay) {
    TestServer srv;
    httplib::Client client("127.0.0.1", srv.port());
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);
    ASSERT_EQ(client.Get("/api/version")->status, 200);  // the connection is open now
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) {
        auto r = client.Get("/api/version");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 300.0) << "10 requests on a reused connection";
}

// A JSON body labelled form-encoded (curl -d @file) is read as JSON up to the real limit, not
// refused past the HTTP library's 8 KiB for forms.
TEST(ServerLimits, FormLabelledJsonBodiesAreReadAsJson) {
    TestServer srv;
    httplib::Client client("127.0.0.1", srv.port());
    std::string padding(20000, ' ');
    const std::string body = "{\"model\": \"tiny\"," + padding + "\"verbose\": false}";
    auto r = client.Post("/api/show", body, "application/x-www-form-urlencoded");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_TRUE(json::parse(r->body).contains("model_info")) << r->body;
}

TEST(ServerLimits, OversizedBodyGets413) {
    server::ServerOptions o;
    o.max_body_bytes = 1024;
    TestServer srv(o);
    auto r = srv.post_raw("/api/chat", std::string(4096, ' '));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    EXPECT_TRUE(json::parse(r->body)["error"].is_string());
    // Still serving.
    EXPECT_EQ(srv.get("/api/version")->status, 200);
}

}  // namespace
}  // namespace strata::test
