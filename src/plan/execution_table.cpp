#include "plan/execution_table.h"

#include <algorithm>

#include "model/model_info.h"
#include "plan/plan.h"

namespace strata {

const char* compute_unit_name(ComputeUnit::Kind kind) {
    return kind == ComputeUnit::Kind::Gpu ? "gpu" : "cpu";
}

ExecutionTable ExecutionTable::on_one(ComputeUnit unit, uint32_t n_layer) {
    ExecutionTable t;
    t.units = {unit};
    t.layers.assign(n_layer, LayerExecution{});
    return t;
}

ExecutionTable ExecutionTable::by_layer(std::vector<ComputeUnit> units,
                                        std::span<const int> assign) {
    ExecutionTable t;
    t.units = std::move(units);
    for (int u : assign) {
        LayerExecution l;
        l.unit = l.experts_unit = l.staged_on = uint8_t(std::clamp(u, 0, 255));
        t.layers.push_back(l);
    }
    if (!t.layers.empty()) {
        t.embedding_unit = t.layers.front().unit;
        t.head_unit = t.layers.back().unit;
    }
    return t;
}

Result<void> ExecutionTable::check(uint32_t n_layer) const {
    if (layers.size() != n_layer) {
        return err("the execution table names " + std::to_string(layers.size()) +
                   " layers, the model has " + std::to_string(n_layer));
    }
    if (units.empty()) return err("the execution table names no compute unit");
    const auto bad = [&](int u) { return u < 0 || size_t(u) >= units.size(); };
    const auto named = [&](int u) {
        return err("the execution table names compute unit " + std::to_string(u) + " of " +
                   std::to_string(units.size()));
    };
    for (const LayerExecution& l : layers) {
        for (int u : {int(l.unit), int(l.experts_unit), int(l.staged_on)}) {
            if (bad(u)) return named(u);
        }
    }
    for (int u : {int(embedding_unit), int(head_unit)}) {
        if (bad(u)) return named(u);
    }
    if (expert_level_unit >= 0 && bad(expert_level_unit)) return named(expert_level_unit);
    return {};
}

namespace {

// The tier of the first tensor of `role` outside the layers, if the model has one.
const TensorPlacement* placement_of(const Plan& plan, const ModelInfo& model, TensorRole role) {
    for (size_t i = 0; i < model.tensors.size() && i < plan.tensors.size(); ++i) {
        if (model.tensors[i].role == role && model.tensors[i].layer < 0) return &plan.tensors[i];
    }
    return nullptr;
}

}  // namespace

ExecutionTable execution_table(const Plan& plan, const ModelInfo& model) {
    const uint32_t n_layer = uint32_t(plan.layers.size());
    const ComputeUnit cpu{};
    if (plan.gpu_device < 0) return ExecutionTable::on_one(cpu, n_layer);
    ComputeUnit gpu{ComputeUnit::Kind::Gpu, plan.gpu_device};
    if (plan.gpu_resident()) return ExecutionTable::on_one(gpu, n_layer);

    // A split: the CPU is unit 0, the GPU unit 1.
    constexpr uint8_t kCpu = 0, kGpu = 1;
    gpu.staging_bytes = plan.gpu_memory.prompt_staging;
    gpu.expert_entries = plan.gpu_memory.expert_entries;
    gpu.expert_entry_bytes = plan.gpu_memory.expert_entry_bytes;
    ExecutionTable t;
    t.units = {cpu, gpu};
    const bool moe = model.hparams && model.hparams->is_moe();
    const ModelHparams hp = model.hparams ? *model.hparams : ModelHparams{};
    // The smallest batches whose crossing pays (ModelHparams::batch_ships_*).
    const uint32_t expert_batch = moe ? uint32_t((2 * int64_t(hp.n_expert) + hp.n_expert_used - 1) /
                                                 std::max<int64_t>(1, hp.n_expert_used))
                                      : 0;
    const uint32_t layer_batch = uint32_t(ModelHparams::kShippedLayerBatch);
    for (const LayerPlan& lp : plan.layers) {
        LayerExecution l;
        l.unit = lp.on_gpu ? kGpu : kCpu;
        l.experts_unit = lp.on_gpu && !lp.experts_on_cpu ? kGpu : kCpu;
        l.staged_on = kGpu;
        if (gpu.staging_bytes > 0) {
            if (moe && lp.on_gpu && lp.experts_on_cpu) {
                l.prompt = PromptStaging::Experts;
                l.prompt_min_tokens = expert_batch;
            } else if (!moe && !lp.on_gpu) {
                l.prompt = PromptStaging::Matrices;
                l.prompt_min_tokens = layer_batch;
            }
        }
        l.expert_level = gpu.expert_entries > 0 && lp.on_gpu && lp.experts_on_cpu;
        t.layers.push_back(l);
    }
    if (gpu.expert_entries > 0) t.expert_level_unit = kGpu;
    const auto unit_of = [&](TensorRole role, uint8_t fallback) -> uint8_t {
        const TensorPlacement* p = placement_of(plan, model, role);
        if (!p) return fallback;
        return p->tier == Tier::Gpu ? kGpu : kCpu;
    };
    t.embedding_unit = unit_of(TensorRole::TokenEmbedding, kCpu);
    const uint8_t last = t.layers.empty() ? kCpu : t.layers.back().unit;
    // The head is output.weight, or the embedding table when the output is tied to it.
    t.head_unit = placement_of(plan, model, TensorRole::Output)
                      ? unit_of(TensorRole::Output, last)
                      : unit_of(TensorRole::TokenEmbedding, last);
    return t;
}

nlohmann::json execution_table_json(const ExecutionTable& t) {
    nlohmann::json units = nlohmann::json::array(), layers = nlohmann::json::array();
    for (const ComputeUnit& u : t.units) {
        units.push_back({{"kind", compute_unit_name(u.kind)},
                         {"device", u.device},
                         {"staging_bytes", u.staging_bytes},
                         {"expert_entries", u.expert_entries},
                         {"expert_entry_bytes", u.expert_entry_bytes}});
    }
    for (const LayerExecution& l : t.layers) {
        const char* prompt = l.prompt == PromptStaging::Matrices  ? "matrices"
                             : l.prompt == PromptStaging::Experts ? "experts"
                                                                  : "none";
        layers.push_back({{"unit", l.unit},
                          {"experts_unit", l.experts_unit},
                          {"prompt", prompt},
                          {"staged_on", l.staged_on},
                          {"prompt_min_tokens", l.prompt_min_tokens},
                          {"expert_level", l.expert_level}});
    }
    return {{"units", units},
            {"embedding_unit", t.embedding_unit},
            {"head_unit", t.head_unit},
            {"expert_level_unit", t.expert_level_unit},
            {"layers", layers}};
}

}  // namespace strata
