#include "store/tensor_views.h"

#include <algorithm>

namespace strata {

TensorView make_tensor_view(const TensorInfo& t, const std::byte* data) {
    TensorView v;
    v.type = t.type;
    v.data = data;
    for (int i = 0; i < 4; ++i) v.ne[i] = static_cast<int64_t>(t.shape[i]);
    v.row_bytes = t.row_bytes();
    return v;
}

uint64_t expert_bytes(const ExpertView& ev) {
    return ev.gate.row_bytes * uint64_t(ev.gate.rows()) + ev.up.row_bytes * uint64_t(ev.up.rows()) +
           ev.down.row_bytes * uint64_t(ev.down.rows());
}

namespace {

TensorView* expert_member(ExpertView& ev, TensorRole role) {
    switch (role) {
        case TensorRole::ExpertGate:
            return &ev.gate;
        case TensorRole::ExpertUp:
            return &ev.up;
        case TensorRole::ExpertDown:
            return &ev.down;
        default:
            return nullptr;
    }
}

// Routed experts: one 2-D view per expert, from a fused tensor or an old per-expert one.
Result<void> bind_experts(const ModelTensor& mt, const TensorInfo& t, const std::byte* base,
                          std::vector<ExpertView>& experts) {
    auto slot = [&](int64_t e) -> Result<ExpertView*> {
        if (e < 0 || e > (1 << 20)) return err("tensor " + t.name + ": bad expert index");
        if (experts.size() <= size_t(e)) experts.resize(size_t(e) + 1);
        return &experts[size_t(e)];
    };
    if (mt.expert >= 0) {
        STRATA_ASSIGN(ExpertView * ev, slot(mt.expert));
        TensorView* tv = expert_member(*ev, mt.role);
        if (!tv) return err("tensor " + t.name + ": unsupported expert tensor");
        *tv = make_tensor_view(t, base);
        return {};
    }
    if (mt.n_expert_slices == 0) {
        return err("tensor " + t.name + " (" + std::string(tensor_role_name(mt.role)) +
                   ") cannot be split into experts");
    }
    for (uint32_t e = 0; e < mt.n_expert_slices; ++e) {
        STRATA_ASSIGN(ExpertView * ev, slot(e));
        TensorView* tv = expert_member(*ev, mt.role);
        if (!tv) {
            return err("tensor " + t.name + ": " + std::string(tensor_role_name(mt.role)) +
                       " tensors are not supported yet");
        }
        TensorView v = make_tensor_view(t, base + e * mt.expert_slice_bytes);
        v.ne = {v.ne[0], v.ne[1], 1, 1};
        *tv = v;
    }
    return {};
}

}  // namespace

Result<void> bind_tensor(const ModelTensor& mt, const TensorInfo& t, const std::byte* data,
                         LayerView& layer, std::vector<ExpertView>& experts) {
    // Routed experts' biases are the layer's (biases[ExpertGate] ...: one row per expert).
    if (mt.is_routed_expert()) return bind_experts(mt, t, data, experts);
    (mt.is_bias ? layer.biases : layer.weights)[size_t(mt.role)] = make_tensor_view(t, data);
    return {};
}

namespace {

void merge_layer(LayerView& into, const LayerView& from) {
    for (size_t r = 0; r < kTensorRoleCount; ++r) {
        if (from.weights[r].present()) into.weights[r] = from.weights[r];
        if (from.biases[r].present()) into.biases[r] = from.biases[r];
    }
}

}  // namespace

void merge_views(BoundViews& into, const BoundViews& from) {
    merge_layer(into.globals, from.globals);
    const size_t n = std::max(into.layers.size(), from.layers.size());
    into.layers.resize(n);
    into.experts.resize(n);
    into.layer_bytes.resize(n, 0);
    for (size_t l = 0; l < from.layers.size(); ++l) {
        merge_layer(into.layers[l], from.layers[l]);
        into.layer_bytes[l] += from.layer_bytes[l];
        const std::vector<ExpertView>& fe = from.experts[l];
        std::vector<ExpertView>& ie = into.experts[l];
        if (ie.size() < fe.size()) ie.resize(fe.size());
        for (size_t e = 0; e < fe.size(); ++e) {
            for (TensorView ExpertView::*m :
                 {&ExpertView::gate, &ExpertView::up, &ExpertView::down}) {
                if ((fe[e].*m).present()) ie[e].*m = fe[e].*m;
            }
        }
    }
}

Result<BoundViews> bind_tensor_views(const ModelInfo& info,
                                     const std::function<const std::byte*(size_t)>& where) {
    const uint32_t n_layer = info.hparams ? info.hparams->n_layer : 0;
    BoundViews v;
    v.layers.assign(n_layer, LayerView{});
    v.experts.assign(n_layer, {});
    v.layer_bytes.assign(n_layer, 0);
    std::vector<ExpertView> no_experts;
    for (const ModelTensor& mt : info.tensors) {
        const TensorInfo& t = info.info(mt);
        if (mt.layer >= int(n_layer)) {
            return err("tensor " + t.name + " names layer " + std::to_string(mt.layer) +
                       " but the model has " + std::to_string(n_layer));
        }
        const std::byte* base = where(mt.index);
        if (!base) continue;
        const bool global = mt.layer < 0;
        STRATA_TRY(bind_tensor(mt, t, base, global ? v.globals : v.layers[size_t(mt.layer)],
                               global ? no_experts : v.experts[size_t(mt.layer)]));
        if (!global && !mt.is_routed_expert()) v.layer_bytes[size_t(mt.layer)] += t.n_bytes;
    }
    return v;
}

}  // namespace strata
