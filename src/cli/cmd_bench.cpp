// strata bench MODEL [--prompt-tokens 512] [--gen-tokens 128] [--reps 3] [--baseline] [--force]
//                    [--json FILE] [--streams 1,2,4,8] [engine and budget flags]
//
// Measures the model as strata runs it under its placement plan: prompt and generation tok/s
// (median, min and max over the repetitions, after one untimed warm-up repetition that
// --no-warmup leaves out), time to first token, bytes per generated token
// from RAM and from disk, the disk bandwidth the process drew while generating, the fraction of
// the plan's speed limit reached, and peak RSS. --baseline then runs the naive approach — the
// whole file memory-mapped, no plan — within the same RAM budget (a memory cgroup caps it, page
// cache included; without the rights to make one it runs uncapped and says so). The baseline is
// refused when the file is larger than the machine's RAM minus 4 GiB, because the kernel would
// then thrash the whole machine's page cache, unless --force.
//
// The table goes to stdout, after a line with the performance settings (--tune) and the CPU
// kernels the run took (one forced path, or the profile's measured table for the model's weight
// types: backend/kernel_choice.h); each invocation is appended as one JSON line to --json FILE,
// or to bench-results.jsonl in the cache directory.
//
// --streams measures continuous batching instead (eval/stream_bench.h): the plan counts a KV
// cache per stream, and each count of streams decodes that many sequences together.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/bench_report.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "eval/stream_bench.h"
#include "plan/budget.h"
#include "profile/profile.h"
#include "profile/system_memory.h"
#include "util/memory_cap.h"
#include "util/process_stats.h"
#include "util/table.h"
#include "util/units.h"

