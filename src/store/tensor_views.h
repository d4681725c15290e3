// Views of a model's tensors by layer and role, wherever their bytes happen to be: the one place
// that knows how GGUF tensors map onto LayerView and ExpertView, shared by every store.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_info.h"
#include "model/tensor_view.h"

namespace strata {

struct BoundViews {
    LayerView globals;
    std::vector<LayerView> layers;
    std::vector<std::vector<ExpertView>> experts;  // [layer][expert], empty for dense layers
    std::vector<uint64_t> layer_bytes;             // non-expert bytes per layer that were bound
};

// Binds every tensor for which `where(tensor index)` gives an address; tensors it gives nullptr
// for are left out (streamed ones are bound when their reads land).
Result<BoundViews> bind_tensor_views(const ModelInfo& info,
                                     const std::function<const std::byte*(size_t)>& where);

// Adds the views `from` binds to `into` (the two arenas of a store split between a GPU's memory
// and RAM, each holding its own tensors): each view present in `from` replaces `into`'s.
void merge_views(BoundViews& into, const BoundViews& from);

// Binds tensor `mt` (with bytes at `data`) into its layer's views, or, for a routed-expert
// tensor, into the views of the experts it holds.
Result<void> bind_tensor(const ModelTensor& mt, const TensorInfo& t, const std::byte* data,
                         LayerView& layer, std::vector<ExpertView>& experts);

// A view of tensor `t` whose bytes start at `data`.
TensorView make_tensor_view(const TensorInfo& t, const std::byte* data);

// Bytes of an expert's three matrices.
uint64_t expert_bytes(const ExpertView& ev);

}  // namespace strata
