// Ollama's native endpoints (§2–§10 of docs/ollama-api.md).
#include <httplib.h>

#include "server/http_server.h"
#include "server/ollama_format.h"
#include "session/embedding.h"
#include "session/prompt.h"

namespace strata::server {

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";
constexpr const char* kNdjson = "application/x-ndjson";

std::string line(const json& j) {
    return to_text(j) + "\n";
}

// The embedding inputs: a string or an array of strings ("" and [] give none).
std::vector<std::string> embed_inputs(const json& body) {
    const json* in = field(body, "input");
    std::vector<std::string> out;
    if (!in) return out;
    if (in->is_string()) {
        if (!in->get<std::string>().empty()) out.push_back(in->get<std::string>());
        return out;
    }
    if (!in->is_array()) throw ApiError(400, "invalid input type");
    for (const json& s : *in) {
        if (!s.is_string()) throw ApiError(400, "invalid input type");
        out.push_back(s.get<std::string>());
    }
    return out;
}

// The settings /api/generate and /api/chat share, then Ollama's capability checks.
void read_native_settings(const json& body, GenerationJob& job) {
    apply_options(object_field(body, "options"), job.options);
    job.format = parse_format(body);
    job.think = parse_think(body);
    job.top_logprobs = parse_top_logprobs(body);
    check_capabilities(job);
}

}  // namespace

GenerationJob HttpServer::base_job(const json& body, ApiFlavor flavor) const {
    GenerationJob job;
    job.model = &require_model(body, flavor);
    job.requested_name = string_field(body, "model").value_or("");
    if (job.requested_name.empty() && flavor == ApiFlavor::Ollama) {
        job.requested_name = string_field(body, "name").value_or("");
    }
    job.keep_alive = parse_keep_alive(body, options_.default_keep_alive);
    job.truncate = bool_field(body, "truncate").value_or(true);
    job.fail_after_pieces = options_.test_fail_after_pieces;
    if (flavor == ApiFlavor::OpenAI) {
        // One choice per request: a client asking for more is told, not answered with one.
        if (const json* n = field(body, "n"); n && !n->is_null()) {
            if (!n->is_number_integer() || n->get<int64_t>() < 1) {
                throw ApiError(400, "n must be a positive integer");
            }
            if (n->get<int64_t>() > 1) {
                throw ApiError(400, "n > 1 is not supported: one choice per request (send " +
                                        std::to_string(n->get<int64_t>()) + " requests)");
            }
        }
    }
    return job;
}

