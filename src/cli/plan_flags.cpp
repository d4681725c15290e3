// The plan flags and making the plan from them (see plan_flags.h).
#include "cli/plan_flags.h"

#include <cstdio>
#include <filesystem>

#include "gguf/reader.h"
#include "plan/budget.h"
#include "profile/profile.h"
#include "profile/system_memory.h"
#include "store/coactivation.h"
#include "util/allocator.h"
#include "util/process_stats.h"
#include "util/units.h"

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
    cmd.add_option("--gpu-split", f.gpu_split,
                   "Force how a model larger than the GPU budget shares it with the CPU: layers "
                   "(the last layers on the GPU) or experts (MoE: the routed experts in RAM on "
                   "the CPU) (experiments)");
    cmd.add_option("--gpu-expert-cache", f.gpu_expert_cache,
                   "GPU memory for the most used routed experts of a model whose experts the CPU "
                   "computes, taken before whole layers of experts, e.g. 2G; 0: none (default: "
                   "what whole layers leave)");
    cmd.add_flag("--no-prompt-shipping", f.no_prompt_shipping,
                 "Reserve no GPU memory for shipping a split's RAM weights to the GPU for prompt "
                 "batches: prompts compute the CPU's part on the CPU, and the memory goes to the "
                 "GPU's layers or expert cache (comparisons)");
    cmd.add_option("--threads,-t", f.threads, "Compute threads (default: physical cores)");
    cmd.add_option("--batch", f.batch, "Prompt tokens evaluated together (default 512)");
}

Result<PlanOptions> plan_options(const PlanFlags& flags) {
    PlanOptions options;
    options.n_ctx = flags.ctx;
    options.slots = flags.slots;
    options.lookahead = flags.lookahead;
    if (flags.batch == 0) return err("--batch must be at least 1");
    if (flags.threads < 0) return err("--threads must not be negative");
    options.max_batch = flags.batch;
    options.threads = flags.threads;
    options.logit_rows = flags.logit_rows;
    options.embeddings = flags.embeddings;
    options.n_seq = flags.n_seq;
    options.prompt_shipping = !flags.no_prompt_shipping;
    if (flags.mode) {
        auto mode = parse_plan_mode(*flags.mode);
        if (!mode) return err("--mode: ", mode.error().message);
        options.mode = *mode;
    }
    if (flags.gpu_split) {
        auto split = parse_gpu_split(*flags.gpu_split);
        if (!split) return err("--gpu-split: ", split.error().message);
        options.gpu_split = *split;
    }
    if (flags.gpu_expert_cache) {
        auto bytes = parse_size(*flags.gpu_expert_cache);
        if (!bytes) return err("--gpu-expert-cache: ", bytes.error().message);
        options.gpu_expert_cache = *bytes;
    }
    if (flags.kv_type) {
        auto kv = parse_kv_type(*flags.kv_type);
        if (!kv) return err("--kv-type: ", kv.error().message);
        options.kv_type = *kv;
    }
    return options;
}

namespace {

// The profile whose disks include the one holding `model_path`, and that disk's index.
Result<LoadedProfile> profile_for(const std::string& model_path, const PlanFlags& flags) {
    if (flags.profile) {
        // Another machine's: its disks were measured there, the first one is taken for the
        // model's.
        LoadedProfile loaded;
        STRATA_ASSIGN(loaded.profile, load_profile(*flags.profile));
        loaded.cache_path = *flags.profile;
        if (!loaded.profile.disks.empty()) loaded.disk = 0;
        return loaded;
    }
    ProfileRequest request;
    const std::filesystem::path dir = std::filesystem::path(model_path).parent_path();
    request.model_dir = dir.empty() ? "." : dir.string();
    STRATA_ASSIGN(LoadedProfile loaded, load_or_measure_profile(request));
    for (const std::string& n : loaded.notes) std::fprintf(stderr, "strata: note: %s\n", n.c_str());
    return loaded;
}

Result<Budgets> budgets_for(HardwareProfile profile, const PlanFlags& flags) {
    // The profile's available RAM is a snapshot from when it was measured; the default budget
    // follows what is available now (on this machine: another machine's profile keeps its own).
    if (!flags.ram && !flags.profile) {
        if (auto now = detect_system_memory()) profile.memory.available = now->available;
    }
    STRATA_ASSIGN(Budgets budgets, resolve_budgets(profile, flags.ram, flags.gpu_mem));
    for (const std::string& w : budgets.warnings) {
        std::fprintf(stderr, "strata: warning: %s\n", w.c_str());
    }
    return budgets;
}

// How often earlier runs chose each routed expert (the expert cache's statistics of this file,
// store/coactivation.h), for the plan's hit-rate predictions; empty when none were kept.
std::vector<uint32_t> earlier_expert_counts(const ModelInfo& info) {
    if (!info.hparams || !info.hparams->is_moe()) return {};
    const auto dir = profile_cache_dir();
    if (!dir) return {};
    const std::string path = expert_statistics_path(*dir, info);
    if (!std::filesystem::exists(path)) return {};
    const ModelHparams& hp = *info.hparams;
    CoactivationStats stats;
    stats.reset(int(hp.n_layer), int(hp.n_expert));
    if (!stats.load(path, model_identity(info))) return {};
    std::vector<uint32_t> counts(size_t(hp.n_layer) * hp.n_expert);
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        for (uint32_t e = 0; e < hp.n_expert; ++e) {
            counts[size_t(l) * hp.n_expert + e] = stats.frequency(int(l), int(e));
        }
    }
    return counts;
}

}  // namespace

