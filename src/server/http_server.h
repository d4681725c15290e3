// `strata serve`: Ollama's HTTP API (and OpenAI's /v1) over the models of a ModelCatalog.
//
// HTTP threads read and check requests, answer the ones that need no model at once, and queue
// the others on the WorkQueue; the worker runs them one at a time and streams the answer back
// through a ResponseChannel. Ollama's transport rules are kept: JSON bodies whatever the
// Content-Type, NDJSON or SSE streams flushed per event, errors as {"error": ...} with a real
// status until the first byte of a stream, and a last error line after it. See
// docs/ollama-api.md for the contract.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/model_host.h"
#include "server/api_request.h"
#include "server/generation_job.h"
#include "server/model_catalog.h"
#include "server/response_channel.h"
#include "server/work_queue.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace strata::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 11434;  // 0: any free port
    // Browser origins allowed besides localhost, 127.0.0.1, 0.0.0.0 and app/file/tauri/vscode
    // ones; "*" allows every origin.
    std::vector<std::string> cors_origins;
    size_t max_queue = 64;              // requests waiting or running; more get 503
    size_t max_body_bytes = 32u << 20;  // larger bodies get 413
    int read_timeout_seconds = 30;      // a client that stops sending its request
    int write_timeout_seconds = 300;    // a client that stops reading its answer
    KeepAlive default_keep_alive = std::chrono::minutes(5);
    std::string ollama_version = "0.12.0";
    int test_fail_after_pieces = -1;  // tests: break every generation after this many pieces
    bool log_requests = false;        // a line on stderr per generation
};

// What the HTTP side holds besides the models, for the plan's baseline: a stack and thread state
// per HTTP thread (max_queue + 8 of them), and two requests of the largest body being read and
// parsed at once. More large requests arriving together can take more; --max-queue and the
// body limit bound it.
uint64_t server_memory_bytes(const ServerOptions& options);

// Which error shape an endpoint answers with.
enum class ApiFlavor { Ollama, OpenAI };

// Counters since start, for /metrics, tests and logs.
struct ServerStats {
    uint64_t generations = 0;           // generation requests run to their end
    uint64_t prompt_tokens = 0;         // prompt tokens they took in (cached ones included)
    uint64_t generated_tokens = 0;      // tokens sampled by them
    uint64_t client_gone = 0;           // answers cut short because the client left
    double last_tokens_per_second = 0;  // the last generation's decode speed
    // Answered requests by (endpoint, status); paths outside the API count as "other".
    std::map<std::pair<std::string, int>, uint64_t> requests;
    HostTotals host;  // as of the last generation's end
};

class HttpServer {
  public:
    HttpServer(ModelCatalog catalog, ModelLoadOptions load_options, uint64_t ram_budget,
               ServerOptions options);
    ~HttpServer();

    // Binds the address; returns the port (useful with port 0).
    Result<int> bind();
    // Serves until stop(). Blocks.
    void listen();
    void stop();

    const ModelCatalog& catalog() const { return catalog_; }
    ServerStats stats() const;

  private:
    void install_routes();
    void install_ollama_routes();
    void install_openai_routes();

    // Queues `work` (run on the worker, pushing chunks into the channel) and answers with
    // what it produced: streamed as `content_type` when `stream`, else as one JSON body.
    // `tag`: the requests it may run beside (generation_tag), by default none.
    void respond_queued(httplib::Response& res, ApiFlavor flavor, bool stream,
                        const std::string& content_type, std::function<void(ResponseChannel&)> work,
                        JobTag tag = {});
    // A generation runs beside the other generations and embeddings on its model, up to its
    // sequence count; a request that only loads or unloads the model runs alone.
    static JobTag generation_tag(const GenerationJob& job);
    // An embedding runs beside them too: it takes a sequence like a generation.
    static JobTag embedding_tag(const GenerationJob& job);
    void send_error(httplib::Response& res, ApiFlavor flavor, int status,
                    const std::string& message) const;
    const ServedModelInfo& require_model(const json& body, ApiFlavor flavor,
                                         const char* key = "model") const;

    // run_generation, counted in the stats.
    GenerationOutcome generate(GenerationJob& job, ResponseChannel& ch, const DeltaSink& sink);
    // The model (400 when missing, 404 when unknown) and the fields every generation and
    // embedding request has (keep_alive, truncate).
    GenerationJob base_job(const json& body, ApiFlavor flavor) const;

    // Prometheus's text format: the stats, the queue and the models.
    std::string metrics_text() const;

    ModelCatalog catalog_;
    ServerOptions options_;
    ModelHost host_;
    std::unique_ptr<WorkQueue> queue_;
    std::unique_ptr<httplib::Server> http_;
    std::atomic<uint64_t> next_id_{1};
    std::atomic<int> active_{0};  // generations running
    mutable std::mutex stats_mu_;
    ServerStats stats_;
};

}  // namespace strata::server