void HttpServer::install_ollama_routes() {
    httplib::Server& s = *http_;
    auto health = [](const httplib::Request&, httplib::Response& res) {
        res.set_content("Ollama is running", "text/plain; charset=utf-8");
    };
    s.Get("/", health);
    s.Get("/api/version", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(json({{"version", options_.ollama_version}}).dump(), kJson);
    });
    s.Get("/api/tags", [this](const httplib::Request&, httplib::Response& res) {
        json models = json::array();
        for (const auto& m : catalog_.models()) models.push_back(tags_entry(m));
        res.set_content(to_text(json({{"models", models}})), kJson);
    });
    s.Get("/api/ps", [this](const httplib::Request&, httplib::Response& res) {
        json models = json::array();
        for (const auto& l : host_.loaded_models()) {
            if (const ServedModelInfo* m = catalog_.entry(l.served))
                models.push_back(ps_entry(*m, l));
        }
        res.set_content(to_text(json({{"models", models}})), kJson);
    });
    s.Get("/api/status", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(json({{"cloud", {{"disabled", true}, {"source", "none"}}}}).dump(), kJson);
    });
    s.Post("/api/show", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const ServedModelInfo& m = require_model(body, ApiFlavor::Ollama);
        res.set_content(to_text(show_response(m, bool_field(body, "verbose").value_or(false))),
                        kJson);
    });

    s.Post("/api/generate", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        GenerationJob job = base_job(body, ApiFlavor::Ollama);
        const std::string name = job.requested_name;
        job.prompt = string_field(body, "prompt").value_or("");
        job.suffix = string_field(body, "suffix").value_or("");
        job.system = string_field(body, "system").value_or("");
        job.template_override = string_field(body, "template").value_or("");
        job.raw = bool_field(body, "raw").value_or(false);
        if (const json* ctx = array_field(body, "context")) {
            for (const json& t : *ctx) {
                if (!t.is_number_integer())
                    throw ApiError(400, "json: context must hold token ids");
                job.context.push_back(t.get<int32_t>());
            }
        }
        if (const json* images = array_field(body, "images"); images && !images->empty()) {
            throw ApiError(400, "\"" + name + "\" does not support image input");
        }
        read_native_settings(body, job);
        const bool stream = bool_field(body, "stream").value_or(true);
        const bool raw = job.raw;
        const JobTag tag = generation_tag(job);
        respond_queued(
            res, ApiFlavor::Ollama, stream, kNdjson,
            [this, job = std::move(job), stream, raw](ResponseChannel& ch) mutable {
                std::string text, thinking;
                std::vector<TokenChoice> logprobs;
                const bool want_logprobs = job.top_logprobs >= 0;
                auto chunk = [&](json j) {
                    json out = {{"model", job.requested_name}, {"created_at", now_rfc3339()}};
                    for (auto& [k, v] : j.items()) out[k] = v;
                    return out;
                };
                GenerationOutcome o =
                    generate(job, ch, [&](const ReplyDelta& d, const std::vector<TokenChoice>& lp) {
                        if (!stream) {
                            text += d.content;
                            thinking += d.thinking;
                            logprobs.insert(logprobs.end(), lp.begin(), lp.end());
                            return !ch.cancelled();
                        }
                        json j = {{"response", d.content}};
                        if (!d.thinking.empty()) j["thinking"] = d.thinking;
                        j["done"] = false;
                        if (want_logprobs) j["logprobs"] = logprobs_json(lp);
                        return ch.push(line(chunk(std::move(j))));
                    });
                json fin = {{"response", stream ? "" : text}};
                if (!stream && !thinking.empty()) fin["thinking"] = thinking;
                fin["done"] = true;
                if (!o.load_only_reason.empty()) {
                    fin["done_reason"] = o.load_only_reason;
                    ch.push_last(stream ? line(chunk(fin)) : to_text(chunk(fin)));
                    return;
                }
                fin["done_reason"] = o.result.done_reason;
                if (!raw) fin["context"] = o.context;
                add_metrics(fin, o);
                logprobs.insert(logprobs.end(), o.logprobs_tail.begin(), o.logprobs_tail.end());
                if (want_logprobs && !logprobs.empty()) fin["logprobs"] = logprobs_json(logprobs);
                ch.push_last(stream ? line(chunk(fin)) : to_text(chunk(fin)));
            },
            tag);
    });

    s.Post("/api/chat", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        GenerationJob job = base_job(body, ApiFlavor::Ollama);
        const std::string name = job.requested_name;
        job.chat = true;
        if (const json* msgs = array_field(body, "messages")) job.messages = *msgs;
        for (const json& msg : job.messages) {
            if (!msg.is_object())
                throw ApiError(400, "json: cannot unmarshal a message that is not an object");
            if (const json* images = array_field(msg, "images"); images && !images->empty()) {
                throw ApiError(400, "\"" + name + "\" does not support image input");
            }
        }
        if (const json* tools = array_field(body, "tools")) job.tools = *tools;
        job.tool_choice = parse_tool_choice(body);
        read_native_settings(body, job);
        const bool stream = bool_field(body, "stream").value_or(true);
        const JobTag tag = generation_tag(job);
        respond_queued(
            res, ApiFlavor::Ollama, stream, kNdjson,
            [this, job = std::move(job), stream](ResponseChannel& ch) mutable {
                std::string text, thinking;
                json calls = json::array();
                std::vector<TokenChoice> logprobs;
                const bool want_logprobs = job.top_logprobs >= 0;
                auto chunk = [&](json message, bool done) {
                    json out = {{"model", job.requested_name}, {"created_at", now_rfc3339()}};
                    out["message"] = std::move(message);
                    out["done"] = done;
                    return out;
                };
                GenerationOutcome o =
                    generate(job, ch, [&](const ReplyDelta& d, const std::vector<TokenChoice>& lp) {
                        json call_json = json::array();
                        for (const ToolCall& c : d.tool_calls) {
                            call_json.push_back(
                                ollama_tool_call(c, calls.size() + call_json.size()));
                        }
                        if (!stream) {
                            text += d.content;
                            thinking += d.thinking;
                            for (auto& c : call_json) calls.push_back(c);
                            logprobs.insert(logprobs.end(), lp.begin(), lp.end());
                            return !ch.cancelled();
                        }
                        bool ok = true;
                        if (!d.thinking.empty() || !d.content.empty()) {
                            json msg = {{"role", "assistant"}, {"content", d.content}};
                            if (!d.thinking.empty()) msg["thinking"] = d.thinking;
                            json c = chunk(std::move(msg), false);
                            if (want_logprobs) c["logprobs"] = logprobs_json(lp);
                            ok = ch.push(line(c));
                        }
                        if (ok && !call_json.empty()) {
                            for (auto& c : call_json) calls.push_back(c);
                            json msg = {
                                {"role", "assistant"}, {"content", ""}, {"tool_calls", call_json}};
                            ok = ch.push(line(chunk(std::move(msg), false)));
                        }
                        return ok;
                    });
                json msg = {{"role", "assistant"}, {"content", stream ? "" : text}};
                if (!stream && !thinking.empty()) msg["thinking"] = thinking;
                if (!stream && !calls.empty()) msg["tool_calls"] = calls;
                json fin = chunk(std::move(msg), true);
                if (!o.load_only_reason.empty()) {
                    fin["done_reason"] = o.load_only_reason;
                } else {
                    fin["done_reason"] = o.result.done_reason;
                    add_metrics(fin, o);
                }
                logprobs.insert(logprobs.end(), o.logprobs_tail.begin(), o.logprobs_tail.end());
                if (want_logprobs && !logprobs.empty()) fin["logprobs"] = logprobs_json(logprobs);
                ch.push_last(stream ? line(fin) : to_text(fin));
            },
            tag);
    });

    auto embed = [this](const httplib::Request& req, httplib::Response& res, bool legacy) {
        const json body = parse_body(req.body);
        GenerationJob job = base_job(body, ApiFlavor::Ollama);
        const std::string name = job.requested_name;
        std::vector<std::string> inputs;
        if (legacy) {
            if (auto p = string_field(body, "prompt"); p && !p->empty()) inputs.push_back(*p);
        } else {
            inputs = embed_inputs(body);
        }
        const int64_t dims = int_field(body, "dimensions").value_or(0);
        if (dims < 0) throw ApiError(400, "dimensions must be positive");
        respond_queued(
            res, ApiFlavor::Ollama, false, kJson,
            [this, job, inputs, legacy, dims, name](ResponseChannel& ch) {
                auto vectors = run_embedding(host_, job, inputs, !legacy, size_t(dims));
                json out;
                if (legacy) {
                    out = {{"embedding",
                            vectors.vectors.empty() ? json::array() : json(vectors.vectors[0])}};
                } else {
                    out = {{"model", name}, {"embeddings", vectors.vectors}};
                    out["total_duration"] = int64_t(vectors.total_seconds * 1e9);
                    out["load_duration"] = int64_t(vectors.load_seconds * 1e9);
                    out["prompt_eval_count"] = vectors.tokens;
                }
                ch.push_last(to_text(out));
            },
            embedding_tag(job));
    };
    s.Post("/api/embed",
           [embed](const httplib::Request& q, httplib::Response& r) { embed(q, r, false); });
    s.Post("/api/embeddings",
           [embed](const httplib::Request& q, httplib::Response& r) { embed(q, r, true); });

    // Model management: strata serves the files it was given; it neither downloads nor
    // writes models.
    s.Post("/api/pull", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        std::string name = string_field(body, "model").value_or("");
        if (name.empty()) name = string_field(body, "name").value_or("");
        if (!catalog_.find(name)) {
            send_error(res, ApiFlavor::Ollama, 404, "pull model manifest: file does not exist");
            return;
        }
        if (bool_field(body, "stream").value_or(true)) {
            res.set_content(line({{"status", "pulling manifest"}}) + line({{"status", "success"}}),
                            kNdjson);
        } else {
            res.set_content(json({{"status", "success"}}).dump(), kJson);
        }
    });
    for (const char* path : {"/api/push", "/api/create", "/api/copy"}) {
        const std::string what = std::string(path).substr(5);
        s.Post(path, [this, what](const httplib::Request&, httplib::Response& res) {
            send_error(res, ApiFlavor::Ollama, 501,
                       what +
                           " is not supported by this server: it serves the GGUF files named "
                           "on its command line");
        });
    }
    s.Delete("/api/delete", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        const ServedModelInfo& m = require_model(body, ApiFlavor::Ollama);
        send_error(
            res, ApiFlavor::Ollama, 403,
            m.name + " is served from a file named on the command line; it cannot be deleted here");
    });
    s.Get(R"(/api/blobs/(.+))",
          [](const httplib::Request&, httplib::Response& res) { res.status = 404; });
    s.Post(R"(/api/blobs/(.+))", [this](const httplib::Request&, httplib::Response& res) {
        send_error(res, ApiFlavor::Ollama, 501, "blob upload is not supported by this server");
    });
}

}  // namespace strata::server
