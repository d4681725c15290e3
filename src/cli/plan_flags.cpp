// The plan flags and making the plan from them (see plan_flags.h).
#include "cli/plan_flags.h"

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
                   "Context size in tokens, which the KV cache is sized for (default: the "
                   "model's, at most 4096)");
    cmd.add_option("--kv-type", f.kv_type, "KV cache type: f16 (default) or q8_0 (half the size)");
    cmd.add_option("--mode", f.mode, "Force a mode: resident, ffn-stream or expert-stream");
    cmd.add_option("--slots", f.slots, "Force the number of streaming slots (experiments)");
    cmd.add_option("--lookahead", f.lookahead, "Force the prefetch lookahead (experiments)");
}

Result<PlanOptions> plan_options(const PlanFlags& flags) {
    PlanOptions options;
    options.n_ctx = flags.ctx;
    options.slots = flags.slots;
    options.lookahead = flags.lookahead;
    if (flags.mode) {
        auto mode = parse_plan_mode(*flags.mode);
        if (!mode) return err("--mode: ", mode.error().message);
        options.mode = *mode;
    }
    if (flags.kv_type) {
        auto kv = parse_kv_type(*flags.kv_type);
        if (!kv) return err("--kv-type: ", kv.error().message);
        options.kv_type = *kv;
    }
    return options;
}

Result<Plan> plan_for_model(const ModelInfo& info, const std::string& model_path,
                            const PlanFlags& flags) {
    STRATA_ASSIGN(PlanOptions options, plan_options(flags));

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
