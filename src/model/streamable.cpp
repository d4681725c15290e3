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
        case StreamUnit::Rows:
            return "rows";
    }
    return "?";
}

bool is_streamable(const ModelTensor& t, StreamSet set) {
    if (t.layer < 0) return false;
    if (set == StreamSet::RoutedExperts) return t.is_routed_expert();
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

bool is_head_tensor(const ModelTensor& t, bool tied_output) {
    if (t.is_bias || t.layer >= 0) return false;
    return t.role == TensorRole::Output || (tied_output && t.role == TensorRole::TokenEmbedding);
}

StreamUnit stream_unit(const ModelTensor& t, StreamSet set, const DeepStreaming& deep,
                       bool tied_output) {
    if (t.layer < 0) {
        if (t.is_bias) return StreamUnit::None;
        if (deep.head_rows && is_head_tensor(t, tied_output)) return StreamUnit::Rows;
        if (deep.embedding_rows && !tied_output && t.role == TensorRole::TokenEmbedding) {
            return StreamUnit::Rows;
        }
        return StreamUnit::None;
    }
    const StreamUnit unit = stream_unit(t, set);
    if (unit != StreamUnit::None) return unit;
    return deep.whole_layers ? StreamUnit::Layer : StreamUnit::None;
}

}  // namespace strata
