#include "server_test_support.h"

#include <gtest/gtest.h>

#include "synth/generator.h"
#include "synth/synth_config.h"

namespace strata::test {

namespace {

std::string write_model(const TempDir& dir, const std::string& name, const std::string& tmpl) {
    SynthConfig c;
    c.hparams = *synth_preset("tiny");
    c.weights = TensorType::Q8_0;
    c.seed = 7;
    c.threads = 2;
    c.chat_template = tmpl;
    const std::string path = dir.file(name);
    auto r = write_synthetic_model(c, path, /*overwrite=*/true);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return path;
}

}  // namespace

const ServerModels& server_models() {
    static TempDir dir;
    static const ServerModels models = [] {
        ServerModels m;
        m.tiny = write_model(dir, "tiny.gguf", "");
        std::string qwen;
        if (have_testdata()) {
            qwen = read_text_file(testdata_dir() / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja");
        }
        m.tools = write_model(dir, "tools.gguf", qwen);
        return m;
    }();
    return models;
}

TestServer::TestServer(server::ServerOptions options, std::vector<std::string> paths,
                       std::vector<std::string> aliases, uint64_t ram_budget,
                       std::vector<Plan> plans) {
    if (paths.empty()) paths = {server_models().tiny, server_models().tools};
    auto catalog = server::ModelCatalog::open(paths, aliases, 1024);
    EXPECT_TRUE(catalog.ok()) << (catalog.ok() ? "" : catalog.error().message);
    for (size_t i = 0; i < plans.size(); ++i) catalog->set_plan(i, std::move(plans[i]));
    options.host = "127.0.0.1";
    options.port = 0;
    ModelLoadOptions load;
    load.engine.threads = 2;
    server_ = std::make_unique<server::HttpServer>(std::move(*catalog), load, ram_budget, options);
    auto port = server_->bind();
    EXPECT_TRUE(port.ok());
    port_ = port.ok() ? *port : 0;
    thread_ = std::thread([this] { server_->listen(); });
}

TestServer::~TestServer() {
    server_->stop();
    thread_.join();
}

httplib::Client TestServer::client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
}

httplib::Result TestServer::post(const std::string& path, const json& body) const {
    return post_raw(path, body.dump());
}

httplib::Result TestServer::post_raw(const std::string& path, const std::string& body,
                                     const std::string& content_type) const {
    auto c = client();
    auto r = c.Post(path, body, content_type);
    EXPECT_TRUE(r) << "no response to POST " << path;
    return r;
}

httplib::Result TestServer::get(const std::string& path) const {
    auto c = client();
    auto r = c.Get(path);
    EXPECT_TRUE(r) << "no response to GET " << path;
    return r;
}

std::vector<json> ndjson_lines(const std::string& body) {
    std::vector<json> out;
    size_t at = 0;
    while (at < body.size()) {
        size_t nl = body.find('\n', at);
        EXPECT_NE(nl, std::string::npos) << "the last line has no newline";
        if (nl == std::string::npos) nl = body.size();
        const std::string line = body.substr(at, nl - at);
        EXPECT_FALSE(line.empty()) << "blank line in an NDJSON stream";
        try {
            out.push_back(json::parse(line));
        } catch (const std::exception& e) {
            ADD_FAILURE() << "bad NDJSON line: " << line;
        }
        at = nl + 1;
    }
    return out;
}

std::vector<json> sse_events(const std::string& body) {
    std::vector<json> out;
    size_t at = 0;
    while (at < body.size()) {
        const size_t end = body.find("\n\n", at);
        EXPECT_NE(end, std::string::npos) << "an SSE event does not end with a blank line";
        if (end == std::string::npos) break;
        const std::string ev = body.substr(at, end - at);
        EXPECT_TRUE(ev.starts_with("data: ")) << ev;
        const std::string data = ev.substr(6);
        if (data == "[DONE]") {
            out.push_back("[DONE]");
        } else {
            try {
                out.push_back(json::parse(data));
            } catch (const std::exception&) {
                ADD_FAILURE() << "bad SSE data: " << data;
            }
        }
        at = end + 2;
    }
    return out;
}

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = uint8_t(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k) {
            if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}

json sampled_request(int seed, const std::string& prompt, int n) {
    return {{"model", "tiny"},
            {"prompt", prompt},
            {"stream", false},
            {"options",
             {{"seed", seed},
              {"temperature", 0.8},
              {"top_k", 40},
              {"top_p", 0.9},
              {"min_p", 0},
              {"repeat_penalty", 1},
              {"num_predict", n}}}};
}

std::string sampled_run_flags(int seed, const std::string& prompt, int n) {
    return "--prompt " + shell_quote(prompt) + " --seed " + std::to_string(seed) +
           " --temperature 0.8 --top-k 40 --top-p 0.9 --min-p 0 --repeat-penalty 1 -n " +
           std::to_string(n) + " --json --threads 2";
}

}  // namespace strata::test