Result<std::vector<Plan>> plan_models(const std::vector<PlanTarget>& models, const PlanFlags& flags,
                                      std::optional<uint64_t> baseline) {
    STRATA_ASSIGN(PlanOptions options, plan_options(flags));
    options.baseline = baseline;
    std::optional<Budgets> budgets;
    std::vector<Plan> plans;
    for (const PlanTarget& m : models) {
        STRATA_ASSIGN(const LoadedProfile loaded, profile_for(m.path, flags));
        // Resolved once: models loaded side by side share the same budget, not whatever RAM is
        // left when each one is planned.
        if (!budgets) {
            STRATA_ASSIGN(budgets, budgets_for(loaded.profile, flags));
        }
        PlanOptions o = options;
        o.disk = loaded.disk;
        o.expert_counts = earlier_expert_counts(m.info);
        if (m.n_ctx) o.n_ctx = m.n_ctx;
        auto plan = make_plan(m.info, loaded.profile, *budgets, o);
        if (!plan) {
            if (models.size() == 1) return plan.take_error();
            return err(m.path, ": ", plan.error().message);
        }
        plans.push_back(std::move(*plan));
    }
    return plans;
}

std::optional<uint64_t> measure_baseline() {
    release_free_memory();
    return current_rss_bytes();
}

Result<Plan> plan_for_model(const ModelInfo& info, const std::string& model_path,
                            const PlanFlags& flags, std::optional<uint64_t> baseline) {
    STRATA_ASSIGN(std::vector<Plan> plans, plan_models({{info, model_path}}, flags, baseline));
    return std::move(plans.front());
}

Result<PlannedModel> plan_model(const std::string& model_path, const PlanFlags& flags) {
    STRATA_ASSIGN(ModelDescription model, ModelDescription::read(model_path));
    STRATA_ASSIGN(Plan plan, plan_for_model(model.info, model_path, flags, measure_baseline()));
    say_where_it_runs(plan);
    return PlannedModel{std::move(model), std::move(plan)};
}

void say_where_it_runs(const Plan& plan) {
    if (plan.gpu_split()) {
        std::fprintf(stderr,
                     "strata: running on GPU %d and the CPU: %u of %zu layers on the GPU, the "
                     "routed experts of %u of them on the CPU%s\n",
                     plan.gpu_device, plan.gpu_layers, plan.layers.size(), plan.cpu_expert_layers,
                     plan.mode == PlanMode::ExpertStream ? ", read from disk" : "");
    } else if (!plan.gpu_resident()) {
        std::fprintf(stderr, "strata: running on the CPU: %s\n", plan.gpu_note.c_str());
    }
}

void describe_plan(const Plan& plan) {
    const std::string mode(plan_mode_name(plan.mode));
    const std::string bound(tier_name(plan.bound));
    const MemoryPlan& m = plan.memory;
    const std::string memory = format_bytes(m.total) + " of the " + format_bytes(m.budget) +
                               " budget (process " + format_bytes(m.baseline) +
                               (m.baseline_measured ? " measured" : " estimated") + ")";
    if (plan.gpu_device >= 0) {
        const GpuMemoryPlan& g = plan.gpu_memory;
        const std::string layers = plan.gpu_split()
                                       ? " (" + std::to_string(plan.gpu_layers) + " of " +
                                             std::to_string(plan.layers.size()) + " layers, " +
                                             std::to_string(plan.cpu_expert_layers) +
                                             " with their routed experts on the CPU)"
                                       : std::string();
        std::string staging =
            g.prompt_staging ? ", prompt staging " + format_bytes(g.prompt_staging) : std::string();
        if (plan.prompt_tokens_per_second > 0) {
            staging +=
                " (prompt limit " + format_fixed(plan.prompt_tokens_per_second, 0) + " tok/s)";
        }
        const std::string cache = plan.mode == PlanMode::ExpertStream
                                      ? "; experts read from disk through a cache of " +
                                            std::to_string(plan.expert_cache.capacity) + " experts"
                                      : std::string();
        std::fprintf(stderr,
                     "strata: plan: resident on GPU %d%s: weights %s, KV cache %s, buffers %s%s "
                     "of the %s GPU budget; RAM %s%s; limit %.2f tok/s (bound by %s)\n",
                     plan.gpu_device, layers.c_str(), format_bytes(g.weights).c_str(),
                     format_bytes(g.kv_cache).c_str(), format_bytes(g.activations).c_str(),
                     staging.c_str(), format_bytes(g.budget).c_str(), memory.c_str(), cache.c_str(),
                     plan.tokens_per_second, bound.c_str());
    } else if (plan.mode == PlanMode::ExpertStream) {
        std::fprintf(stderr,
                     "strata: plan: %s, expert cache of %llu experts (%s), %s, limit %.2f "
                     "tok/s (bound by %s)\n",
                     mode.c_str(), static_cast<unsigned long long>(plan.expert_cache.capacity),
                     format_bytes(plan.memory.expert_cache).c_str(), memory.c_str(),
                     plan.tokens_per_second, bound.c_str());
    } else if (plan.mode == PlanMode::FfnStream) {
        std::fprintf(stderr,
                     "strata: plan: %s, %u of %zu FFN layers streamed, %u slots, "
                     "lookahead %u, %s, limit %.2f tok/s (bound by %s)\n",
                     mode.c_str(), plan.stream.streamed_layers, plan.layers.size(),
                     plan.stream.slots, plan.stream.lookahead, memory.c_str(),
                     plan.tokens_per_second, bound.c_str());
    }
}

}  // namespace strata::cli
