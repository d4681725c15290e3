// The flags of every command that makes a placement plan (inspect, run, perplexity, bench,
// serve): the budgets (--ram, --gpu-mem), what the KV cache is sized for (--ctx, --kv-type), what
// the engine's activations are sized for (--batch, --threads) and the choices experiments force
// (--mode, --slots, --lookahead); and making the plan from them with the cached hardware profile
// (measured on first use, for the disk holding the model). Every command parses them here, so
// the plan a command prints is the one it runs with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/model_info.h"
#include "plan/plan.h"
#include "runtime/loaded_model.h"
#include "util/result.h"

namespace strata::cli {

struct PlanFlags {
    std::optional<std::string> ram, gpu_mem, mode, kv_type, gpu_split, gpu_expert_cache;
    uint32_t ctx = 0;
    std::optional<uint32_t> slots, lookahead;
    bool no_prompt_shipping = false;
    int threads = 0;
    uint32_t batch = 512;
    // Not flags: what the command hands out per evaluation (perplexity: a chunk's logits; serve:
    // a context's hidden states for embeddings), which the plan counts.
    uint32_t logit_rows = 1;
    bool embeddings = false;
    uint32_t n_seq = 1;  // serve: sequences decoded together (--parallel)
    // inspect --profile: plan for the machine this profile (`strata profile --json`) describes
    // instead of this one: its RAM, GPU and first disk, and its available RAM as the default.
    std::optional<std::string> profile;

    bool given() const {
        return ram || gpu_mem || mode || kv_type || gpu_split || gpu_expert_cache || ctx || slots ||
               lookahead || no_prompt_shipping || profile;
    }
};

void add_plan_flags(CLI::App& cmd, PlanFlags& flags);

// What the flags ask of the plan, without the disk (plan_for_model finds it). An error names the
// flag that is wrong.
Result<PlanOptions> plan_options(const PlanFlags& flags);

// A model to plan: its description, its file (whose disk the plan reads from) and the context its
// KV cache is sized for (0: --ctx).
struct PlanTarget {
    const ModelInfo& info;
    const std::string& path;
    uint32_t n_ctx = 0;
};

// The plans of models that share one RAM budget, in their order: the one place every command
// plans through. The hardware profile is loaded (measured on first use, each model's disk when it
// is new), the default budget follows the RAM available now, the budgets are resolved once, and
// each model is planned against the whole of them. Notes about the profile cache and warnings
// about the budgets go to stderr as "strata: note: ..." / "strata: warning: ..." lines. With
// several models, an error names the model it is about. `baseline`: the process as the front
// end measured it (measure_baseline), which every plan counts; unset: the plan estimates it.
Result<std::vector<Plan>> plan_models(const std::vector<PlanTarget>& models, const PlanFlags& flags,
                                      std::optional<uint64_t> baseline = std::nullopt);

// The process's resident memory now, after the allocator has returned its free pages: what the
// plan counts as the baseline when measured right before planning, with everything the process
// holds besides the weights and the engine (code, libraries, model descriptions, tokenizers).
std::optional<uint64_t> measure_baseline();

// The plan for one runnable model at `model_path`: plan_models of it alone.
Result<Plan> plan_for_model(const ModelInfo& info, const std::string& model_path,
                            const PlanFlags& flags,
                            std::optional<uint64_t> baseline = std::nullopt);

// A model's description, its tokenizer and the plan it runs with, made before any weight is read
// so that the front end can show the plan, then load the model with them (LoadedModel::load).
struct PlannedModel {
    ModelDescription model;
    Plan plan;
};

// Reads the model's description and builds its tokenizer (failing for a file strata cannot run),
// measures the process with them in memory, and plans it with that baseline.
Result<PlannedModel> plan_model(const std::string& model_path, const PlanFlags& flags);

// One line on stderr about a plan that streams (what, through how much memory, what it counts of
// the budget, and the speed limit it implies); nothing for a resident one.
void describe_plan(const Plan& plan);
// One line on stderr when the plan runs on the CPU, saying why no GPU is used ("no GPU (no
// NVIDIA driver is loaded)"); nothing when it runs on a GPU (describe_plan says so).
void say_where_it_runs(const Plan& plan);

}  // namespace strata::cli
