#include "server/http_server.h"

#include <httplib.h>

#include "server/chat_page.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace strata::server {

namespace {

// Every path served, with its methods: a known path asked with another method is a 405, an
// unknown one a 404, both with Go's plain-text bodies.
const std::map<std::string, std::set<std::string>>& known_paths() {
    static const std::map<std::string, std::set<std::string>> paths = {
        {"/", {"GET", "HEAD"}},         {"/api/version", {"GET", "HEAD"}},
        {"/api/tags", {"GET", "HEAD"}}, {"/api/ps", {"GET"}},
        {"/api/show", {"POST"}},        {"/api/generate", {"POST"}},
        {"/api/chat", {"POST"}},        {"/api/embed", {"POST"}},
        {"/api/embeddings", {"POST"}},  {"/api/pull", {"POST"}},
        {"/api/push", {"POST"}},        {"/api/create", {"POST"}},
        {"/api/copy", {"POST"}},        {"/api/delete", {"DELETE"}},
        {"/api/status", {"GET"}},       {"/v1/chat/completions", {"POST"}},
        {"/v1/completions", {"POST"}},  {"/v1/embeddings", {"POST"}},
        {"/v1/models", {"GET"}},        {"/metrics", {"GET"}},
        {"/ui", {"GET", "HEAD"}},       {"/ui/", {"GET", "HEAD"}},
    };
    return paths;
}

bool known_prefix_path(const std::string& path, std::string& method_group) {
    if (path.starts_with("/v1/models/")) {
        method_group = "GET";
        return true;
    }
    if (path.starts_with("/api/blobs/")) {
        method_group = "HEAD POST";
        return true;
    }
    return false;
}

bool origin_allowed(const std::string& origin, const std::vector<std::string>& extra) {
    for (const std::string& o : extra) {
        if (o == "*" || o == origin) return true;
        // "http://example.com:*" style: any port.
        if (o.ends_with(":*") && origin.starts_with(o.substr(0, o.size() - 1))) return true;
    }
    for (std::string_view scheme :
         {"app://", "file://", "tauri://", "vscode-webview://", "vscode-file://"}) {
        if (origin.starts_with(scheme)) return true;
    }
    for (std::string_view scheme : {"http://", "https://"}) {
        if (!origin.starts_with(scheme)) continue;
        std::string host = origin.substr(scheme.size());
        if (auto colon = host.rfind(':');
            colon != std::string::npos && host.find(']') == std::string::npos) {
            host.resize(colon);
        } else if (auto close = host.find(']'); close != std::string::npos) {
            host.resize(close + 1);
        }
        if (host == "localhost" || host == "127.0.0.1" || host == "0.0.0.0" || host == "[::1]") {
            return true;
        }
    }
    return false;
}

const char* openai_error_type(int status) {
    if (status == 400) return "invalid_request_error";
    if (status == 404) return "not_found_error";
    return "api_error";
}

// One HTTP thread per request that may be waiting in the queue, plus a few for the requests that
// need no model, so that a full queue is answered with 503 and never by connections piling up
// unanswered.
size_t http_threads(const ServerOptions& options) {
    return options.max_queue + 8;
}

}  // namespace

uint64_t server_memory_bytes(const ServerOptions& options) {
    constexpr uint64_t kThreadBytes = 256u << 10;
    return http_threads(options) * kThreadBytes + 2 * uint64_t(options.max_body_bytes);
}

