// strata run [MODEL] [--prompt TEXT | --prompt-ids IDS [--logits-out FILE]] [--interactive]
//            [--raw] [--json] [flags]
//
// Generates text. With --prompt the answer streams to stdout as it is generated, followed by a
// one-line summary on stderr (prompt and generation speed, load time, weight bytes read per
// token and the bandwidth that makes). The prompt goes through the model's chat template when
// the file has one (--raw sends it as it is). --interactive is a chat loop that keeps the KV
// cache between turns, so each turn evaluates only its new tokens. --json prints one JSON object
// (prompt_ids, generated_ids, text, done_reason, timings, tuning) instead, for scripts.
// --prompt-ids takes the prompt as token ids, used as they are (no template, no BOS added); with
// it --logits-out FILE writes the logits of every prompt position (the prompt evaluated as one
// batch, each position seeing the given ids before it) as raw little-endian float32, one row of
// n_vocab per prompt token: what another engine's teacher-forced logits are compared with.
//
// Without a model it runs the built-in default (synth/default_model.h); without --prompt it
// chats when standard input is a terminal and reads the prompt from standard input otherwise.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/bench_report.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "session/generation.h"
#include "session/prompt.h"
#include "synth/default_model.h"
#include "util/process_stats.h"
#include "util/units.h"

