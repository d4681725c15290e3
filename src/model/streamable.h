// What may stream, decided in one place for the plan and the store alike.
//
// A tensor that is not resident is read in a unit: a layer's FFN group (dense FFN, shared-expert
// and routed-expert weights of one layer, read together into a slot) or one routed expert (its
// gate, up and down slices, read into an expert-cache entry when the router picks it). Which
// tensors a unit may take is a property of the tensor's role, not of a store or a plan: the plan
// counts exactly what the store then streams.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/model_info.h"

namespace strata {

enum class StreamUnit : uint8_t {
    None,    // always resident (attention, norms, routers, globals)
    Layer,   // part of its layer's FFN group, read into a slot before the layer runs
    Expert,  // one routed expert, read into the expert cache after routing
};

std::string_view stream_unit_name(StreamUnit u);  // "none", "layer", "expert"

// The streaming sets a mode can choose from.
enum class StreamSet : uint8_t {
    LayerFfn,       // every layer's FFN weights stream as one group per layer
    RoutedExperts,  // routed experts stream expert by expert; the rest of the layer stays
};

// True when `t` streams under `set`. Routers (and the shared expert's gate) never stream: they
// pick the experts before anything of the layer's FFN can be read.
bool is_streamable(const ModelTensor& t, StreamSet set);

// The unit `t` streams in under `set`, or None when it does not stream there.
StreamUnit stream_unit(const ModelTensor& t, StreamSet set);

}  // namespace strata
