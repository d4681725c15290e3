#include "cli/bench_report.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/table.h"
#include "util/units.h"

namespace strata::cli {

namespace {

std::string per_token(double bytes) {
    return format_bytes(uint64_t(bytes + 0.5), true);
}

// Bytes per generated token from disk as the run measured them: the store's own count where it
// reads the disk itself, the kernel's count of the process's storage reads otherwise (the mapped
// baseline's page faults).
double disk_per_token(const BenchEntry& e) {
    return std::max(e.result.store_disk_bytes_per_token, e.result.io_bytes_per_token);
}

nlohmann::ordered_json spread_json(const Spread& s) {
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

nlohmann::ordered_json plan_json_summary(const Plan& p) {
    nlohmann::ordered_json tiers;
    for (const TierTraffic& t : p.tiers) {
        tiers[std::string(tier_name(t.tier))] = {{"bytes_per_token", t.bytes_per_token},
                                                 {"bandwidth", t.bandwidth}};
    }
    return {
        {"mode", plan_mode_name(p.mode)},          {"ram_budget", p.budgets.ram},
        {"memory_planned", p.memory.total},        {"tokens_per_second_limit", p.tokens_per_second},
        {"bound_by", tier_name(p.bound)},          {"slots", p.stream.slots},
        {"lookahead", p.stream.lookahead},         {"streamed_layers", p.stream.streamed_layers},
        {"cached_layers", p.stream.cached_layers}, {"tiers", tiers}};
}

double ratio(double a, double b) {
    return b > 0 ? a / b : 0;
}

nlohmann::ordered_json experts_json(const BenchEntry& e) {
    const ExpertStreamStats& x = *e.result.experts;
    const double tokens = double(e.result.gen_tokens) * double(e.result.reps.size());
    nlohmann::ordered_json j = {
        {"requests", x.requests},
        {"hits", x.hits},
        {"misses", x.misses},
        {"hit_rate", ratio(double(x.hits), double(x.requests))},
        {"prefetches", x.prefetches},
        {"prefetch_used", x.prefetch_used},
        {"prefetch_accuracy", ratio(double(x.prefetch_used), double(x.prefetches))},
        {"selected_bytes_per_token", ratio(double(x.bytes_requested), tokens)},
        {"disk_bytes_per_token", ratio(double(x.bytes_from_disk), tokens)},
        {"io_saved_fraction", 1 - ratio(double(x.bytes_from_disk), double(x.bytes_requested))}};
    if (e.plan) {
        j["predicted_disk_bytes_per_token"] = e.plan->traffic(Tier::Disk).bytes_per_token;
        j["predicted_hit_rate"] = e.plan->expert_cache.hit_rate;
    }
    return j;
}

// The GPU level of the expert cache while generating: its hit rate among the chosen experts
// that reach it (once per layer and token) and what loading it cost.
nlohmann::ordered_json vram_experts_json(const BenchEntry& e) {
    const VramExpertStats& v = *e.result.vram_experts;
    const double tokens = double(e.result.gen_tokens) * double(e.result.reps.size());
    nlohmann::ordered_json j = {
        {"requests", v.requests},
        {"hits", v.hits},
        {"hit_rate", ratio(double(v.hits), double(v.requests))},
        {"loads", v.loads},
        {"loads_per_token", ratio(double(v.loads), tokens)},
        {"load_bytes_per_token", ratio(double(v.load_bytes), tokens)},
        {"prefetches_per_token", ratio(double(v.prefetches), tokens)},
        {"prefetch_bytes_per_token", ratio(double(v.prefetch_bytes), tokens)},
        {"prefetch_hits", v.prefetch_hits},
        {"prefetch_accuracy", ratio(double(v.prefetch_hits), double(v.prefetches))}};
    if (e.plan) {
        j["entries"] = e.plan->gpu_memory.expert_entries;
        j["predicted_hit_rate"] = e.plan->gpu_memory.expert_hit_rate;
    }
    return j;
}

}  // namespace

double kv_per_token(const BenchEntry& e) {
    const double tokens = double(e.result.gen_tokens) * double(e.result.reps.size());
    return tokens > 0 ? e.result.gen_ops[size_t(engine::Op::Attention)].bytes / tokens : 0;
}

// The plan counts the weights a token reads, not the KV cache, which a long context makes a
// large share (a 1B model at 4k positions: 134 MB against 800 MB of weights). So the limit a
// run is held to adds the KV bytes its tokens read, at the bandwidth of the tier that holds
// most of the attention's weights (the GPU's for a plan on it, RAM's otherwise).
std::optional<double> limit_at_context(const BenchEntry& e) {
    if (!e.plan || e.plan->tokens_per_second <= 0) return std::nullopt;
    const Plan& p = *e.plan;
    const bool on_gpu = p.gpu_device >= 0 && p.traffic(Tier::Gpu).bytes_per_token >=
                                                 p.traffic(Tier::Ram).bytes_per_token;
    const double bw = p.traffic(on_gpu ? Tier::Gpu : Tier::Ram).bandwidth;
    const double kv_seconds = bw > 0 ? kv_per_token(e) / bw : 0;
    return 1.0 / (1.0 / p.tokens_per_second + kv_seconds);
}

std::optional<double> fraction_of_limit(const BenchEntry& e) {
    const auto limit = limit_at_context(e);
    if (!limit) return std::nullopt;
    return e.result.gen_tps.median / *limit;
}

std::string bench_table(const BenchRecord& r) {
    TextTable t({{"run"},
                 {"prompt tok/s", Align::Right},
                 {"gen tok/s", Align::Right},
                 {"min-max", Align::Right},
                 {"TTFT s", Align::Right},
                 {"memory/token", Align::Right},  // RAM, or VRAM for a plan on the GPU
                 {"KV/token", Align::Right},
                 {"disk/token", Align::Right},
                 {"disk GB/s", Align::Right},
                 {"limit tok/s", Align::Right},
                 {"of limit", Align::Right},
                 {"peak RSS", Align::Right}});
    for (const BenchEntry& e : r.entries) {
        const SpeedBenchResult& s = e.result;
        const double disk = disk_per_token(e);
        const auto frac = fraction_of_limit(e);
        const auto limit = limit_at_context(e);
        t.add_row({e.label + " (" + e.mode + ")", format_fixed(s.prompt_tps.median, 1),
                   format_fixed(s.gen_tps.median, 2),
                   format_fixed(s.gen_tps.min, 2) + "-" + format_fixed(s.gen_tps.max, 2),
                   format_fixed(s.first_token_seconds.median, 3),
                   per_token(std::max(0.0, s.weight_bytes_per_token - disk)),
                   per_token(kv_per_token(e)), per_token(disk), format_fixed(s.disk_gbps, 2),
                   limit ? format_fixed(*limit, 2) : "-",
                   frac ? format_fixed(100 * *frac, 0) + "%" : "-",
                   e.peak_rss ? format_bytes(*e.peak_rss) : "?"});
    }
    std::string out = t.render();
    TextTable x({{"experts"},
                 {"hit rate", Align::Right},
                 {"predicted", Align::Right},
                 {"selected/token", Align::Right},
                 {"disk/token", Align::Right},
                 {"predicted disk", Align::Right},
                 {"I/O saved", Align::Right},
                 {"prefetched", Align::Right},
                 {"prefetch accuracy", Align::Right}});
    for (const BenchEntry& e : r.entries) {
        if (!e.result.experts) continue;
        const auto j = experts_json(e);
        const auto pct = [](double v) { return format_fixed(100 * v, 1) + "%"; };
        x.add_row({e.label + " (" + e.mode + ")", pct(j["hit_rate"]),
                   e.plan ? pct(e.plan->expert_cache.hit_rate) : "-",
                   per_token(j["selected_bytes_per_token"]), per_token(j["disk_bytes_per_token"]),
                   e.plan ? per_token(j["predicted_disk_bytes_per_token"]) : "-",
                   pct(j["io_saved_fraction"]), format_count(e.result.experts->prefetches),
                   pct(j["prefetch_accuracy"])});
    }
    if (x.rows() > 0) out += "\n" + x.render();
    TextTable g({{"GPU expert cache"},
                 {"entries", Align::Right},
                 {"hit rate", Align::Right},
                 {"predicted", Align::Right},
                 {"loads/token", Align::Right},
                 {"loaded/token", Align::Right},
                 {"guessed/token", Align::Right},
                 {"guess accuracy", Align::Right}});
    for (const BenchEntry& e : r.entries) {
        if (!e.result.vram_experts) continue;
        const auto j = vram_experts_json(e);
        const auto pct = [](double v) { return format_fixed(100 * v, 1) + "%"; };
        g.add_row({e.label + " (" + e.mode + ")",
                   e.plan ? format_count(e.plan->gpu_memory.expert_entries) : "-",
                   pct(j["hit_rate"]), e.plan ? pct(e.plan->gpu_memory.expert_hit_rate) : "-",
                   format_fixed(j["loads_per_token"], 2), per_token(j["load_bytes_per_token"]),
                   format_fixed(j["prefetches_per_token"], 2), pct(j["prefetch_accuracy"])});
    }
    if (g.rows() > 0) out += "\n" + g.render();
    return out;
}

namespace {
// The read bandwidth the plan measured for the memory its weights are in.
double weights_bandwidth(const Plan& p) {
    return p.traffic(p.gpu_resident() ? Tier::Gpu : Tier::Ram).bandwidth;
}

double total_seconds(const engine::OpTable& ops) {
    double s = 0;
    for (const engine::OpFigures& o : ops) s += o.seconds;
    return s;
}
}  // namespace

std::string operator_table(const BenchRecord& r) {
    std::string out;
    for (const BenchEntry& e : r.entries) {
        if (!e.plan) continue;
        if (e.plan->gpu_device >= 0) {
            // The host only queues a GPU's work: its times would say where the host waited.
            out +=
                "operators: on the GPU they run asynchronously; STRATA_CUDA_PROFILE=1 times "
                "each on the device\n";
            if (!e.result.reps.empty() && e.result.reps.front().prompt_shipped_bytes > 0) {
                const SpeedRep& rep = e.result.reps.front();
                out +=
                    "prompt: " + format_bytes(rep.prompt_shipped_bytes) +
                    " of weights shipped from RAM to the GPU (" +
                    format_fixed(double(rep.prompt_shipped_bytes) / rep.prompt_seconds / 1e9, 1) +
                    " GB/s of the prompt's time)";
                const double limit = e.plan->prompt_tokens_per_second;
                if (limit > 0) {
                    const double got = e.result.prompt_tps.median;
                    out += "; prompt " + format_fixed(got, 1) + " tok/s, " +
                           format_fixed(100 * got / limit, 0) + "% of the plan's limit from " +
                           (e.plan->prompt_bound == Tier::Disk ? "the disk" : "the bus") + " (" +
                           format_fixed(limit, 1) + ")";
                }
                out += "\n";
            }
            continue;
        }
        const SpeedBenchResult& s = e.result;
        const double reps = double(std::max<size_t>(1, s.reps.size()));
        const double gen_tokens = double(s.gen_tokens) * reps;
        const double prompt_total = total_seconds(s.prompt_ops);
        const double ceiling = weights_bandwidth(*e.plan);
        TextTable t({{"operator (" + e.label + ", " + std::to_string(r.threads) + " threads)"},
                     {"prompt share", Align::Right},
                     {"GFLOP/s", Align::Right},
                     {"gen us/token", Align::Right},
                     {"GB/s", Align::Right},
                     {"of " + format_fixed(ceiling / 1e9, 1) + " GB/s", Align::Right}});
        for (size_t op = 0; op < s.gen_ops.size(); ++op) {
            const engine::OpFigures& p = s.prompt_ops[op];
            const engine::OpFigures& g = s.gen_ops[op];
            if (p.seconds == 0 && g.seconds == 0) continue;
            const double gbps = g.seconds > 0 ? g.bytes / g.seconds / 1e9 : 0;
            t.add_row(
                {engine::op_name(engine::Op(op)),
                 prompt_total > 0 ? format_fixed(100 * p.seconds / prompt_total, 1) + "%" : "-",
                 p.seconds > 0 && p.flops > 0 ? format_fixed(p.flops / p.seconds / 1e9, 1) : "-",
                 gen_tokens > 0 ? format_fixed(1e6 * g.seconds / gen_tokens, 1) : "-",
                 g.bytes > 0 ? format_fixed(gbps, 2) : "-",
                 g.bytes > 0 && ceiling > 0 ? format_fixed(100 * gbps * 1e9 / ceiling, 0) + "%"
                                            : "-"});
        }
        out += t.render();
    }
    return out;
}

nlohmann::ordered_json tuning_json(const Tuning& t) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const TuningEntry& e : tuning_entries(t)) j[std::string(e.key)] = e.value;
    return j;
}

