#include "runtime/loaded_model.h"

#include <chrono>

#include "gguf/reader.h"
#include "profile/profile.h"
#include "runtime/backend_factory.h"
#include "util/clock.h"

namespace strata {

Result<std::unique_ptr<LoadedModel>> LoadedModel::load(const std::string& path,
                                                       const ModelLoadOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    STRATA_ASSIGN(GgufFile file, read_gguf(path));
    STRATA_ASSIGN(ModelInfo info, load_model_info(std::move(file)));
    const double read_seconds = seconds_since(t0);
    STRATA_ASSIGN(std::unique_ptr<LoadedModel> m, load(std::move(info), std::nullopt, options));
    m->load_seconds += read_seconds;
    return m;
}

Result<ModelDescription> ModelDescription::read(const std::string& path) {
    STRATA_ASSIGN(GgufFile file, read_gguf(path));
    STRATA_ASSIGN(ModelInfo info, load_model_info(std::move(file)));
    return from(std::move(info));
}

Result<ModelDescription> ModelDescription::from(ModelInfo info) {
    if (!info.runnable() || !info.hparams) {
        return err(info.file.path, ": strata cannot run this model",
                   info.problems.empty() ? "" : ": " + info.problems.front());
    }
    STRATA_ASSIGN(Tokenizer tokenizer, Tokenizer::from_gguf(info.file));
    return ModelDescription{std::move(info), std::move(tokenizer)};
}

Result<std::unique_ptr<LoadedModel>> LoadedModel::load(ModelInfo info, std::optional<Plan> plan,
                                                       const ModelLoadOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    STRATA_ASSIGN(ModelDescription d, ModelDescription::from(std::move(info)));
    const double tokenizer_seconds = seconds_since(t0);
    STRATA_ASSIGN(std::unique_ptr<LoadedModel> m, load(std::move(d), std::move(plan), options));
    m->load_seconds += tokenizer_seconds;
    return m;
}

Result<std::unique_ptr<LoadedModel>> LoadedModel::load(ModelDescription d, std::optional<Plan> plan,
                                                       const ModelLoadOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    ResidentLoadOptions ro;
    ro.progress = options.progress;
    auto m = std::make_unique<LoadedModel>(LoadedModel{
        std::move(d.info), std::move(d.tokenizer), nullptr, nullptr, std::nullopt, {}, 0, 0});
    engine::EngineOptions engine_options = options.engine;
    StoreLayout layout = options.layout.value_or(resident_layout(m->info));
    if (plan && !options.mapped) {
        layout = store_layout(m->info, *plan);
        engine_options.n_ctx = plan->n_ctx;
        engine_options.n_seq = plan->n_seq;
        engine_options.kv_type = plan->kv_type;
        if (plan->batch) engine_options.max_batch = plan->batch;
        if (plan->threads) engine_options.threads = plan->threads;
        engine_options.execution = execution_table(*plan, m->info);
        engine_options.cpu_kernels = plan->cpu_kernels;
        m->plan = std::move(plan);
    }
    if (options.mapped) layout = mapped_layout(m->info);
    if (!m->plan && !options.mapped && options.gpu >= 0) {
        layout.arena_place = MemoryPlace{MemoryKind::Device, options.gpu};
        engine_options.execution = ExecutionTable::on_one(
            ComputeUnit{ComputeUnit::Kind::Gpu, options.gpu}, m->info.hparams->n_layer);
    }
    if (layout.any(Residence::ExpertCache)) {
        ExpertCacheConfig& experts = layout.experts;
        experts.prefetch = options.expert_prefetch;
        const ModelHparams& hp = *m->info.hparams;
        experts.policy = options.expert_policy.value_or(
            default_cache_policy(experts.cache_entries, uint64_t(hp.n_layer) * hp.n_expert_used));
        if (options.expert_statistics) {
            if (auto dir = profile_cache_dir()) {
                experts.stats_path = expert_statistics_path(*dir, m->info);
            }
        }
    } else if (options.expert_statistics && m->info.hparams && m->info.hparams->is_moe()) {
        // Kept by the store itself: the router's choices of resident runs teach plans too.
        if (auto dir = profile_cache_dir()) {
            layout.experts.stats_path = expert_statistics_path(*dir, m->info);
        }
    }
    STRATA_ASSIGN(auto store, ModelStore::open(m->info, layout, ro));
    m->loaded_bytes = store->resident_bytes();
    m->warnings = store->report().warnings;
    m->store = std::move(store);
    STRATA_ASSIGN(m->engine, engine::Engine::create(*m->info.hparams, *m->store, engine_options,
                                                    make_backend));
    m->load_seconds = seconds_since(t0);
    return m;
}

}  // namespace strata
