#include "store/store_layout.h"

#include <algorithm>

#include "model/streamable.h"

namespace strata {

bool StoreLayout::any(Residence r) const {
    return std::find(tensors.begin(), tensors.end(), r) != tensors.end();
}

StoreLayout resident_layout(const ModelInfo& info) {
    StoreLayout l;
    l.tensors.assign(info.tensors.size(), Residence::Arena);
    return l;
}

StoreLayout mapped_layout(const ModelInfo& info) {
    StoreLayout l = resident_layout(info);
    l.mapped = true;
    l.mode = "mmap";
    return l;
}

StoreLayout layer_stream_layout(const ModelInfo& info, const std::vector<bool>& stream_layers,
                                const SlotRingConfig& ring) {
    StoreLayout l = resident_layout(info);
    l.mode = "ffn-stream";
    l.ring = ring;
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        const ModelTensor& t = info.tensors[i];
        if (t.layer >= 0 && size_t(t.layer) < stream_layers.size() &&
            stream_layers[size_t(t.layer)] && is_streamable(t, StreamSet::LayerFfn)) {
            l.tensors[i] = Residence::Slot;
        }
    }
    return l;
}

StoreLayout expert_stream_layout(const ModelInfo& info, const ExpertCacheConfig& experts) {
    StoreLayout l = resident_layout(info);
    l.mode = "expert-stream";
    l.experts = experts;
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        if (is_streamable(info.tensors[i], StreamSet::RoutedExperts)) {
            l.tensors[i] = Residence::ExpertCache;
        }
    }
    return l;
}

StoreLayout store_layout(const ModelInfo& info, const Plan& plan) {
    StoreLayout l = resident_layout(info);
    l.mode = std::string(plan_mode_name(plan.mode));
    for (size_t i = 0; i < info.tensors.size() && i < plan.tensors.size(); ++i) {
        const TensorPlacement& p = plan.tensors[i];
        if (p.use != TensorUse::Streamed) continue;
        if (p.unit == StreamUnit::Layer) l.tensors[i] = Residence::Slot;
        if (p.unit == StreamUnit::Expert) l.tensors[i] = Residence::ExpertCache;
        if (p.unit == StreamUnit::Rows) l.tensors[i] = Residence::Rows;
    }
    if (plan.gpu_device >= 0) {
        l.arena_place = MemoryPlace{MemoryKind::Device, plan.gpu_device};
        l.on_host.assign(info.tensors.size(), false);
        for (size_t i = 0; i < info.tensors.size() && i < plan.tensors.size(); ++i) {
            l.on_host[i] = plan.tensors[i].tier != Tier::Gpu;
        }
        l.pin_host = plan.gpu_memory.prompt_staging > 0;
    }
    l.ring.lookahead = int(plan.stream.lookahead);
    l.ring.slots = int(plan.stream.slots);
    l.experts.cache_entries = plan.expert_cache.capacity +
                              uint64_t(plan.stream.slots) * plan.expert_cache.experts_per_slot;
    return l;
}

}  // namespace strata