HttpServer::HttpServer(ModelCatalog catalog, ModelLoadOptions load_options, uint64_t ram_budget,
                       ServerOptions options)
    : catalog_(std::move(catalog)),
      options_(std::move(options)),
      host_(std::move(load_options), ram_budget),
      http_(std::make_unique<httplib::Server>()) {
    size_t widest = 1;  // the most generations that can run at once
    for (const ServedModelInfo& m : catalog_.models()) {
        if (m.plan) widest = std::max<size_t>(widest, m.plan->n_seq);
    }
    queue_ = std::make_unique<WorkQueue>(
        options_.max_queue, [this] { return host_.expire(); }, widest);
    const size_t threads = http_threads(options_);
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_->set_payload_max_length(options_.max_body_bytes);
    http_->set_read_timeout(options_.read_timeout_seconds, 0);
    http_->set_write_timeout(options_.write_timeout_seconds, 0);
    http_->set_keep_alive_max_count(100);
    // A response goes out in more than one write (headers, then the body): with Nagle's
    // algorithm the second waits for the client's delayed ACK, some 40 ms on every request of a
    // reused connection.
    http_->set_tcp_nodelay(true);
    install_routes();
}

HttpServer::~HttpServer() {
    stop();
    queue_.reset();  // finishes what is queued before the models go
}

Result<int> HttpServer::bind() {
    if (options_.port == 0) {
        const int port = http_->bind_to_any_port(options_.host);
        if (port <= 0) return err("cannot listen on ", options_.host);
        options_.port = port;
        return port;
    }
    if (!http_->bind_to_port(options_.host, options_.port)) {
        return err("cannot listen on ", options_.host, ":", std::to_string(options_.port),
                   " (in use, or not an address of this machine)");
    }
    return options_.port;
}

void HttpServer::listen() {
    http_->listen_after_bind();
}

void HttpServer::stop() {
    if (http_) http_->stop();
}

std::string HttpServer::metrics_text() const {
    ServerStats st;
    {
        std::lock_guard lock(stats_mu_);
        st = stats_;
    }
    std::string out;
    const auto metric = [&](const char* name, const char* type, const char* help) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    const auto value = [&](const std::string& series, double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        out += series + " " + buf + "\n";
    };
    metric("strata_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (const auto& [key, n] : st.requests) {
        value("strata_requests_total{endpoint=\"" + key.first + "\",status=\"" +
                  std::to_string(key.second) + "\"}",
              double(n));
    }
    metric("strata_queue_depth", "gauge", "Requests waiting or running.");
    value("strata_queue_depth", double(queue_->pending()));
    metric("strata_active_sequences", "gauge", "Generations running now.");
    value("strata_active_sequences", double(active_.load()));
    metric("strata_generations_total", "counter", "Generation requests run to their end.");
    value("strata_generations_total", double(st.generations));
    metric("strata_prompt_tokens_total", "counter", "Prompt tokens taken in by generations.");
    value("strata_prompt_tokens_total", double(st.prompt_tokens));
    metric("strata_generated_tokens_total", "counter", "Tokens generated.");
    value("strata_generated_tokens_total", double(st.generated_tokens));
    metric("strata_batch_steps_total", "counter",
           "Forward passes of models decoding several sequences together.");
    value("strata_batch_steps_total", double(st.host.batching.steps));
    metric("strata_batch_sequences_total", "counter",
           "Sequences in those passes, summed (over the steps: the mean batch).");
    value("strata_batch_sequences_total", double(st.host.batching.sequence_steps));
    metric("strata_batch_widest", "gauge", "Most sequences decoded in one pass.");
    value("strata_batch_widest", double(st.host.batching.widest_step));
    metric("strata_tokens_per_second", "gauge", "Decode speed of the last generation.");
    value("strata_tokens_per_second", st.last_tokens_per_second);
    const auto [loads, unloads] = host_.loads_and_unloads();
    metric("strata_model_loads_total", "counter", "Models loaded.");
    value("strata_model_loads_total", double(loads));
    metric("strata_model_unloads_total", "counter", "Models unloaded.");
    value("strata_model_unloads_total", double(unloads));
    metric("strata_models_loaded", "gauge", "Models in memory now.");
    value("strata_models_loaded", double(host_.loaded_models().size()));
    // The stores count as they run on the worker: their figures as of the last generation's end.
    metric("strata_disk_read_bytes_total", "counter",
           "Weight bytes read from the model files, as of the last generation's end.");
    value("strata_disk_read_bytes_total", double(st.host.bytes_from_disk));
    // The expert hierarchy's levels: RAM (the expert caches of expert-stream models) and the GPU
    // level in front of RAM beside a GPU.
    const ExpertStreamStats& ram = st.host.experts;
    const VramExpertStats& gpu = st.host.gpu_experts;
    metric("strata_expert_cache_requests_total", "counter",
           "Experts asked of each level of the expert hierarchies.");
    value("strata_expert_cache_requests_total{level=\"ram\"}", double(ram.requests));
    value("strata_expert_cache_requests_total{level=\"gpu\"}", double(gpu.requests));
    metric("strata_expert_cache_hits_total", "counter", "Of them, found ready in the level.");
    value("strata_expert_cache_hits_total{level=\"ram\"}", double(ram.hits));
    value("strata_expert_cache_hits_total{level=\"gpu\"}", double(gpu.hits));
    metric("strata_expert_cache_hit_ratio", "gauge", "Hits over requests since start.");
    const auto ratio = [](uint64_t hits, uint64_t requests) {
        return requests ? double(hits) / double(requests) : 0.0;
    };
    value("strata_expert_cache_hit_ratio{level=\"ram\"}", ratio(ram.hits, ram.requests));
    value("strata_expert_cache_hit_ratio{level=\"gpu\"}", ratio(gpu.hits, gpu.requests));
    metric("strata_expert_cache_load_bytes_total", "counter",
           "Bytes copied into each level: read from disk into RAM, copied from RAM to the GPU.");
    value("strata_expert_cache_load_bytes_total{level=\"ram\"}", double(ram.bytes_from_disk));
    value("strata_expert_cache_load_bytes_total{level=\"gpu\"}",
          double(gpu.load_bytes + gpu.prefetch_bytes));
    return out;
}