namespace strata::cli {

namespace {

struct BenchCommand {
    std::string model;
    uint32_t prompt_tokens = 512;
    uint32_t gen_tokens = 128;
    uint32_t depth = 0;
    uint32_t reps = 3;
    bool no_warmup = false;
    bool baseline = false;
    bool force = false;
    std::string json;
    std::vector<uint32_t> streams;
    EngineFlags engine;
};

void say(const std::string& line) {
    std::fprintf(stderr, "strata: %s\n", line.c_str());
}

// Loads the model with `plan` (none: as `options` say), runs the measurements and fills an
// entry; the model is unloaded again before returning, so the next configuration starts from a
// clean process.
BenchEntry measure(const BenchCommand& c, const std::string& label, ModelDescription described,
                   std::optional<Plan> plan, const ModelLoadOptions& options, BenchRecord& record) {
    const std::string who = label == "strata" ? "planned run" : label;
    const bool peak_ok = reset_peak_rss();
    auto m = LoadedModel::load(std::move(described), std::move(plan), options);
    if (!m) fail(m.error().message);
    print_load_warnings(**m);
    LoadedModel& model = **m;
    BenchEntry e;
    e.label = label;
    e.mode = model.store->mode_name();
    e.plan = model.plan;
    e.load_seconds = model.load_seconds;
    record.file_bytes = model.info.file.file_size;
    record.threads = model.engine->threads();
    if (e.plan) {
        const Plan& p = *e.plan;
        say(who + ": " + std::string(plan_mode_name(p.mode)) + ", RAM budget " +
            format_bytes(p.budgets.ram) + ", " + format_bytes(p.memory.total) + " planned, limit " +
            format_fixed(p.tokens_per_second, 2) + " tok/s (bound by " +
            std::string(tier_name(p.bound)) + "), loaded in " + format_fixed(e.load_seconds, 2) +
            " s");
    } else {
        say(who + ": mapped in " + format_fixed(e.load_seconds, 2) + " s");
    }
    SpeedBenchOptions o;
    o.prompt_tokens = c.prompt_tokens;
    o.gen_tokens = c.gen_tokens;
    o.depth = c.depth;
    o.reps = c.reps;
    o.warmup = !c.no_warmup;
    o.progress = [&](const std::string& line) { say(who + ": " + line); };
    auto r = run_speed_bench(model, o);
    if (!r) fail(who + ": " + r.error().message);
    e.result = std::move(*r);
    if (peak_ok) e.peak_rss = peak_rss_bytes();
    return e;
}

void check_baseline_fits(const BenchCommand& c, uint64_t file_bytes) {
    auto mem = detect_system_memory();
    if (!mem) {
        say("warning: cannot read the machine's memory (" + mem.error().message +
            "); the baseline runs without the size check");
        return;
    }
    const uint64_t room = mem->total > kRamHeadroom ? mem->total - kRamHeadroom : 0;
    if (file_bytes > room && !c.force) {
        fail("--baseline maps the whole " + format_bytes(file_bytes) +
             " file, more than this "
             "machine's RAM (" +
             format_bytes(mem->total) +
             ") minus 4 GiB: the page cache "
             "would thrash and slow the whole machine. --force runs it anyway");
    }
}

// --streams: one load with a KV cache per stream of the largest count, then each count.
void stream_bench_command(BenchCommand& c) {
    if (c.baseline) fail("--streams and --baseline measure different things: give one");
    if (c.gen_tokens == 0) fail("--gen-tokens must be at least 1 with --streams");
    const uint32_t widest = *std::max_element(c.streams.begin(), c.streams.end());
    c.engine.plan.n_seq = widest;
    auto opts = model_load_options(c.engine, isatty(STDERR_FILENO));
    if (!opts) fail(opts.error().message);
    auto planned = plan_model(c.model, c.engine.plan);
    if (!planned) fail(planned.error().message);
    auto m = LoadedModel::load(std::move(planned->model), std::move(planned->plan), *opts);
    if (!m) fail(m.error().message);
    print_load_warnings(**m);
    const Plan& p = *(*m)->plan;
    say("planned run: " + std::string(plan_mode_name(p.mode)) + ", RAM budget " +
        format_bytes(p.budgets.ram) + ", " + format_bytes(p.memory.total) + " planned for " +
        std::to_string(widest) + " sequences, limit " + format_fixed(p.tokens_per_second, 2) +
        " tok/s for one (bound by " + std::string(tier_name(p.bound)) + ")");
    StreamBenchOptions o;
    o.streams = c.streams;
    o.prompt_tokens = c.prompt_tokens;
    o.gen_tokens = c.gen_tokens;
    o.progress = [](const std::string& line) { say(line); };
    auto rows = run_stream_bench(**m, o);
    if (!rows) fail(rows.error().message);
    std::printf("%s: %s, %s, prompt %u tokens and %u generated per stream\n", c.model.c_str(),
                std::string(plan_mode_name(p.mode)).c_str(), format_bytes(p.budgets.ram).c_str(),
                c.prompt_tokens, c.gen_tokens);
    TextTable t({{"streams", Align::Right},
                 {"aggregate tok/s", Align::Right},
                 {"per stream tok/s", Align::Right},
                 {"vs 1 stream", Align::Right},
                 {"weights/token", Align::Right},
                 {"disk/token", Align::Right}});
    const double one = rows->empty() ? 0 : rows->front().aggregate_tps;
    for (const StreamBenchRow& r : *rows) {
        t.add_row({std::to_string(r.streams), format_fixed(r.aggregate_tps, 2),
                   format_fixed(r.stream_tps, 2),
                   one > 0 ? format_fixed(r.aggregate_tps / one, 2) + "x" : "-",
                   format_bytes(uint64_t(r.weight_bytes_per_token)),
                   format_bytes(uint64_t(r.disk_bytes_per_token))});
    }
    std::printf("%s", t.render("  ").c_str());
}

void bench_command(BenchCommand& c) {
    if (c.prompt_tokens == 0) fail("--prompt-tokens must be at least 1");
    if (c.reps == 0) fail("--reps must be at least 1");
    std::error_code ec;
    const uint64_t file_bytes = std::filesystem::file_size(c.model, ec);
    if (ec) fail("cannot read " + c.model + ": " + ec.message());
    if (c.baseline) check_baseline_fits(c, file_bytes);
    if (c.engine.plan.ctx == 0) c.engine.plan.ctx = c.depth + c.prompt_tokens + c.gen_tokens;
    if (!c.streams.empty()) {
        if (c.depth > 0) fail("--depth is not measured with --streams");
        stream_bench_command(c);
        return;
    }

    std::string json_path = c.json;
    if (json_path.empty()) {
        auto dir = profile_cache_dir();
        if (!dir)
            fail("no cache directory for the results (" + dir.error().message +
                 "); give --json FILE");
        json_path = *dir + "/bench-results.jsonl";
    }

    BenchRecord record;
    record.date = format_utc(unix_now());
    record.model = c.model;
    record.prompt_tokens = c.prompt_tokens;
    record.gen_tokens = c.gen_tokens;
    record.depth = c.depth;
    record.reps = c.reps;

    auto opts = model_load_options(c.engine, isatty(STDERR_FILENO));
    if (!opts) fail(opts.error().message);
    record.tuning = opts->engine.tuning;
    // Planned before anything is measured: a machine never profiled is measured here, so its
    // buffers are not in the peak RSS.
    auto planned = plan_model(c.model, c.engine.plan);
    if (!planned) fail(planned.error().message);
    record.entries.push_back(
        measure(c, "strata", std::move(planned->model), std::move(planned->plan), *opts, record));

    if (c.baseline) {
        ModelLoadOptions base = *opts;
        base.mapped = true;
        const uint64_t budget =
            record.entries.front().plan ? record.entries.front().plan->budgets.ram : 0;
        std::unique_ptr<MemoryCap> cap;
        if (budget > 0) {
            auto confined = MemoryCap::confine(budget);
            if (confined) {
                cap = std::move(*confined);
                say("baseline: capped at the RAM budget with a " + cap->how());
            } else {
                say("warning: the baseline runs uncapped: " + confined.error().message);
            }
        }
        // Read again rather than kept: a copy held through the planned run would be memory its
        // plan does not count.
        auto model = ModelDescription::read(c.model);
        if (!model) fail(model.error().message);
        BenchEntry e = measure(c, "baseline", std::move(*model), std::nullopt, base, record);
        if (cap) {
            e.memory_cap = cap->how();
            e.cap_peak = cap->peak_usage();
        }
        record.entries.push_back(std::move(e));
    }

    const std::string depth =
        c.depth > 0 ? " after " + std::to_string(c.depth) + " tokens of context" : "";
    std::printf("%s: %s, %d threads, prompt %u tokens, generation %u tokens%s, %u reps%s\n",
                c.model.c_str(), format_bytes(record.file_bytes).c_str(), record.threads,
                c.prompt_tokens, c.gen_tokens, depth.c_str(), c.reps,
                c.no_warmup ? "" : " after a warm-up");
    std::printf("tuning: %s\n", tuning_line(record.tuning).c_str());
    std::printf("%s", cpu_kernels_text(record).c_str());
    std::printf("%s", bench_table(record).c_str());
    std::printf("\n%s", operator_table(record).c_str());
    if (auto r = append_bench_json(json_path, bench_json(record)); !r) fail(r.error().message);
    say("results appended to " + json_path);
}

}  // namespace

void add_bench(CLI::App& app) {
    auto c = std::make_shared<BenchCommand>();
    CLI::App* cmd =
        app.add_subcommand("bench", "Measure prompt and generation speed against the plan's limit");
    cmd->add_option("model", c->model, "GGUF model file")->required();
    cmd->add_option("--prompt-tokens", c->prompt_tokens, "Prompt tokens per repetition")
        ->capture_default_str();
    cmd->add_option("--gen-tokens", c->gen_tokens, "Generated tokens per repetition")
        ->capture_default_str();
    cmd->add_option("--depth", c->depth,
                    "Tokens of context evaluated once before the repetitions, which each start "
                    "after it: prompt and generation speed deep in a long conversation")
        ->capture_default_str();
    cmd->add_option("--reps", c->reps, "Repetitions (median, min and max are reported)")
        ->capture_default_str();
    cmd->add_flag("--no-warmup", c->no_warmup,
                  "Time the first repetition too (default: one untimed warm-up repetition first: "
                  "the same prompt and two generated tokens)");
    cmd->add_flag("--baseline", c->baseline,
                  "Also run the whole file memory-mapped, with no plan, for comparison");
    cmd->add_flag("--force", c->force, "Run the baseline even on a model larger than RAM - 4 GiB");
    cmd->add_option("--json", c->json,
                    "Append the results as one JSON line to this file (default: "
                    "bench-results.jsonl in the cache directory)");
    cmd->add_option("--streams", c->streams,
                    "Measure continuous batching: decode this many sequences together, for each "
                    "count of a list (1,2,4,8)")
        ->delimiter(',')
        ->check(CLI::Range(1u, 64u));
    add_engine_flags(*cmd, c->engine);
    cmd->callback([c] { bench_command(*c); });
}

}  // namespace strata::cli
