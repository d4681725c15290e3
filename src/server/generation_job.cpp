#include "server/generation_job.h"

#include <algorithm>
#include <cctype>

#include "server/fill_in_middle.h"
#include "session/embedding.h"
#include "session/json_token_constraint.h"
#include "session/prompt.h"

namespace strata::server {

namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point t0) {
    return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Hands the model back to the host when the request is done with it.
struct ReleaseModel {
    ModelHost& host;
    HostedModel& h;
    const KeepAlive& keep_alive;
    ~ReleaseModel() { host.release(h, keep_alive); }
};

bool thinking_on(const GenerationJob& job) {
    if (!job.model->has_capability("thinking") || job.format) return false;
    return job.think.given ? job.think.on : true;  // current Ollama thinks unless told not to
}

bool tools_offered(const GenerationJob& job) {
    return job.tools.is_array() && !job.tools.empty() && job.tool_choice != "none";
}

// Ollama's Go-template `template` field, reduced to what it is used for in practice:
// substituting the system prompt, the prompt and the (empty) response.
std::string apply_go_template(std::string t, const std::string& system, const std::string& prompt) {
    auto replace_all = [&](std::string_view from, const std::string& to) {
        for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size())) {
            t.replace(at, from.size(), to);
        }
    };
    for (std::string_view v : {"{{ .System }}", "{{.System}}"}) replace_all(v, system);
    for (std::string_view v : {"{{ .Prompt }}", "{{.Prompt}}"}) replace_all(v, prompt);
    for (std::string_view v : {"{{ .Response }}", "{{.Response}}"}) replace_all(v, "");
    return t;
}

// Renders the messages; when the last one is the assistant's, the model continues it, so the
// text after its content (the end-of-turn markup) is cut off.
std::string render_messages(const HostedModel& h, const GenerationJob& job, const json& messages,
                            bool think) {
    if (!h.chat_template) throw ApiError(500, "the model has no chat template");
    json ctx;
    ctx["messages"] = messages;
    const bool prefill = !messages.empty() && messages.back().value("role", "") == "assistant";
    ctx["add_generation_prompt"] = !prefill;
    if (tools_offered(job)) ctx["tools"] = job.tools;
    if (job.model->has_capability("thinking")) {
        ctx["enable_thinking"] = think;
        ctx["thinking"] = think;  // DeepSeek V3.1's and Kimi K2.5's name for the switch
        // A level ("think": "high", OpenAI's reasoning_effort) goes to the templates that read
        // one (gpt-oss: low, medium, high); the others ignore the variable.
        if (think && !job.think.level.empty()) {
            ctx["reasoning_effort"] = job.think.level == "max" ? "high" : job.think.level;
        }
    }
    auto text = h.chat_template->render(ctx);
    if (!text) {
        json as_text = tool_arguments_as_text(messages);
        if (as_text != messages) {
            ctx["messages"] = std::move(as_text);
            if (auto retried = h.chat_template->render(ctx)) text = std::move(retried);
        }
    }
    if (!text) throw ApiError(500, "chat template: " + text.error().message);
    if (prefill) {
        const std::string content = messages.back().value("content", "");
        const size_t at = content.empty() ? std::string::npos : text->rfind(content);
        if (at != std::string::npos) text->resize(at + content.size());
    }
    return *text;
}

// In Ollama's words, which agent frameworks look for to compact their history (then the
// figures).
[[noreturn]] void context_overflow(size_t tokens, uint32_t limit) {
    throw ApiError(400, "the input length exceeds the context length (" + std::to_string(tokens) +
                            " tokens, the context holds " + std::to_string(limit) +
                            "; the request set truncate to false)");
}

// The chat prompt, dropping the oldest messages (never system messages nor the last one)
// until it fits, as Ollama does.
std::vector<TokenId> chat_prompt(const HostedModel& h, const GenerationJob& job, uint32_t limit,
                                 bool think, std::string& rendered) {
    json messages = job.messages;
    for (;;) {
        rendered = render_messages(h, job, messages, think);
        auto ids = tokenize_prompt(h.model->tokenizer, rendered);
        if (ids.size() < limit) return ids;
        if (!job.truncate) context_overflow(ids.size(), limit);
        auto victim = std::find_if(messages.begin(), messages.end(),
                                   [](const json& m) { return m.value("role", "") != "system"; });
        if (victim == messages.end() || victim + 1 == messages.end()) return ids;  // cut below
        messages.erase(victim);
    }
}