ServerStats HttpServer::stats() const {
    std::lock_guard lock(stats_mu_);
    return stats_;
}

GenerationOutcome HttpServer::generate(GenerationJob& job, ResponseChannel& ch,
                                       const DeltaSink& sink) {
    ++active_;
    GenerationOutcome o;
    try {
        o = run_generation(host_, job, sink);
    } catch (...) {
        --active_;
        throw;
    }
    --active_;
    if (options_.log_requests && o.load_only_reason.empty()) {
        const GenerateTimings& t = o.result.timings;
        std::fprintf(
            stderr,
            "strata: %s: prompt %u tokens (%u cached) at %.1f tok/s, %u generated at "
            "%.2f tok/s, %s%s, %.2f s\n",
            job.model->name.c_str(), t.prompt_tokens, t.cached_tokens,
            t.prompt_seconds > 0 ? t.prompt_tokens / t.prompt_seconds : 0.0, t.generated_tokens,
            t.generate_seconds > 0 ? t.generated_tokens / t.generate_seconds : 0.0,
            o.result.done_reason.c_str(), ch.cancelled() ? " (client gone)" : "", o.total_seconds);
    }
    const HostTotals host = host_.totals();
    std::lock_guard lock(stats_mu_);
    ++stats_.generations;
    stats_.prompt_tokens += o.result.timings.prompt_tokens;
    stats_.generated_tokens += o.result.generated_ids.size();
    const GenerateTimings& t = o.result.timings;
    if (t.generate_seconds > 0)
        stats_.last_tokens_per_second = t.generated_tokens / t.generate_seconds;
    if (ch.cancelled()) ++stats_.client_gone;
    stats_.host = host;
    return o;
}

void HttpServer::send_error(httplib::Response& res, ApiFlavor flavor, int status,
                            const std::string& message) const {
    res.status = status;
    json body;
    if (flavor == ApiFlavor::OpenAI) {
        body = {{"error",
                 {{"message", message},
                  {"type", openai_error_type(status)},
                  {"param", nullptr},
                  {"code", nullptr}}}};
    } else {
        body = {{"error", message}};
    }
    res.set_content(body.dump(), "application/json; charset=utf-8");
}