namespace strata::cli {

namespace {

struct RunCommand {
    std::string model;
    std::string prompt;
    std::string prompt_ids;  // comma-separated token ids instead of the prompt text
    std::string logits_out;
    std::string system;
    bool interactive = false;
    bool raw = false;
    bool json = false;
    bool greedy = false;
    int32_t max_tokens = 256;
    std::vector<std::string> stop;
    EngineFlags engine;
    SamplerParams sampling;
};

double per_second(double n, double s) {
    return s > 0 ? n / s : 0.0;
}

std::string summary_line(const LoadedModel& m, const GenerateResult& r) {
    const GenerateTimings& t = r.timings;
    const double bytes_per_token =
        t.generated_tokens ? double(t.generate_weight_bytes) / t.generated_tokens : 0.0;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "prompt %u tokens (%u cached), %.1f tok/s | generated %u tokens, %.2f tok/s | "
                  "load %.2f s | %s weights/token, %.2f GB/s",
                  t.prompt_tokens, t.cached_tokens, per_second(t.prompt_tokens, t.prompt_seconds),
                  t.generated_tokens, per_second(t.generated_tokens, t.generate_seconds),
                  m.load_seconds, format_bytes(uint64_t(bytes_per_token), true).c_str(),
                  per_second(double(t.generate_weight_bytes), t.generate_seconds) / 1e9);
    std::string line = buf;
    const StoreStats& st = m.store->stats();
    if (st.bytes_from_disk > 0)
        line += " | " + format_bytes(st.bytes_from_disk, true) + " from disk";
    if (const StoreReport report = m.store->report(); report.cache_entries > 0) {
        const ExpertStreamStats& e = report.experts;
        if (e.requests > 0) {
            line += ", expert cache hit rate " +
                    format_fixed(100.0 * double(e.hits) / double(e.requests), 1) + "%";
        }
    }
    const StoreReport report = m.store->report();
    if (const VramExpertStats& v = report.gpu_experts; v.requests > 0) {
        line += " | GPU expert cache " + std::to_string(report.gpu_expert_entries) +
                " entries, hit rate " +
                format_fixed(100.0 * double(v.hits) / double(v.requests), 1) + "%, " +
                std::to_string(v.loads) + " loads";
        if (v.prefetches > 0) {
            line += ", " + std::to_string(v.prefetches) + " guesses copied, " +
                    std::to_string(v.prefetch_hits) + " served";
        }
    }
    return line;
}

nlohmann::ordered_json result_json(const std::string& path, const LoadedModel& m,
                                   const GenerateResult& r, const Tuning& tuning) {
    const GenerateTimings& t = r.timings;
    nlohmann::ordered_json j;
    j["model"] = path;
    j["prompt_ids"] = r.prompt_ids;
    j["generated_ids"] = r.generated_ids;
    j["text"] = r.text;
    j["done_reason"] = r.done_reason;
    j["mode"] = m.store->mode_name();
    j["disk_bytes_read"] = m.store->stats().bytes_from_disk;
    // The kernel's view of the same: peak resident memory and storage reads of the process.
    if (auto rss = peak_rss_bytes()) j["peak_rss_bytes"] = *rss;
    if (auto io = process_io()) j["process_read_bytes"] = io->read_bytes;
    if (m.plan) {
        // What the plan counted against the budget, to compare the peak with.
        const MemoryPlan& p = m.plan->memory;
        j["memory_budget"] = p.budget;
        j["memory_planned"] = p.total;
        j["memory_baseline"] = p.baseline;
        j["memory_baseline_measured"] = p.baseline_measured;
    }
    if (const StoreReport report = m.store->report(); report.cache_entries > 0) {
        const ExpertStreamStats& e = report.experts;
        j["experts"] = {{"requests", e.requests},
                        {"hits", e.hits},
                        {"misses", e.misses},
                        {"prefetches", e.prefetches},
                        {"prefetch_used", e.prefetch_used},
                        {"bytes_from_disk", e.bytes_from_disk}};
    }
    const StoreReport report = m.store->report();
    if (const VramExpertStats& v = report.gpu_experts; v.requests > 0) {
        j["gpu_expert_cache"] = {{"entries", report.gpu_expert_entries},
                                 {"requests", v.requests},
                                 {"hits", v.hits},
                                 {"loads", v.loads},
                                 {"load_bytes", v.load_bytes},
                                 {"prefetches", v.prefetches},
                                 {"prefetch_bytes", v.prefetch_bytes},
                                 {"prefetch_hits", v.prefetch_hits}};
    }
    j["timings"] = {
        {"load_seconds", m.load_seconds},
        {"prompt_tokens", t.prompt_tokens},
        {"cached_tokens", t.cached_tokens},
        {"prompt_seconds", t.prompt_seconds},
        {"prompt_tokens_per_second", per_second(t.prompt_tokens, t.prompt_seconds)},
        {"generated_tokens", t.generated_tokens},
        {"generate_seconds", t.generate_seconds},
        {"generate_tokens_per_second", per_second(t.generated_tokens, t.generate_seconds)},
        {"weight_bytes_per_token",
         t.generated_tokens ? double(t.generate_weight_bytes) / t.generated_tokens : 0.0},
        {"effective_gb_per_second",
         per_second(double(t.generate_weight_bytes), t.generate_seconds) / 1e9},
    };
    j["tuning"] = tuning_json(tuning);  // the performance settings, as bench records them
    return j;
}

// Streams generated text to stdout as it arrives.
bool print_piece(std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
}

bool has_file_template(const LoadedModel& m) {
    return m.info.file.get_string("tokenizer.chat_template").has_value();
}

GenerateOptions generate_options(const RunCommand& c) {
    GenerateOptions g;
    g.max_tokens = c.max_tokens;
    g.sampling = c.sampling;
    if (c.greedy) g.sampling.temperature = 0.0f;
    g.stop = c.stop;
    return g;
}

nlohmann::ordered_json first_messages(const RunCommand& c) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!c.system.empty()) messages.push_back({{"role", "system"}, {"content", c.system}});
    return messages;
}

// "1,2,3" into ids, each below the vocabulary's size.
std::vector<TokenId> parse_prompt_ids(const std::string& list, uint32_t n_vocab) {
    std::vector<TokenId> ids;
    size_t at = 0;
    while (at <= list.size()) {
        const size_t end = std::min(list.find(',', at), list.size());
        TokenId id = -1;
        const char* first = list.data() + at;
        const char* last = list.data() + end;
        const auto [ptr, ec] = std::from_chars(first, last, id);
        if (ec != std::errc() || ptr != last || id < 0 || uint32_t(id) >= n_vocab) {
            fail("--prompt-ids: '" + std::string(first, last) + "' is not a token id (0 .. " +
                 std::to_string(n_vocab - 1) + ")");
        }
        ids.push_back(id);
        at = end + 1;
    }
    return ids;
}

