#include "model/streamable.h"

namespace strata {

std::string_view stream_unit_name(StreamUnit u) {
    switch (u) {
        case StreamUnit::None:
            return "none";
        case StreamUnit::Layer:
            return "layer";
        case StreamUnit::Expert:
            return "expert";
    }
    return "?";
}

bool is_streamable(const ModelTensor& t, StreamSet set) {
    if (t.layer < 0) return false;
    if (set == StreamSet::RoutedExperts) return is_expert_role(t.role);
    switch (t.role) {
        case TensorRole::MoeRouter:
        case TensorRole::MoeRouterBias:
        case TensorRole::SharedExpertGate:
            return false;
        default:
            return is_ffn_role(t.role);
    }
}

StreamUnit stream_unit(const ModelTensor& t, StreamSet set) {
    if (!is_streamable(t, set)) return StreamUnit::None;
    return set == StreamSet::RoutedExperts ? StreamUnit::Expert : StreamUnit::Layer;
}

}  // namespace strata
