// OpenAI-compatible endpoints (§11 of docs/ollama-api.md): the same generation and embedding
// jobs as the native API, with OpenAI's request fields, defaults (temperature and top_p 1),
// answer shapes, SSE streaming and error objects.
#include <httplib.h>

#include <ctime>
#include <map>

#include "server/http_server.h"
#include "server/ollama_format.h"
#include "util/base64.h"

namespace strata::server {

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";
constexpr const char* kEventStream = "text/event-stream";

std::string event(const json& j) {
    return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

// OpenAI message content: a string, null, or an array of parts of which only text is read.
std::string message_text(const json& content) {
    if (content.is_null()) return "";
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw ApiError(400, "invalid message content type");
    std::string text;
    for (const json& part : content) {
        if (!part.is_object()) throw ApiError(400, "invalid message content part");
        const std::string type = part.value("type", "");
        if (type == "text") {
            text += part.value("text", "");
        } else if (type == "image_url") {
            std::string url;
            if (part.contains("image_url")) {
                const json& iu = part["image_url"];
                url = iu.is_string() ? iu.get<std::string>() : iu.value("url", "");
            }
            if (url.starts_with("http://") || url.starts_with("https://")) {
                throw ApiError(400,
                               "image URLs are not currently supported, please use base64 "
                               "encoded data instead");
            }
            throw ApiError(400, "this model does not support image input");
        } else if (type == "input_audio") {
            throw ApiError(400, "this model does not support audio input");
        } else {
            throw ApiError(400, "invalid message content part type: " + type);
        }
    }
    return text;
}

// OpenAI messages into the native form the chat template gets.
json native_messages(const json& messages) {
    json out = json::array();
    std::map<std::string, std::string> call_names;  // tool_call_id -> function name
    for (const json& m : messages) {
        if (!m.is_object()) throw ApiError(400, "invalid message: not an object");
        json n;
        n["role"] = string_field(m, "role").value_or("");
        n["content"] = message_text(m.contains("content") ? m["content"] : json());
        if (const json* reasoning = field(m, "reasoning"); reasoning && reasoning->is_string()) {
            n["thinking"] = *reasoning;
        }
        if (const json* calls = array_field(m, "tool_calls")) {
            json native = json::array();
            for (const json& c : *calls) {
                if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
                    throw ApiError(400, "invalid tool call");
                }
                const json& f = c["function"];
                json args = json::object();
                if (f.contains("arguments") && f["arguments"].is_string()) {
                    try {
                        args = json::parse(f["arguments"].get<std::string>());
                    } catch (const json::parse_error&) {
                        throw ApiError(400, "invalid tool call arguments");
                    }
                } else if (f.contains("arguments") && f["arguments"].is_object()) {
                    args = f["arguments"];
                }
                const std::string name = f.value("name", "");
                if (c.contains("id") && c["id"].is_string()) call_names[c["id"]] = name;
                native.push_back({{"function", {{"name", name}, {"arguments", args}}}});
            }
            n["tool_calls"] = std::move(native);
        }
        if (auto id = string_field(m, "tool_call_id")) {
            n["tool_call_id"] = *id;
            if (auto it = call_names.find(*id); it != call_names.end()) n["tool_name"] = it->second;
        }
        if (auto name = string_field(m, "name")) n["tool_name"] = *name;
        out.push_back(std::move(n));
    }
    return out;
}

ThinkSetting openai_think(const json& body) {
    std::optional<std::string> effort = string_field(body, "reasoning_effort");
    if (const json* r = object_field(body, "reasoning")) effort = string_field(*r, "effort");
    ThinkSetting t;
    if (!effort) return t;
    t.given = true;
    const std::string& e = *effort;
    if (e == "none") return t;
    t.on = true;
    if (e == "minimal")
        t.level = "low";
    else if (e == "low" || e == "medium" || e == "high" || e == "max")
        t.level = e;
    else if (e == "xhigh" || e == "ultra")
        t.level = "max";
    else
        throw ApiError(400, "invalid reasoning effort: \"" + e + "\"");
    return t;
}

// The request fields shared by chat and completions.
void openai_sampling(const json& body, GenerationJob& job) {
    GenerateOptions& g = job.options;
    g.sampling.temperature = float(number_field(body, "temperature").value_or(1.0));
    const double top_p = number_field(body, "top_p").value_or(1.0);
    g.sampling.top_p = top_p > 0 ? float(top_p) : 1.0f;
    if (auto v = number_field(body, "frequency_penalty")) g.sampling.frequency_penalty = float(*v);
    if (auto v = number_field(body, "presence_penalty")) g.sampling.presence_penalty = float(*v);
    if (auto seed = int_field(body, "seed"))
        g.sampling.seed = *seed < 0 ? kRandomSeed : uint64_t(*seed);
    std::optional<int64_t> max = int_field(body, "max_tokens");
    if (!max) max = int_field(body, "max_completion_tokens");
    if (max) g.max_tokens = *max > 0 ? int32_t(std::min<int64_t>(*max, INT32_MAX)) : -1;
    if (const json* stop = field(body, "stop")) g.stop = parse_stop(*stop, "stop");
    // OpenClaw adds Ollama options (num_ctx) to OpenAI requests.
    if (const json* o = object_field(body, "options")) {
        if (auto n = int_field(*o, "num_ctx"); n && *n > 0) g.context_limit = uint32_t(*n);
    }
    if (g.sampling.temperature < 0) g.sampling.temperature = 0;
    if (auto r = validate(g.sampling); !r) throw ApiError(400, r.error().message);
}

// The completions API's older logprobs shape: parallel arrays, alternatives as maps.
json legacy_logprobs(const std::vector<TokenChoice>& tokens) {
    json out = {{"tokens", json::array()},
                {"token_logprobs", json::array()},
                {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    size_t offset = 0;
    for (const TokenChoice& t : tokens) {
        out["tokens"].push_back(t.token);
        out["token_logprobs"].push_back(t.logprob);
        json top = json::object();
        for (const auto& [token, lp] : t.top) top[token] = lp;
        out["top_logprobs"].push_back(std::move(top));
        out["text_offset"].push_back(offset);
        offset += t.token.size();
    }
    return out;
}

bool wants_usage(const json& body) {
    const json* so = object_field(body, "stream_options");
    return so && bool_field(*so, "include_usage").value_or(false);
}

// The end of an SSE stream: with include_usage a chunk with no choices and the usage, then
// [DONE].
void end_stream(ResponseChannel& ch, json usage_chunk, bool include_usage) {
    if (include_usage) ch.push(event(usage_chunk));
    ch.push_last("data: [DONE]\n\n");
}

json usage(const GenerationOutcome& o) {
    const auto prompt = o.result.prompt_ids.size();
    const auto completion = o.result.generated_ids.size();
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
}

json openai_tool_call(const ToolCall& c, size_t index) {
    return {{"id", new_tool_call_id()},
            {"index", index},
            {"type", "function"},
            {"function", {{"name", c.name}, {"arguments", c.arguments.dump()}}}};
}

}  // namespace

void HttpServer::install_openai_routes() {
    httplib::Server& s = *http_;
    auto model_object = [](const ServedModelInfo& m) {
        const size_t slash = m.name.find('/');
        return json{{"id", m.name},
                    {"object", "model"},
                    {"created", m.modified_unix},
                    {"owned_by", slash == std::string::npos ? "library" : m.name.substr(0, slash)}};
    };
    s.Get("/v1/models", [this, model_object](const httplib::Request&, httplib::Response& res) {
        json data = json::array();
        for (const auto& m : catalog_.models()) data.push_back(model_object(m));
        res.set_content(json({{"object", "list"}, {"data", data}}).dump(), kJson);
    });
    s.Get(R"(/v1/models/(.+))",
          [this, model_object](const httplib::Request& req, httplib::Response& res) {
              const std::string name = req.matches[1];
              const ServedModelInfo* m = catalog_.find(name);
              if (!m) {
                  send_error(res, ApiFlavor::OpenAI, 404, "model '" + name + "' not found");
                  return;
              }
              res.set_content(model_object(*m).dump(), kJson);
          });

    s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        GenerationJob job = base_job(body, ApiFlavor::OpenAI);
        const std::string name = job.requested_name;
        job.chat = true;
        const json* msgs = array_field(body, "messages");
        if (!msgs || msgs->empty()) throw ApiError(400, "[] is too short - 'messages'");
        job.messages = native_messages(*msgs);
        if (const json* tools = array_field(body, "tools")) job.tools = *tools;
        job.tool_choice = parse_tool_choice(body);
        openai_sampling(body, job);
        if (const json* rf = object_field(body, "response_format")) {
            const std::string type = rf->value("type", "text");
            if (type == "json_object")
                job.format = json("json");
            else if (type == "json_schema") {
                const json* js = object_field(*rf, "json_schema");
                const json* schema = js ? object_field(*js, "schema") : nullptr;
                job.format = schema ? *schema : json("json");
            } else if (type != "text") {
                throw ApiError(400, "invalid response_format type: " + type);
            }
        }
        job.think = openai_think(body);
        job.top_logprobs = parse_top_logprobs(body);
        check_capabilities(job);
        const bool stream = bool_field(body, "stream").value_or(false);
        const bool include_usage = wants_usage(body);
        const std::string id = "chatcmpl-" + std::to_string(next_id_++);
        const int64_t created = int64_t(std::time(nullptr));
        const JobTag tag = generation_tag(job);
        respond_queued(
            res, ApiFlavor::OpenAI, stream, kEventStream,
            [this, job = std::move(job), stream, include_usage, id, created,
             name](ResponseChannel& ch) mutable {
                auto chunk = [&](json choices) {
                    return json{{"id", id},
                                {"object", "chat.completion.chunk"},
                                {"created", created},
                                {"model", name},
                                {"system_fingerprint", "fp_ollama"},
                                {"choices", std::move(choices)}};
                };
                bool first = true;
                std::string text, reasoning;
                json calls = json::array();
                std::vector<TokenChoice> logprobs;
                const bool want_logprobs = job.top_logprobs >= 0;
                auto send_delta = [&](json delta, const std::vector<TokenChoice>& lp) {
                    if (first) {
                        json d = {{"role", "assistant"}};
                        for (auto& [k, v] : delta.items()) d[k] = v;
                        delta = std::move(d);
                        first = false;
                    }
                    json choice = {{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}};
                    if (want_logprobs && !lp.empty()) {
                        choice["logprobs"] = {{"content", logprobs_json(lp)}};
                    }
                    return ch.push(event(chunk(json::array({choice}))));
                };
                const std::vector<TokenChoice> none;
                GenerationOutcome o =
                    generate(job, ch, [&](const ReplyDelta& d, const std::vector<TokenChoice>& lp) {
                        json new_calls = json::array();
                        for (const ToolCall& c : d.tool_calls) {
                            new_calls.push_back(
                                openai_tool_call(c, calls.size() + new_calls.size()));
                        }
                        for (auto& c : new_calls) calls.push_back(c);
                        if (!stream) {
                            text += d.content;
                            reasoning += d.thinking;
                            logprobs.insert(logprobs.end(), lp.begin(), lp.end());
                            return !ch.cancelled();
                        }
                        bool ok = true;
                        if (!d.thinking.empty()) {
                            ok = send_delta({{"content", ""}, {"reasoning", d.thinking}},
                                            d.content.empty() ? lp : none);
                        }
                        if (ok && !d.content.empty()) ok = send_delta({{"content", d.content}}, lp);
                        if (ok && !new_calls.empty()) {
                            ok = send_delta({{"tool_calls", new_calls}}, none);
                        }
                        return ok;
                    });
                std::string reason = o.result.done_reason.empty() ? "stop" : o.result.done_reason;
                if (!calls.empty() && reason == "stop") reason = "tool_calls";
                logprobs.insert(logprobs.end(), o.logprobs_tail.begin(), o.logprobs_tail.end());
                if (!stream) {
                    json msg = {{"role", "assistant"}, {"content", text}};
                    if (!reasoning.empty()) msg["reasoning"] = reasoning;
                    if (!calls.empty()) msg["tool_calls"] = calls;
                    json out = {
                        {"id", id},
                        {"object", "chat.completion"},
                        {"created", created},
                        {"model", name},
                        {"system_fingerprint", "fp_ollama"},
                        {"choices",
                         json::array(
                             {{{"index", 0}, {"message", msg}, {"finish_reason", reason}}})},
                        {"usage", usage(o)}};
                    if (want_logprobs) {
                        out["choices"][0]["logprobs"] = {{"content", logprobs_json(logprobs)}};
                    }
                    ch.push_last(to_text(out));
                    return;
                }
                if (first) send_delta({{"content", ""}}, none);
                ch.push(event(chunk(json::array(
                    {{{"index", 0}, {"delta", json::object()}, {"finish_reason", reason}}}))));
                json u = chunk(json::array());
                u["usage"] = usage(o);
                end_stream(ch, std::move(u), include_usage);
            },
            tag);
    });