// Evaluates `ids` from an empty context as one batch and writes every position's logits to
// `path` (float32, one row of n_vocab a token); the context is left empty again.
void write_prompt_logits(LoadedModel& m, const std::vector<TokenId>& ids, const std::string& path) {
    m.engine->truncate(0);
    std::vector<float> logits;
    if (auto r = m.engine->eval(ids, engine::LogitsWanted::All, logits); !r)
        fail("--logits-out: " + r.error().message);
    m.engine->truncate(0);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(logits.data()),
              std::streamsize(logits.size() * sizeof(float)));
    if (!out.flush()) fail("--logits-out: cannot write " + path);
}

std::vector<TokenId> prompt_tokens(const RunCommand& c, LoadedModel& m) {
    if (!c.prompt_ids.empty()) return parse_prompt_ids(c.prompt_ids, m.engine->n_vocab());
    std::string text = c.prompt;
    if (!c.raw && has_file_template(m)) {
        auto tmpl = ChatTemplate::from_gguf(m.info.file);
        if (!tmpl) fail("chat template: " + tmpl.error().message);
        auto messages = first_messages(c);
        messages.push_back({{"role", "user"}, {"content", c.prompt}});
        auto rendered = render_chat(*tmpl, messages);
        if (!rendered) fail("chat template: " + rendered.error().message);
        text = *rendered;
    }
    return tokenize_prompt(m.tokenizer, text);
}

void run_once(const RunCommand& c, const std::string& path, LoadedModel& m, const Tuning& tuning) {
    const auto ids = prompt_tokens(c, m);
    if (!c.logits_out.empty()) write_prompt_logits(m, ids, c.logits_out);
    GenerationSession session(*m.engine, m.tokenizer);
    TextSink sink;
    if (!c.json) {
        sink = print_piece;
    }
    auto r = session.generate(ids, generate_options(c), sink);
    if (!r) fail(r.error().message);
    if (c.json) {
        std::printf("%s\n", result_json(path, m, *r, tuning).dump().c_str());
    } else {
        std::printf("\n");
        std::fprintf(stderr, "%s\n", summary_line(m, *r).c_str());
    }
}

void run_interactive(const RunCommand& c, LoadedModel& m) {
    auto tmpl = ChatTemplate::from_gguf(m.info.file);
    if (!tmpl) fail("chat template: " + tmpl.error().message);
    std::fprintf(stderr, "strata: chatting with %s (template: %s). /bye or end of input quits.\n",
                 m.info.file.path.c_str(), tmpl->origin().c_str());
    GenerationSession session(*m.engine, m.tokenizer);
    auto messages = first_messages(c);
    const bool tty = isatty(STDIN_FILENO);
    std::string line;
    for (;;) {
        if (tty) std::fprintf(stderr, ">>> ");
        if (!std::getline(std::cin, line) || line == "/bye") break;
        if (line.empty()) continue;
        messages.push_back({{"role", "user"}, {"content", line}});
        auto rendered = render_chat(*tmpl, messages);
        if (!rendered) fail("chat template: " + rendered.error().message);
        auto r = session.generate(tokenize_prompt(m.tokenizer, *rendered), generate_options(c),
                                  print_piece);
        if (!r) fail(r.error().message);
        std::printf("\n");
        std::fprintf(stderr, "%s\n", summary_line(m, *r).c_str());
        messages.push_back({{"role", "assistant"}, {"content", r->text}});
    }
}