std::vector<TokenId> generate_prompt(const HostedModel& h, const GenerationJob& job, bool think,
                                     std::string& rendered) {
    const Tokenizer& tok = h.model->tokenizer;
    if (!job.suffix.empty()) {
        auto fim = fill_in_middle_tokens(h.model->info.file);
        if (!fim) throw ApiError(400, job.model->name + " does not support insert");
        rendered = fill_in_middle_prompt(*fim, job.prompt, job.suffix);
    } else if (job.raw) {
        rendered = job.prompt;
    } else if (!job.template_override.empty()) {
        rendered = apply_go_template(job.template_override, job.system, job.prompt);
    } else if (!job.model->chat_template.empty()) {
        json messages = json::array();
        if (!job.system.empty()) messages.push_back({{"role", "system"}, {"content", job.system}});
        messages.push_back({{"role", "user"}, {"content", job.prompt}});
        rendered = render_messages(h, job, messages, think);
    } else {
        // A base model without a chat template completes the text (Ollama's {{ .Prompt }}).
        rendered = job.system.empty() ? job.prompt : job.system + "\n\n" + job.prompt;
    }
    if (job.context.empty()) return tokenize_prompt(tok, rendered);
    for (TokenId t : job.context) {
        if (t < 0 || uint32_t(t) >= tok.vocab().size()) {
            throw ApiError(400, "context holds token id " + std::to_string(t) +
                                    ", which is not in the model's vocabulary");
        }
    }
    std::vector<TokenId> ids = job.context;
    TokenizeOptions o;
    o.add_special = false;
    const auto more = tok.tokenize(rendered, o);
    ids.insert(ids.end(), more.begin(), more.end());
    return ids;
}

// A prompt longer than the context keeps its first token (BOS, usually) and its end, leaving
// room for the answer.
void cut_to_fit(std::vector<TokenId>& ids, uint32_t limit, int32_t max_tokens, bool truncate) {
    if (ids.size() < limit) return;
    if (!truncate) context_overflow(ids.size(), limit);
    const uint32_t room = max_tokens > 0 ? std::min<uint32_t>(uint32_t(max_tokens), limit / 2)
                                         : std::max<uint32_t>(1, limit / 8);
    const size_t keep = std::max<size_t>(2, limit - room);
    std::vector<TokenId> cut;
    cut.push_back(ids.front());
    cut.insert(cut.end(), ids.end() - long(keep - 1), ids.end());
    ids = std::move(cut);
}

json normalized_messages(const json& messages) {
    json out = json::array();
    for (const json& m : messages) {
        if (!m.is_object()) throw ApiError(400, "json: a message must be an object");
        json n = m;
        std::string role = string_field(m, "role").value_or("");
        std::transform(role.begin(), role.end(), role.begin(),
                       [](unsigned char c) { return char(std::tolower(c)); });
        n["role"] = role;
        // Earlier reasoning: Ollama's field is `thinking` (what gpt-oss templates read); Qwen's
        // templates read `reasoning_content`.
        if (const auto thinking = string_field(m, "thinking");
            thinking && role == "assistant" && !field(m, "reasoning_content")) {
            n["reasoning_content"] = *thinking;
        }
        if (!field(m, "content"))
            n["content"] = "";
        else if (!m["content"].is_string())
            throw ApiError(400, "json: message content must be a string");
        if (const json* calls = array_field(m, "tool_calls")) {
            json fixed = json::array();
            for (json call : *calls) {
                json* args =
                    call.is_object() && call.contains("function") && call["function"].is_object()
                        ? &call["function"]["arguments"]
                        : nullptr;
                if (!args) throw ApiError(400, "json: a tool call needs a function object");
                if (args->is_string()) {
                    // Ollama wants an object; a string holding one is taken too.
                    try {
                        *args = json::parse(args->get<std::string>());
                    } catch (const json::parse_error&) {
                        throw ApiError(400, "invalid tool call arguments");
                    }
                }
                if (args->is_null()) *args = json::object();
                if (!args->is_object()) throw ApiError(400, "invalid tool call arguments");
                fixed.push_back(std::move(call));
            }
            n["tool_calls"] = std::move(fixed);
        }
        out.push_back(std::move(n));
    }
    return out;
}

