#include "eval/speed_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "util/process_stats.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

int32_t greedy(const std::vector<float>& logits) {
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::optional<ExpertStreamStats> expert_figures(const WeightStore& store) {
    StoreReport report = store.report();
    if (report.cache_entries == 0) return std::nullopt;
    return report.experts;
}

uint64_t io_now() {
    auto io = process_io();
    return io ? io->read_bytes : 0;
}

Result<SpeedRep> run_rep(LoadedModel& m, const std::vector<int32_t>& prompt,
                         const SpeedBenchOptions& o, uint32_t rep) {
    engine::Engine& e = *m.engine;
    WeightStore& store = *m.store;
    SpeedRep r;
    e.truncate(o.depth);
    e.reset_stats();
    store.reset_stats();
    std::vector<float> logits;
    const uint64_t io0 = io_now();
    const auto t0 = Clock::now();
    STRATA_TRY(e.eval(prompt, engine::LogitsWanted::Last, logits));
    r.prompt_seconds = since(t0);
    r.prompt_ops = e.stats().ops;
    r.prompt_shipped_bytes = e.stats().staged_bytes;
    int32_t next = greedy(logits);
    r.first_token_seconds = since(t0);

    const uint64_t weight0 = e.stats().weight_bytes;
    const uint64_t disk0 = store.stats().bytes_from_disk;
    const auto experts0 = expert_figures(store);
    const VramExpertStats vram0 = store.report().gpu_experts;
    const uint64_t gen_io0 = io_now();
    const auto g0 = Clock::now();
    auto last_report = g0;
    for (uint32_t i = 0; i < o.gen_tokens; ++i) {
        STRATA_TRY(e.eval({&next, 1}, engine::LogitsWanted::Last, logits));
        next = greedy(logits);
        if (o.progress && since(last_report) > 2.0) {
            last_report = Clock::now();
            o.progress("rep " + std::to_string(rep + 1) + "/" + std::to_string(o.reps) +
                       ": generated " + std::to_string(i + 1) + "/" + std::to_string(o.gen_tokens) +
                       " tokens");
        }
    }
    r.gen_seconds = since(g0);
    r.seconds = since(t0);
    for (size_t op = 0; op < r.gen_ops.size(); ++op) {
        r.gen_ops[op] = e.stats().ops[op] - r.prompt_ops[op];
    }
    const uint64_t io1 = io_now();
    r.gen_weight_bytes = e.stats().weight_bytes - weight0;
    r.gen_store_disk_bytes = store.stats().bytes_from_disk - disk0;
    r.gen_io_bytes = io1 - gen_io0;
    r.io_bytes = io1 - io0;
    r.stall_seconds = store.stats().stall_seconds;
    if (auto experts1 = expert_figures(store); experts1 && experts0) {
        r.experts = *experts1 - *experts0;
    }
    if (const StoreReport report = store.report(); report.gpu_expert_entries > 0) {
        r.vram_experts = report.gpu_experts - vram0;
    }
    return r;
}

}  // namespace

Spread spread_of(std::vector<double> v) {
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return {median, v.front(), v.back()};
}

Result<SpeedBenchResult> run_speed_bench(LoadedModel& m, const SpeedBenchOptions& o) {
    if (o.prompt_tokens == 0) return err("the prompt needs at least one token");
    if (o.reps == 0) return err("at least one repetition is needed");
    const uint64_t need = uint64_t(o.depth) + o.prompt_tokens + o.gen_tokens;
    if (need > m.engine->n_ctx()) {
        return err("the context holds " + std::to_string(m.engine->n_ctx()) + " tokens, fewer " +
                   "than the " + std::to_string(need) + " a repetition needs");
    }
    std::mt19937 rng(o.seed);
    std::vector<int32_t> prompt(o.prompt_tokens);
    for (auto& t : prompt) t = int32_t(rng() % m.engine->n_vocab());
    if (o.depth > 0) {
        // Evaluated once: every repetition keeps it and forgets only what came after.
        if (o.progress) o.progress("context of " + std::to_string(o.depth) + " tokens first");
        std::vector<int32_t> context(o.depth);
        for (auto& t : context) t = int32_t(rng() % m.engine->n_vocab());
        std::vector<float> logits;
        m.engine->truncate(0);
        STRATA_TRY(m.engine->eval(context, engine::LogitsWanted::Last, logits));
    }

    SpeedBenchResult out;
    out.prompt_tokens = o.prompt_tokens;
    out.gen_tokens = o.gen_tokens;
    out.depth = o.depth;
    out.io_counted = process_io().has_value();
    if (o.warmup) {
        if (o.progress)
            o.progress("warm-up: prompt of " + std::to_string(o.prompt_tokens) + " tokens");
        SpeedBenchOptions w = o;
        w.gen_tokens = std::min<uint32_t>(o.gen_tokens, 2);
        w.progress = nullptr;
        STRATA_TRY(run_rep(m, prompt, w, 0));
    }
    std::vector<double> prompt_tps, gen_tps, first;
    double weight = 0, disk = 0, io = 0, gen_seconds = 0;
    for (uint32_t i = 0; i < o.reps; ++i) {
        if (o.progress) {
            o.progress("rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps) +
                       ": prompt of " + std::to_string(o.prompt_tokens) + " tokens");
        }
        STRATA_ASSIGN(SpeedRep r, run_rep(m, prompt, o, i));
        prompt_tps.push_back(r.prompt_seconds > 0 ? o.prompt_tokens / r.prompt_seconds : 0);
        gen_tps.push_back(r.gen_seconds > 0 ? o.gen_tokens / r.gen_seconds : 0);
        first.push_back(r.first_token_seconds);
        weight += double(r.gen_weight_bytes);
        disk += double(r.gen_store_disk_bytes);
        io += double(r.gen_io_bytes);
        gen_seconds += r.gen_seconds;
        for (size_t op = 0; op < out.gen_ops.size(); ++op) {
            out.prompt_ops[op] += r.prompt_ops[op];
            out.gen_ops[op] += r.gen_ops[op];
        }
        if (r.experts) {
            if (!out.experts) out.experts = ExpertStreamStats{};
            *out.experts += *r.experts;
        }
        if (r.vram_experts) {
            if (!out.vram_experts) out.vram_experts = VramExpertStats{};
            *out.vram_experts += *r.vram_experts;
        }
        out.reps.push_back(r);
    }
    out.prompt_tps = spread_of(prompt_tps);
    out.gen_tps = spread_of(gen_tps);
    out.first_token_seconds = spread_of(first);
    const double tokens = double(o.gen_tokens) * o.reps;
    if (tokens > 0) {
        out.weight_bytes_per_token = weight / tokens;
        out.store_disk_bytes_per_token = disk / tokens;
        out.io_bytes_per_token = io / tokens;
    }
    out.disk_gbps = gen_seconds > 0 ? io / gen_seconds / 1e9 : 0;
    return out;
}

}  // namespace strata
