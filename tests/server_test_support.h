// A `strata serve` in the test process: small synthetic models written to a temporary
// directory, an HttpServer on a free loopback port, and a client for it.
#pragma once

#include <gtest/gtest.h>

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "test_support.h"

namespace strata::test {

using json = nlohmann::ordered_json;

// The models every server test shares, written once per test binary:
//   tiny.gguf   llama, 2 layers, built-in vocabulary and its ChatML template
//   tools.gguf  the same weights with Qwen2.5's chat template (tools, Hermes calls)
struct ServerModels {
    std::string tiny, tools;
};
const ServerModels& server_models();

class TestServer {
  public:
    // ram_budget 0: no limit on the models loaded together. `plans`, when given, are the models'
    // placement plans in order, as strata serve makes them; without, every model loads whole.
    explicit TestServer(server::ServerOptions options = {}, std::vector<std::string> paths = {},
                        std::vector<std::string> aliases = {}, uint64_t ram_budget = 0,
                        std::vector<Plan> plans = {});
    ~TestServer();
    TestServer(const TestServer&) = delete;
    TestServer& operator=(const TestServer&) = delete;

    int port() const { return port_; }
    httplib::Client client() const;
    server::HttpServer& server() { return *server_; }

    // POSTs JSON (or raw text) and returns the response; fails the test when there is none.
    httplib::Result post(const std::string& path, const json& body) const;
    httplib::Result post_raw(const std::string& path, const std::string& body,
                             const std::string& content_type = "application/json") const;
    httplib::Result get(const std::string& path) const;

  private:
    std::unique_ptr<server::HttpServer> server_;
    std::thread thread_;
    int port_ = 0;
};

// A test suite whose tests share one TestServer, started before the first and stopped after the
// last (the model loads once per suite): `class MySuite : public SharedServerTest<MySuite> {};`.
template <class Suite>
class SharedServerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { srv_ = new TestServer(); }
    static void TearDownTestSuite() {
        delete srv_;
        srv_ = nullptr;
    }
    static inline TestServer* srv_ = nullptr;
};

// A non-streamed /api/generate of the "tiny" model with sampling that depends on the seed
// (temperature 0.8, top_k 40, top_p 0.9), and the `strata run` flags that sample the same.
json sampled_request(int seed, const std::string& prompt, int n);
std::string sampled_run_flags(int seed, const std::string& prompt, int n);

// The lines of an NDJSON body, each parsed; a blank line or bad JSON fails the test.
std::vector<json> ndjson_lines(const std::string& body);
// The JSON payloads of an SSE body ("data: ..." events), with "[DONE]" as a string.
std::vector<json> sse_events(const std::string& body);
// True when `s` is valid UTF-8.
bool valid_utf8(const std::string& s);

}  // namespace strata::test
