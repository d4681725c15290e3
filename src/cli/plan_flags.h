// The flags of every command that makes a placement plan (inspect, run, perplexity, bench,
// serve): the budgets (--ram, --gpu-mem), what the KV cache is sized for (--ctx, --kv-type) and
// the choices experiments force (--mode, --slots, --lookahead); and making the plan from them
// with the cached hardware profile (measured on first use, for the disk holding the model).
// Every command parses them here, so the plan a command prints is the one it runs with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/model_info.h"
#include "plan/plan.h"
#include "util/result.h"

namespace strata::cli {

struct PlanFlags {
    std::optional<std::string> ram, gpu_mem, mode, kv_type;
    uint32_t ctx = 0;
    std::optional<uint32_t> slots, lookahead;

    bool given() const { return ram || gpu_mem || mode || kv_type || ctx || slots || lookahead; }
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
// several models, an error names the model it is about.
Result<std::vector<Plan>> plan_models(const std::vector<PlanTarget>& models,
                                      const PlanFlags& flags);

// The plan for one runnable model at `model_path`: plan_models of it alone.
Result<Plan> plan_for_model(const ModelInfo& info, const std::string& model_path,
                            const PlanFlags& flags);

// A model's description and the plan it runs with, made before any weight is read so that the
// front end can show the plan, then load the model with both (LoadedModel::load).
struct PlannedModel {
    ModelInfo info;
    Plan plan;
};

// Reads the model's description (failing for a file strata cannot run) and plans it.
Result<PlannedModel> plan_model(const std::string& model_path, const PlanFlags& flags);

// One line on stderr about a plan that streams (what, through how much memory, and the speed
// limit it implies); nothing for a resident one.
void describe_plan(const Plan& plan);

}  // namespace strata::cli