const ServedModelInfo& HttpServer::require_model(const json& body, ApiFlavor flavor,
                                                 const char* key) const {
    std::string name = string_field(body, key).value_or("");
    if (name.empty() && flavor == ApiFlavor::Ollama) name = string_field(body, "name").value_or("");
    if (name.find_first_not_of(" \t") == std::string::npos) {
        throw ApiError(400, "model is required");
    }
    const ServedModelInfo* m = catalog_.find(name);
    if (!m) throw ApiError(404, "model '" + name + "' not found");
    return *m;
}

JobTag HttpServer::generation_tag(const GenerationJob& job) {
    const bool load_only =
        job.chat ? job.messages.empty() : job.prompt.empty() && job.suffix.empty();
    if (load_only) return {};
    return embedding_tag(job);
}

JobTag HttpServer::embedding_tag(const GenerationJob& job) {
    if (!job.model->plan) return {};
    return {job.model, job.model->plan->n_seq};
}

void HttpServer::respond_queued(httplib::Response& res, ApiFlavor flavor, bool stream,
                                const std::string& content_type,
                                std::function<void(ResponseChannel&)> work, JobTag tag) {
    auto channel = std::make_shared<ResponseChannel>();
    channel->set_before_last([this] { queue_->release_slot(); });
    const bool queued = queue_->submit(
        [this, channel, work = std::move(work)] {
            int status = 0;
            std::string message;
            try {
                work(*channel);
            } catch (const ApiError& e) {
                status = e.status;
                message = e.what();
            } catch (const std::exception& e) {
                status = 500;
                message = e.what();
            }
            queue_->release_slot();
            if (status) {
                channel->fail(status, message);
            } else {
                channel->finish();
            }
        },
        tag);
    if (!queued) {
        send_error(res, flavor, 503,
                   "server busy, please try again.  maximum pending requests exceeded (" +
                       std::to_string(queue_->max_pending()) + ")");
        return;
    }
    if (!stream) {
        channel->wait_ended();
        if (int status = channel->failure_status()) {
            send_error(res, flavor, status, channel->failure_message());
            return;
        }
        std::deque<std::string> chunks;
        std::string body;
        while (channel->take(chunks)) {
            for (auto& c : chunks) body += c;
            chunks.clear();
        }
        res.status = 200;
        res.set_content(body, "application/json; charset=utf-8");
        return;
    }
    channel->wait_started();
    if (!channel->started() && channel->failure_status()) {
        send_error(res, flavor, channel->failure_status(), channel->failure_message());
        return;
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        content_type,
        [channel, flavor](size_t, httplib::DataSink& sink) {
            std::deque<std::string> chunks;
            while (channel->take(chunks)) {
                for (const std::string& c : chunks) {
                    if (!sink.is_writable() || !sink.write(c.data(), c.size())) {
                        channel->cancel();  // the client went away: stop generating
                        return false;
                    }
                }
                chunks.clear();
            }
            if (channel->failure_status()) {
                // The stream began, so the status is 200: the failure is the last line, and
                // no done:true follows.
                const std::string msg = channel->failure_message();
                std::string line = flavor == ApiFlavor::OpenAI
                                       ? "data: " +
                                             json({{"error",
                                                    {{"message", msg},
                                                     {"type", "api_error"},
                                                     {"param", nullptr},
                                                     {"code", nullptr}}}})
                                                 .dump() +
                                             "\n\n"
                                       : json({{"error", msg}}).dump() + "\n";
                sink.write(line.data(), line.size());
            }
            sink.done();
            return true;
        },
        [channel](bool) { channel->cancel(); });
}

