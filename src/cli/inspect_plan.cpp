// Flags and profile loading for the plan `strata inspect` prints (see inspect_plan.h).
#include "cli/inspect_plan.h"

#include <cstdio>
#include <filesystem>

#include "plan/budget.h"
#include "profile/profile.h"
#include "profile/system_memory.h"

namespace strata::cli {

void add_plan_flags(CLI::App& cmd, PlanFlags& f) {
    cmd.add_option("--ram", f.ram, "RAM budget for the plan, e.g. 8G (default: available - 4 GiB)");
    cmd.add_option("--gpu-mem", f.gpu_mem,
                   "GPU memory budget, e.g. 20G (default: free minus max(1 GiB, 5%))");
    cmd.add_option("--ctx,-c", f.ctx,
                   "Context size the KV cache is planned for (default: the model's, at most 4096)");
    cmd.add_option("--mode", f.mode, "Force a mode: resident, ffn-stream or expert-stream");
    cmd.add_option("--slots", f.slots, "Force the number of streaming slots (experiments)");
    cmd.add_option("--lookahead", f.lookahead, "Force the prefetch lookahead (experiments)");
}

Result<Plan> plan_for_model(const ModelInfo& info, const std::string& model_path,
                            const PlanFlags& flags) {
    PlanOptions options;
    options.n_ctx = flags.ctx;
    options.slots = flags.slots;
    options.lookahead = flags.lookahead;
    if (flags.mode) {
        auto mode = parse_plan_mode(*flags.mode);
        if (!mode) return err("--mode: ", mode.error().message);
        options.mode = *mode;
    }

    ProfileRequest request;
    const std::filesystem::path dir = std::filesystem::path(model_path).parent_path();
    request.model_dir = dir.empty() ? "." : dir.string();
    STRATA_ASSIGN(LoadedProfile loaded, load_or_measure_profile(request));
    for (const std::string& n : loaded.notes) std::fprintf(stderr, "strata: note: %s\n", n.c_str());
    options.disk = loaded.disk;

    // The profile's available RAM is a snapshot from when it was measured; the default budget
    // follows what is available now.
    HardwareProfile& profile = loaded.profile;
    if (!flags.ram) {
        if (auto now = detect_system_memory()) profile.memory.available = now->available;
    }
    STRATA_ASSIGN(Budgets budgets, resolve_budgets(profile, flags.ram, flags.gpu_mem));
    for (const std::string& w : budgets.warnings) {
        std::fprintf(stderr, "strata: warning: %s\n", w.c_str());
    }
    return make_plan(info, profile, budgets, options);
}

}  // namespace strata::cli