const CpuKernelTable* planned_cpu_kernels(const BenchRecord& r) {
    for (const BenchEntry& e : r.entries) {
        if (e.plan) return &e.plan->cpu_kernels;
    }
    return nullptr;
}

std::string cpu_kernels_text(const BenchRecord& r) {
    if (r.tuning.cpu_path != CpuPathChoice::Best) {
        const std::string path(tuning_name(r.tuning.cpu_path));
        return "cpu kernels: " + path + " for every product (--tune cpu_path=" + path + ")\n";
    }
    const CpuKernelTable* k = planned_cpu_kernels(r);
    if (!k || k->empty()) {
        const std::string widest = !k || k->widest == CpuPathChoice::Best
                                       ? std::string("the widest path the CPU runs")
                                       : std::string(tuning_name(k->widest));
        return "cpu kernels: " + widest + " for every product (no measured table)\n";
    }
    return "cpu kernels (measured)\n" + kernel_table_text(*k, "  ");
}

// What the CPU products took: the forced path (null when none) and the measured table of the
// model's weight types.
nlohmann::ordered_json cpu_kernels_json(const BenchRecord& r) {
    nlohmann::ordered_json j;
    j["forced"] = r.tuning.cpu_path == CpuPathChoice::Best
                      ? nlohmann::ordered_json(nullptr)
                      : nlohmann::ordered_json(std::string(tuning_name(r.tuning.cpu_path)));
    const CpuKernelTable* k = planned_cpu_kernels(r);
    j["table"] =
        k ? nlohmann::ordered_json(kernel_table_json(*k)) : nlohmann::ordered_json(nullptr);
    return j;
}