    s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        GenerationJob job = base_job(body, ApiFlavor::OpenAI);
        const std::string name = job.requested_name;
        job.prompt = string_field(body, "prompt").value_or("");
        if (job.prompt.empty()) throw ApiError(400, "prompt is required");
        job.suffix = string_field(body, "suffix").value_or("");
        openai_sampling(body, job);
        // The legacy API's logprobs is the number of alternatives (0: the chosen token only).
        if (const int64_t n = int_field(body, "logprobs").value_or(-1); n >= 0) {
            job.top_logprobs = int(std::min<int64_t>(n, 20));
        }
        check_capabilities(job);
        const bool stream = bool_field(body, "stream").value_or(false);
        const bool include_usage = wants_usage(body);
        const std::string id = "cmpl-" + std::to_string(next_id_++);
        const int64_t created = int64_t(std::time(nullptr));
        const JobTag tag = generation_tag(job);
        respond_queued(
            res, ApiFlavor::OpenAI, stream, kEventStream,
            [this, job = std::move(job), stream, include_usage, id, created,
             name](ResponseChannel& ch) mutable {
                auto object = [&](const std::string& text, json reason) {
                    return json{
                        {"id", id},
                        {"object", "text_completion"},
                        {"created", created},
                        {"model", name},
                        {"system_fingerprint", "fp_ollama"},
                        {"choices",
                         json::array({{{"text", text}, {"index", 0}, {"finish_reason", reason}}})}};
                };
                std::string text;
                std::vector<TokenChoice> logprobs;
                const bool want_logprobs = job.top_logprobs >= 0;
                GenerationOutcome o =
                    generate(job, ch, [&](const ReplyDelta& d, const std::vector<TokenChoice>& lp) {
                        if (!stream) {
                            text += d.content;
                            logprobs.insert(logprobs.end(), lp.begin(), lp.end());
                            return !ch.cancelled();
                        }
                        if (d.content.empty()) return true;
                        json piece = object(d.content, nullptr);
                        if (want_logprobs) piece["choices"][0]["logprobs"] = legacy_logprobs(lp);
                        return ch.push(event(piece));
                    });
                logprobs.insert(logprobs.end(), o.logprobs_tail.begin(), o.logprobs_tail.end());
                const std::string reason =
                    o.result.done_reason.empty() ? "stop" : o.result.done_reason;
                if (!stream) {
                    json out = object(text, reason);
                    if (want_logprobs) out["choices"][0]["logprobs"] = legacy_logprobs(logprobs);
                    out["usage"] = usage(o);
                    ch.push_last(to_text(out));
                    return;
                }
                ch.push(event(object("", reason)));
                json u = object("", nullptr);
                u["choices"] = json::array();
                u["usage"] = usage(o);
                end_stream(ch, std::move(u), include_usage);
            },
            tag);
    });

    s.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
        const json body = parse_body(req.body);
        GenerationJob job = base_job(body, ApiFlavor::OpenAI);
        const std::string name = job.requested_name;
        const json* in = field(body, "input");
        std::vector<std::string> inputs;
        if (!in) throw ApiError(400, "invalid input");
        if (in->is_string()) {
            inputs.push_back(in->get<std::string>());
        } else if (in->is_array() && !in->empty()) {
            for (const json& x : *in) {
                if (!x.is_string()) throw ApiError(400, "invalid input");
                inputs.push_back(x.get<std::string>());
            }
        } else {
            throw ApiError(400, "invalid input");
        }
        const std::string encoding = string_field(body, "encoding_format").value_or("float");
        if (encoding != "float" && encoding != "base64") {
            throw ApiError(400,
                           "invalid encoding format: \"" + encoding + "\" (use float or base64)");
        }
        const int64_t dims = int_field(body, "dimensions").value_or(0);
        if (dims < 0) throw ApiError(400, "dimensions must be positive");
        respond_queued(
            res, ApiFlavor::OpenAI, false, kJson,
            [this, job, inputs, encoding, dims, name](ResponseChannel& ch) {
                EmbeddingBatch b = run_embedding(host_, job, inputs, true, size_t(dims));
                json data = json::array();
                for (size_t i = 0; i < b.vectors.size(); ++i) {
                    json e = {{"object", "embedding"}};
                    if (encoding == "base64") {
                        e["embedding"] = base64_encode(
                            std::string_view(reinterpret_cast<const char*>(b.vectors[i].data()),
                                             b.vectors[i].size() * sizeof(float)));
                    } else {
                        e["embedding"] = b.vectors[i];
                    }
                    e["index"] = i;
                    data.push_back(std::move(e));
                }
                ch.push_last(
                    json({{"object", "list"},
                          {"data", data},
                          {"model", name},
                          {"usage", {{"prompt_tokens", b.tokens}, {"total_tokens", b.tokens}}}})
                        .dump());
            },
            embedding_tag(job));
    });
}

}  // namespace strata::server
