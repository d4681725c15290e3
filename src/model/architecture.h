// The architecture families strata can run and what differs between them, as data: one row per
// family (general.architecture), read by the hparams loader and the tensor-shape validation.
// Adding a family (deepseek2, gpt-oss) means adding a row here, its extra keys in hparams.cpp
// (MLA ranks, sliding window, ...) and its extra tensors in tensor_validation.cpp.
#pragma once

#include <string>
#include <string_view>

#include "model/hparams.h"

namespace strata {

// How <arch>.expert_feed_forward_length defaults when a file leaves it out.
enum class ExpertWidthDefault : uint8_t {
    FfnLength,          // llama (Mixtral): feed_forward_length is the expert width
    FfnLengthOverUsed,  // qwen2moe / qwen3moe: feed_forward_length / expert_used_count
};

struct ArchTraits {
    std::string_view name;  // general.architecture
    RopeStyle rope_style;
    bool qkv_bias;        // q, k and v projections carry biases (required tensors)
    bool qk_norm;         // per-head RMSNorm on q and k (required tensors)
    bool always_moe;      // every layer is mixture-of-experts; expert_count is required
    bool shared_expert;   // one always-active shared expert with a sigmoid gate beside the routed
    bool norm_topk_prob;  // renormalise the selected experts' router weights to sum 1
    ExpertWidthDefault expert_width_default;
};

// nullptr for an architecture strata does not run.
const ArchTraits* find_arch_traits(std::string_view arch);
// "llama, qwen2, qwen3, qwen2moe, qwen3moe"
std::string supported_architectures();

}  // namespace strata