std::unique_ptr<JsonTokenConstraint> make_constraint(HostedModel& h, const GenerationJob& job,
                                                     const ReplyFormat& fmt) {
    std::optional<JsonConstraint> c;
    const bool forced_call =
        tools_offered(job) && !job.tool_choice.empty() && job.tool_choice != "auto";
    if (forced_call) {
        const std::string only = job.tool_choice == "required" ? "" : job.tool_choice;
        auto g = forced_call_grammar(fmt.tools, job.tools, only);
        if (!g) throw ApiError(400, "tool_choice: " + g.error().message);
        auto w = JsonConstraint::wrapped(g->prefix, g->schema, g->suffix);
        if (!w) throw ApiError(400, "tool_choice: " + w.error().message);
        c = std::move(*w);
    } else if (job.format) {
        if (job.format->is_string()) {
            c = JsonConstraint::any_object();
        } else {
            auto s = JsonConstraint::from_schema(*job.format);
            if (!s) throw ApiError(400, "invalid format: " + s.error().message);
            c = std::move(*s);
        }
    }
    if (!c) return nullptr;
    if (!h.token_mask) h.token_mask = make_token_mask(h.model->tokenizer);
    return std::make_unique<JsonTokenConstraint>(std::move(*c), *h.token_mask, h.model->tokenizer);
}

// An answer cut before it closes would not parse, so a request whose budget (num_predict, or
// the context left after the prompt) is below the fewest tokens any answer of the format or
// forced call takes is refused before anything is generated.
void check_room_for_answer(const JsonTokenConstraint& c, const GenerationJob& job,
                           size_t prompt_tokens, uint32_t limit) {
    const uint32_t need = c.tokens_to_finish();
    if (need == TokenMask::kCannotSpell) return;
    const bool forced_call =
        tools_offered(job) && !job.tool_choice.empty() && job.tool_choice != "auto";
    const std::string what = !forced_call                    ? "an answer in that format"
                             : job.tool_choice == "required" ? "a tool call"
                                                             : "a call of " + job.tool_choice;
    const std::string takes = what + " takes at least " + std::to_string(need) + " tokens";
    const int32_t max = job.options.max_tokens;
    if (max >= 0 && uint32_t(max) < need) {
        throw ApiError(400, "num_predict (max_tokens) is " + std::to_string(max) + ", but " +
                                takes + "; ask for " + std::to_string(need) + " or more");
    }
    const size_t room = limit > prompt_tokens ? limit - prompt_tokens : 0;
    if (room < need) {
        throw ApiError(400, "the context leaves room for " + std::to_string(room) +
                                " tokens after the prompt, but " + takes);
    }
}

}  // namespace

json tool_arguments_as_text(const json& messages) {
    json out = messages;
    if (!out.is_array()) return out;
    for (json& m : out) {
        if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
        for (json& call : m["tool_calls"]) {
            if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
                continue;
            }
            json& function = call["function"];
            if (function.contains("arguments") && !function["arguments"].is_string()) {
                function["arguments"] = function["arguments"].dump();
            }
        }
    }
    return out;
}

void check_capabilities(const GenerationJob& job) {
    const ServedModelInfo& m = *job.model;
    if (job.think.on && !m.has_capability("thinking")) {
        throw ApiError(400, "\"" + job.requested_name + "\" does not support thinking");
    }
    if (job.tools.is_array() && !job.tools.empty() && !m.has_capability("tools")) {
        throw ApiError(400, "registry.ollama.ai/library/" + m.name + " does not support tools");
    }
    if (!job.suffix.empty() && !m.has_capability("insert")) {
        throw ApiError(400, "registry.ollama.ai/library/" + m.name + " does not support insert");
    }
    if (job.raw &&
        (!job.template_override.empty() || !job.system.empty() || !job.context.empty())) {
        throw ApiError(400, "raw mode does not support template, system, or context");
    }
}