void run_command(RunCommand& c, bool have_prompt) {
    if (c.json && c.interactive)
        fail("--json prints one answer; it does not go with --interactive");
    if (c.interactive && (!c.prompt_ids.empty() || !c.logits_out.empty()))
        fail("--prompt-ids and --logits-out go with one prompt, not with --interactive");
    // The plan counts the rows of logits handed out at once, so they must be known before the
    // model loads: a text prompt's token count is not (`strata tokenize --ids` gives its ids).
    if (!c.logits_out.empty() && c.prompt_ids.empty())
        fail("--logits-out needs the prompt as --prompt-ids (strata tokenize --ids gives them)");
    if (!c.prompt_ids.empty()) {
        if (have_prompt) fail("give the prompt as --prompt or as --prompt-ids, not both");
        have_prompt = true;
        if (!c.logits_out.empty())
            c.engine.plan.logit_rows =
                uint32_t(std::count(c.prompt_ids.begin(), c.prompt_ids.end(), ',') + 1);
    }
    std::string path = c.model;
    if (path.empty()) {
        auto p = ensure_default_model();
        if (!p) fail("the built-in default model: " + p.error().message);
        path = *p;
        if (!have_prompt && !c.interactive) {
            c.prompt = "Once upon a time";
            have_prompt = true;
        }
        if (!c.json)
            std::fprintf(stderr,
                         "strata: no model given; running the built-in default %s "
                         "(random weights)\n",
                         path.c_str());
    }
    if (!have_prompt && !c.interactive) {
        if (isatty(STDIN_FILENO)) {
            c.interactive = true;
        } else {
            c.prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
            if (c.prompt.empty()) fail("no prompt: give --prompt, or text on standard input");
        }
    }
    auto opts = model_load_options(c.engine, !c.json && isatty(STDERR_FILENO));
    if (!opts) fail(opts.error().message);
    auto planned = plan_model(path, c.engine.plan);
    if (!planned) fail(planned.error().message);
    if (!c.json) describe_plan(planned->plan);
    auto m = LoadedModel::load(std::move(planned->model), std::move(planned->plan), *opts);
    if (!m) fail(m.error().message);
    print_load_warnings(**m);
    if (c.interactive) {
        run_interactive(c, **m);
    } else {
        run_once(c, path, **m, opts->engine.tuning);
    }
}

}  // namespace

void add_run(CLI::App& app) {
    auto c = std::make_shared<RunCommand>();
    CLI::App* cmd = app.add_subcommand("run", "Generate text with a model");
    cmd->add_option("model", c->model, "GGUF model file (default: the built-in tiny model)");
    auto* prompt = cmd->add_option("--prompt,-p", c->prompt, "Prompt text");
    cmd->add_option("--prompt-ids", c->prompt_ids,
                    "The prompt as comma-separated token ids, used as they are (no chat template, "
                    "no BOS added)")
        ->type_name("IDS");
    cmd->add_option("--logits-out", c->logits_out,
                    "With --prompt-ids: write the logits of every prompt position (the prompt "
                    "evaluated as one batch) to FILE as little-endian float32, one row of "
                    "n_vocab per prompt token, before generating (-n 0: only that)")
        ->type_name("FILE");
    cmd->add_option("--system", c->system, "System message for the chat template");
    cmd->add_flag("--interactive,-i", c->interactive, "Chat in a loop, keeping the context");
    cmd->add_flag("--raw", c->raw, "Send the prompt as it is, without the chat template");
    cmd->add_flag("--json", c->json, "Print one JSON object with ids, text and timings");
    cmd->add_option("--max-tokens,-n", c->max_tokens,
                    "Tokens to generate at most; -1 until the context is full")
        ->capture_default_str();
    cmd->add_option("--stop", c->stop, "Stop string (repeatable); it is not printed");
    cmd->add_flag("--greedy", c->greedy, "Always take the most likely token (temperature 0)");
    add_engine_flags(*cmd, c->engine);
    add_sampling_flags(*cmd, c->sampling);
    cmd->callback([c, prompt] { run_command(*c, prompt->count() > 0); });
}

}  // namespace strata::cli
