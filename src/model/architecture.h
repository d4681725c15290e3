// The architecture families strata can run and what differs between them, as data: one row per
// family (general.architecture), read by the hparams loader, the tensor-shape validation, the
// tensor layout of synthetic models and (later) the forward pass.
// Adding a family (deepseek2, gpt-oss) means adding a row here, its extra keys in hparams.cpp
// (MLA ranks, sliding window, ...) and its extra tensors in tensor_validation.cpp.
#pragma once

#include <span>
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
    RopeStyle rope_style = RopeStyle::Normal;
    bool qkv_bias = false;        // q, k and v projections carry biases (required tensors)
    bool qk_norm = false;         // per-head RMSNorm on q and k (required tensors)
    bool always_moe = false;      // every layer is mixture-of-experts; expert_count is required
    bool never_moe = false;       // a dense-only family: expert_count is not allowed
    bool shared_expert = false;   // one always-active shared expert with a sigmoid gate
    bool norm_topk_prob = false;  // renormalise the selected experts' router weights to sum 1
    ExpertWidthDefault expert_width_default = ExpertWidthDefault::FfnLength;
    // Qwen3.5 hybrids: Gated DeltaNet layers (ssm.* keys and tensors) with every
    // full_attention_interval-th layer gated full attention (a q projection doubled into query and
    // output gate, multi-section rope); the FFN's pre-norm is post_attention_norm.
    bool hybrid_delta_net = false;
};

// nullptr for an architecture strata does not run.
const ArchTraits* find_arch_traits(std::string_view arch);
// Every supported family, in a fixed order.
std::span<const ArchTraits> known_arch_traits();
// "llama, qwen2, qwen3, qwen2moe, qwen3moe, qwen35, qwen35moe"
std::string supported_architectures();

}  // namespace strata
