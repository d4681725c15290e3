// Flags shared by the commands that run a model (run, perplexity, bench, serve): threads, batch,
// the plan's flags (plan_flags.h: budgets, context, KV cache type, forced choices), debug dump,
// expert-stream experiments, performance settings (--tune, backend/tuning.h), and the sampling
// flags.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/plan_flags.h"
#include "runtime/loaded_model.h"
#include "session/sampler.h"

namespace strata::cli {

struct EngineFlags {
    std::string dump_dir;
    PlanFlags plan;  // the engine's context, KV cache type, batch and threads are the plan's
    bool no_prefetch = false;       // expert-stream: no speculative reads
    std::vector<std::string> tune;  // --tune key=value, in order (backend/tuning.h)
    // --gpu-expert-prefetch N: the same as --tune gpu_expert_prefetch=N, applied after --tune.
    std::optional<uint32_t> gpu_expert_prefetch;
    std::string cache_policy = "auto";  // expert-stream: auto, lru or lfu
    std::string routing_trace;          // benchmarks: replay this routing (engine/routing_trace.h)
};

void add_engine_flags(CLI::App& cmd, EngineFlags& f);
// An error names the flag that is wrong (for --tune, also the keys or values it takes). The store
// follows the placement plan the model is loaded with (plan_model in plan_flags.h).
Result<ModelLoadOptions> model_load_options(const EngineFlags& f, bool progress);

void add_sampling_flags(CLI::App& cmd, SamplerParams& p);

// Prints the model's load warnings as "strata: warning: ..." lines.
void print_load_warnings(const LoadedModel& m);

// Prints "strata: <message>" on stderr and exits with status 1 (through CLI11).
[[noreturn]] void fail(const std::string& message);

}  // namespace strata::cli
