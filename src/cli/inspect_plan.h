// The placement plan in `strata inspect`: its flags (--ram, --gpu-mem, --ctx, --mode, --slots,
// --lookahead) and making the plan from the cached hardware profile (measured on first use, for
// the disk holding the model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "model/model_info.h"
#include "plan/plan.h"
#include "util/result.h"

namespace strata::cli {

struct PlanFlags {
    std::optional<std::string> ram, gpu_mem, mode;
    uint32_t ctx = 0;
    std::optional<uint32_t> slots, lookahead;

    bool given() const { return ram || gpu_mem || mode || ctx || slots || lookahead; }
};

void add_plan_flags(CLI::App& cmd, PlanFlags& flags);

// The plan for a runnable model at `model_path`. Notes about the profile cache and warnings about
// the budgets go to stderr as "strata: note: ..." / "strata: warning: ..." lines.
Result<Plan> plan_for_model(const ModelInfo& info, const std::string& model_path,
                            const PlanFlags& flags);

}  // namespace strata::cli
