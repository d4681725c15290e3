#include "backend/backend.h"

#include <cstdio>
#include <cstdlib>

namespace strata {

std::string_view act_name(Act a) {
    switch (a) {
        case Act::Hidden:
            return "hidden";
        case Act::Normed:
            return "normed";
        case Act::Q:
            return "q";
        case Act::K:
            return "k";
        case Act::V:
            return "v";
        case Act::AttnOut:
            return "attn_out";
        case Act::Out:
            return "out";
        case Act::Side:
            return "side";
        case Act::Mixed:
            return "mixed";
        case Act::Gate:
            return "gate";
        case Act::Beta:
            return "beta";
        case Act::Alpha:
            return "alpha";
        case Act::Fused:
            return "fused";
        case Act::QLatent:
            return "q_latent";
        case Act::KvLatent:
            return "kv_latent";
        case Act::Count:
            break;
    }
    return "?";
}

namespace {
// A hybrid-model operation reached a backend whose factory should have refused the model.
[[noreturn]] void no_recurrent_layers(std::string_view backend, const char* op) {
    std::fprintf(stderr, "strata: backend %.*s cannot compute %s (hybrid models)\n",
                 int(backend.size()), backend.data(), op);
    std::abort();
}
}  // namespace

void Backend::split_query_gate(int, int64_t) {
    no_recurrent_layers(name(), "split_query_gate");
}
void Backend::sigmoid_mul(Act, Act, int64_t, int64_t) {
    no_recurrent_layers(name(), "sigmoid_mul");
}
void Backend::ungroup_columns(Act, int64_t, std::span<const ColumnPart>, int64_t) {
    no_recurrent_layers(name(), "ungroup_columns");
}
void Backend::delta_net(int, const DeltaNetWeights&, std::span<const SeqRun>) {
    no_recurrent_layers(name(), "delta_net");
}

namespace {
// A latent-attention operation reached a backend whose factory should have refused the model.
[[noreturn]] void no_latent_attention(std::string_view backend, const char* op) {
    std::fprintf(stderr, "strata: backend %.*s cannot compute %s (latent-attention models)\n",
                 int(backend.size()), backend.data(), op);
    std::abort();
}
}  // namespace

void Backend::mla_latent_norms(const TensorView&, const TensorView&, int64_t) {
    no_latent_attention(name(), "mla_latent_norms");
}
void Backend::mla_attention(int, const MlaWeights&, std::span<const SeqRun>) {
    no_latent_attention(name(), "mla_attention");
}

}  // namespace strata