GenerationOutcome run_generation(ModelHost& host, GenerationJob& job, const DeltaSink& sink) {
    GenerationOutcome out;
    const bool load_only =
        job.chat ? job.messages.empty() : job.prompt.empty() && job.suffix.empty();
    if (load_only && job.keep_alive && job.keep_alive->count() == 0) {
        host.unload(*job.model);
        out.load_only_reason = "unload";
        out.total_seconds = seconds_since(job.received);
        return out;
    }
    auto acquired = host.acquire(*job.model, out.load_seconds);
    if (!acquired) throw ApiError(500, acquired.error().message);
    HostedModel& h = **acquired;
    const ReleaseModel release{host, h, job.keep_alive};
    if (load_only) {
        out.load_only_reason = "load";
        out.total_seconds = seconds_since(job.received);
        return out;
    }

    const uint32_t limit = job.options.context_limit
                               ? std::min(job.options.context_limit, h.model->engine->n_ctx())
                               : h.model->engine->n_ctx();
    const bool think = thinking_on(job);
    std::string rendered;
    std::vector<TokenId> ids;
    if (job.chat) {
        job.messages = normalized_messages(job.messages);
        ids = chat_prompt(h, job, limit, think, rendered);
    } else {
        ids = generate_prompt(h, job, think, rendered);
    }
    cut_to_fit(ids, limit, job.options.max_tokens, job.truncate);

    const ReplyFormat fmt = format_for_prompt(job.model->template_caps, rendered, think);
    auto constraint = make_constraint(h, job, fmt);
    if (constraint) check_room_for_answer(*constraint, job, ids.size(), limit);
    GenerateOptions opts = job.options;
    opts.context_limit = limit;
    opts.constraint = constraint.get();

    std::vector<TokenLogprob> sampled;
    if (job.top_logprobs >= 0) {
        opts.logprobs = &sampled;
        opts.top_logprobs = job.top_logprobs;
    }
    size_t logprobs_sent = 0;
    const Tokenizer& tok = h.model->tokenizer;
    auto pending_logprobs = [&] {
        std::vector<TokenChoice> out_lp;
        for (; logprobs_sent < sampled.size(); ++logprobs_sent) {
            const TokenLogprob& t = sampled[logprobs_sent];
            TokenChoice c{tok.piece(t.id), t.logprob, {}};
            for (const auto& [id, lp] : t.top) c.top.emplace_back(tok.piece(id), lp);
            out_lp.push_back(std::move(c));
        }
        return out_lp;
    };

    ReplyParser parser(fmt, tools_offered(job), think, job.tools);
    int pieces = 0;
    bool injected_failure = false, gone = false;
    auto deliver = [&](ReplyDelta d) {
        for (const ToolCall& c : d.tool_calls) out.tool_calls.push_back(c);
        if (gone || (d.content.empty() && d.thinking.empty() && d.tool_calls.empty())) return;
        if (!sink(d, pending_logprobs())) gone = true;
    };
    TextSink text_sink = [&](std::string_view piece) {
        if (job.fail_after_pieces >= 0 && pieces++ >= job.fail_after_pieces) {
            injected_failure = true;
            return false;
        }
        deliver(parser.feed(piece));
        return !gone;
    };
    // The sequence whose cache holds the most of this prompt; others may be generating in the
    // rest meanwhile, decoded together with this one.
    const SequenceLease lease(host, h, ids);
    if (lease.seq() < 0) throw ApiError(503, "every sequence of the model is busy");
    auto r = lease.session().generate(ids, opts, text_sink);
    if (!r) throw ApiError(500, r.error().message);
    if (injected_failure) throw ApiError(500, "generation failed part way through (test hook)");
    deliver(parser.finish());
    out.logprobs_tail = pending_logprobs();
    out.result = std::move(*r);
    out.context = out.result.prompt_ids;
    out.context.insert(out.context.end(), out.result.generated_ids.begin(),
                       out.result.generated_ids.end());
    out.total_seconds = seconds_since(job.received);
    return out;
}

EmbeddingBatch run_embedding(ModelHost& host, const GenerationJob& job,
                             const std::vector<std::string>& inputs, bool normalize, size_t dims) {
    EmbeddingBatch out;
    if (inputs.empty()) {
        out.total_seconds = seconds_since(job.received);
        return out;
    }
    auto acquired = host.acquire(*job.model, out.load_seconds);
    if (!acquired) throw ApiError(500, acquired.error().message);
    HostedModel& h = **acquired;
    const ReleaseModel release{host, h, job.keep_alive};
    // The least recently used sequence holds the inputs now, not its last conversation (an
    // embedding evaluates every token for its hidden state, so no cached prefix serves it); the
    // model's other sequences may be generating meanwhile, evaluated in the same steps.
    const SequenceLease lease(host, h, {});
    if (lease.seq() < 0) throw ApiError(503, "every sequence of the model is busy");
    lease.session().reset();
    for (const std::string& text : inputs) {
        const auto ids = tokenize_prompt(h.model->tokenizer, text);
        if (ids.empty()) {  // "" in a vocabulary without BOS: nothing to pool
            out.vectors.emplace_back(h.model->engine->hparams().n_embd, 0.0f);
            continue;
        }
        EmbedResult r =
            embed_tokens(*h.model->engine, ids, job.truncate, lease.seq(), h.batcher.get());
        if (const EmbedFailure* f = std::get_if<EmbedFailure>(&r)) {
            throw ApiError(f->kind == EmbedError::ContextOverflow ? 400 : 500, f->message);
        }
        Embedding& e = std::get<Embedding>(r);
        out.tokens += e.tokens;
        if (normalize) l2_normalize(e.vector);
        if (dims > 0 && dims < e.vector.size()) {
            e.vector.resize(dims);
            l2_normalize(e.vector);
        }
        out.vectors.push_back(std::move(e.vector));
    }
    out.total_seconds = seconds_since(job.received);
    return out;
}

}  // namespace strata::server
