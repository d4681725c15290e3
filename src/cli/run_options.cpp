#include "cli/run_options.h"

#include <cstdio>
#include <string>

#include "backend/tuning.h"

namespace strata::cli {

namespace {

// --tune's help: every key with the values it takes, its default and what it does.
std::string tune_help() {
    std::string help =
        "Performance setting (repeatable; the defaults are the measured best, the others are for "
        "comparisons). Keys, their values and [defaults]:";
    for (const TuningEntry& e : tuning_entries(Tuning{})) {
        help += "\n  " + std::string(e.key) + "=" + std::string(e.values) + " [" + e.value +
                "]: " + std::string(e.about);
    }
    return help;
}

}  // namespace

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
    cmd.add_option("--dump", f.dump_dir,
                   "Write named per-layer activations to this directory (also STRATA_DUMP)")
        ->envname("STRATA_DUMP");
    add_plan_flags(cmd, f.plan);
    cmd.add_flag("--no-prefetch", f.no_prefetch,
                 "Expert-stream: read only the experts the router picked, no guesses");
    cmd.add_option("--gpu-expert-prefetch", f.gpu_expert_prefetch,
                   "GPU expert cache: copy up to N guesses of the next layer's experts ahead "
                   "while each layer computes (0: none; --tune gpu_expert_prefetch=N, default " +
                       std::to_string(Tuning{}.gpu_expert_prefetch) + ")");
    cmd.add_option("--tune", f.tune, tune_help())->type_name("KEY=VALUE");
    cmd.add_option("--cache-policy", f.cache_policy,
                   "Expert-stream cache eviction: auto (LRU for a cache larger than one token's "
                   "experts, LFU otherwise), lru or lfu")
        ->capture_default_str();
    cmd.add_option("--routing-trace", f.routing_trace,
                   "Benchmarks: replay this MoE routing trace instead of the router's choices "
                   "(the text is then not the model's)");
}

void print_load_warnings(const LoadedModel& m) {
    for (const std::string& w : m.warnings)
        std::fprintf(stderr, "strata: warning: %s\n", w.c_str());
}

Result<ModelLoadOptions> model_load_options(const EngineFlags& f, bool progress) {
    ModelLoadOptions o;
    o.progress = progress;
    STRATA_ASSIGN(const PlanOptions po, plan_options(f.plan));
    o.engine.threads = po.threads;
    o.engine.max_batch = po.max_batch;
    o.engine.n_ctx = po.n_ctx;
    o.engine.kv_type = po.kv_type;
    o.engine.dump_dir = f.dump_dir;
    if (f.cache_policy != "auto") {
        auto policy = parse_cache_policy(f.cache_policy);
        if (!policy) return err("--cache-policy: " + policy.error().message);
        o.expert_policy = *policy;
    }
    o.expert_prefetch = !f.no_prefetch;
    for (const std::string& setting : f.tune) {
        if (auto r = set_tuning(o.engine.tuning, setting); !r) {
            return err("--tune: " + r.error().message);
        }
    }
    if (f.gpu_expert_prefetch) o.engine.tuning.gpu_expert_prefetch = *f.gpu_expert_prefetch;
    if (!f.routing_trace.empty()) {
        auto trace = engine::RoutingTrace::load(f.routing_trace);
        if (!trace) return err("--routing-trace: " + trace.error().message);
        o.engine.forced_routing = std::make_shared<const engine::RoutingTrace>(std::move(*trace));
    }
    return o;
}

void add_sampling_flags(CLI::App& cmd, SamplerParams& p) {
    cmd.add_option("--temperature,--temp", p.temperature, "Sampling temperature; 0 is greedy")
        ->capture_default_str();
    cmd.add_option("--top-k", p.top_k, "Keep the k most likely tokens; 0 is off")
        ->capture_default_str();
    cmd.add_option("--top-p", p.top_p, "Keep the most likely tokens up to this probability mass")
        ->capture_default_str();
    cmd.add_option("--min-p", p.min_p, "Drop tokens below this fraction of the top probability")
        ->capture_default_str();
    cmd.add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens; 1 is off")
        ->capture_default_str();
    cmd.add_option("--presence-penalty", p.presence_penalty, "Subtracted once per repeated token")
        ->capture_default_str();
    cmd.add_option("--frequency-penalty", p.frequency_penalty,
                   "Subtracted per occurrence of a repeated token")
        ->capture_default_str();
    cmd.add_option("--repeat-last-n", p.penalty_last_n,
                   "Tokens the penalties look back over; -1 the whole context")
        ->capture_default_str();
    cmd.add_option("--seed", p.seed, "Random seed (the same seed repeats the same answer)");
}

void fail(const std::string& message) {
    std::fprintf(stderr, "strata: %s\n", message.c_str());
    throw CLI::RuntimeError(1);
}

}  // namespace strata::cli