void HttpServer::install_routes() {
    http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        const std::string origin = req.get_header_value("Origin");
        if (!origin.empty() && origin_allowed(origin, options_.cors_origins)) {
            res.set_header("Access-Control-Allow-Origin", origin);
            res.set_header("Vary", "Origin");
        }
        if (req.method == "OPTIONS") {
            res.set_header("Access-Control-Allow-Methods",
                           "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS");
            res.set_header("Access-Control-Allow-Headers",
                           "Authorization, Content-Type, User-Agent, Accept, X-Requested-With, "
                           "OpenAI-Beta, x-stainless-arch, x-stainless-async, "
                           "x-stainless-custom-poll-interval, x-stainless-helper-method, "
                           "x-stainless-lang, x-stainless-os, x-stainless-package-version, "
                           "x-stainless-poll-helper, x-stainless-retry-count, x-stainless-runtime, "
                           "x-stainless-runtime-version, x-stainless-timeout");
            res.set_header("Access-Control-Max-Age", "43200");
            res.status = 204;
            return httplib::Server::HandlerResponse::Handled;
        }
        const auto& paths = known_paths();
        auto it = paths.find(req.path);
        std::string group;
        bool known = it != paths.end() || known_prefix_path(req.path, group);
        if (!known) {
            res.status = 404;
            res.set_content("404 page not found", "text/plain; charset=utf-8");
            return httplib::Server::HandlerResponse::Handled;
        }
        const bool allowed = it != paths.end() ? it->second.count(req.method) > 0
                                               : group.find(req.method) != std::string::npos;
        if (!allowed) {
            res.status = 405;
            res.set_content("405 method not allowed", "text/plain; charset=utf-8");
            return httplib::Server::HandlerResponse::Handled;
        }
        // Every body here is JSON, whatever its Content-Type says: `curl -d @file` labels it
        // form-encoded, and the HTTP library caps form-encoded bodies at 8 KiB (and parses them
        // as a query). The request is still being read (this handler runs before its body), so
        // the label is corrected in place and the body is read up to the server's own limit.
        if (req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
            auto& headers = const_cast<httplib::Request&>(req).headers;
            headers.erase("Content-Type");
            headers.emplace("Content-Type", "application/json");
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    // Every answered request, by endpoint and status, for /metrics.
    http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        const std::string endpoint = known_paths().count(req.path) ? req.path : "other";
        std::lock_guard lock(stats_mu_);
        ++stats_.requests[{endpoint, res.status}];
    });
    http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    });
    // The chat page. "/" stays Ollama's health answer, which clients probe. The policy keeps
    // the page to what it is: its own inline style and script, talking only to this server.
    http_->Get(std::string(kChatPagePath), [](const httplib::Request&, httplib::Response& res) {
        const std::string_view page = chat_page_html();
        res.set_header("Content-Security-Policy",
                       "default-src 'none'; script-src 'unsafe-inline'; "
                       "style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; "
                       "form-action 'none'; frame-ancestors 'none'");
        res.set_header("Cache-Control", "no-cache");
        res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
    http_->Get("/ui", [](const httplib::Request&, httplib::Response& res) {
        res.set_redirect(std::string(kChatPagePath), 301);
    });
    // Statuses httplib sets itself (413 for a body over the limit, 400 for a request it
    // cannot read) get a JSON body like every other error.
    http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.status < 400) return;
        const ApiFlavor flavor =
            req.path.starts_with("/v1/") ? ApiFlavor::OpenAI : ApiFlavor::Ollama;
        std::string message =
            "the request could not be read (HTTP " + std::to_string(res.status) + ")";
        if (res.status == 413) {
            message = "request body is larger than the limit of " +
                      std::to_string(options_.max_body_bytes) + " bytes";
        }
        send_error(res, flavor, res.status, message);
    });
    http_->set_exception_handler(
        [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            const ApiFlavor flavor =
                req.path.starts_with("/v1/") ? ApiFlavor::OpenAI : ApiFlavor::Ollama;
            try {
                std::rethrow_exception(ep);
            } catch (const ApiError& e) {
                send_error(res, flavor, e.status, e.what());
            } catch (const std::exception& e) {
                send_error(res, flavor, 500, e.what());
            } catch (...) {
                send_error(res, flavor, 500, "unknown error");
            }
        });
    install_ollama_routes();
    install_openai_routes();
}

}  // namespace strata::server