nlohmann::ordered_json bench_json(const BenchRecord& r) {
    nlohmann::ordered_json j;
    j["date"] = r.date;
    j["model"] = r.model;
    j["file_bytes"] = r.file_bytes;
    j["threads"] = r.threads;
    j["prompt_tokens"] = r.prompt_tokens;
    j["gen_tokens"] = r.gen_tokens;
    j["depth"] = r.depth;
    j["reps"] = r.reps;
    j["tuning"] = tuning_json(r.tuning);
    j["cpu_kernels"] = cpu_kernels_json(r);
    j["runs"] = nlohmann::ordered_json::array();
    for (const BenchEntry& e : r.entries) {
        const SpeedBenchResult& s = e.result;
        nlohmann::ordered_json x;
        x["label"] = e.label;
        x["mode"] = e.mode;
        if (e.plan) x["plan"] = plan_json_summary(*e.plan);
        x["load_seconds"] = e.load_seconds;
        x["prompt_tokens_per_second"] = spread_json(s.prompt_tps);
        x["gen_tokens_per_second"] = spread_json(s.gen_tps);
        x["first_token_seconds"] = spread_json(s.first_token_seconds);
        x["bytes_per_token"] = {
            {"weights", s.weight_bytes_per_token},
            {"disk_store", s.store_disk_bytes_per_token},
            {"disk_process_io", s.io_bytes_per_token},
            {"ram", std::max(0.0, s.weight_bytes_per_token - disk_per_token(e))},
            {"kv_cache", kv_per_token(e)}};
        x["disk_gb_per_second"] = s.disk_gbps;
        x["io_counted"] = s.io_counted;
        if (auto l = limit_at_context(e)) x["tokens_per_second_limit_at_context"] = *l;
        if (auto f = fraction_of_limit(e)) x["fraction_of_limit"] = *f;
        if (e.peak_rss) x["peak_rss_bytes"] = *e.peak_rss;
        if (e.result.experts) x["experts"] = experts_json(e);
        if (e.result.vram_experts) x["gpu_expert_cache"] = vram_experts_json(e);
        nlohmann::ordered_json ops = nlohmann::ordered_json::array();
        for (size_t op = 0; op < s.gen_ops.size(); ++op) {
            const auto figures = [](const engine::OpFigures& f) {
                return nlohmann::ordered_json{
                    {"seconds", f.seconds}, {"bytes", f.bytes}, {"flops", f.flops}};
            };
            ops.push_back({{"operator", engine::op_name(engine::Op(op))},
                           {"prompt", figures(s.prompt_ops[op])},
                           {"generation", figures(s.gen_ops[op])}});
        }
        x["operators"] = ops;  // summed over the repetitions
        if (!e.memory_cap.empty()) {
            x["memory_cap"] = e.memory_cap;
            x["memory_cap_peak_bytes"] = e.cap_peak;
        }
        nlohmann::ordered_json reps = nlohmann::ordered_json::array();
        for (const SpeedRep& p : s.reps) {
            reps.push_back({{"prompt_seconds", p.prompt_seconds},
                            {"first_token_seconds", p.first_token_seconds},
                            {"gen_seconds", p.gen_seconds},
                            {"gen_weight_bytes", p.gen_weight_bytes},
                            {"gen_store_disk_bytes", p.gen_store_disk_bytes},
                            {"gen_io_bytes", p.gen_io_bytes},
                            {"io_bytes", p.io_bytes},
                            {"stall_seconds", p.stall_seconds}});
        }
        x["reps"] = reps;
        j["runs"].push_back(x);
    }
    return j;
}

Result<void> append_bench_json(const std::string& path, const nlohmann::ordered_json& record) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    std::ofstream out(path, std::ios::app);
    if (out) {
        out << record.dump() << "\n";
        out.flush();
    }
    if (!out) return err("cannot append to " + path + ": " + std::strerror(errno));
    return {};
}

}  // namespace strata::cli
