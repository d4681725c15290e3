#include "model/architecture.h"

#include <array>

namespace strata {

namespace {

// llama covers Llama 1-3, Mistral and Mixtral (Mixtral is llama with expert_count > 0).
// Router normalisation follows what each family was trained with: Mixtral, Qwen3-MoE and
// Qwen3.5-MoE renormalise the top-k softmax weights, Qwen2-MoE uses them as they are.
// qwen35 / qwen35moe are Qwen3.5 and 3.6 (dense and MoE): hybrid DeltaNet / gated attention.
// qwen3next is Qwen3-Next-80B-A3B, the same hybrid with its delta net's tensors stored otherwise.
// gpt-oss is OpenAI's gpt-oss-20b / gpt-oss-120b.
// glm4moe is GLM-4.5 / 4.6 / 4.7 (355B-A32B) and GLM-4.5-Air (106B-A12B).
// deepseek2 is DeepSeek-V2/V3/R1 and Kimi K2: multi-head latent attention, the first layers
// dense, routed experts beside ungated shared ones; its routing (gating function, selection
// bias, groups, scaling) is in the file's keys.
constexpr std::array<ArchTraits, 11> kArchitectures = {{
    {.name = "llama", .norm_topk_prob = true},
    {.name = "qwen2", .rope_style = RopeStyle::Neox, .qkv_bias = true, .never_moe = true},
    {.name = "qwen3", .rope_style = RopeStyle::Neox, .qk_norm = true, .never_moe = true},
    {.name = "qwen2moe",
     .rope_style = RopeStyle::Neox,
     .qkv_bias = true,
     .always_moe = true,
     .shared_expert = true,
     .shared_expert_gate = true,
     .expert_width_default = ExpertWidthDefault::FfnLengthOverUsed},
    {.name = "qwen3moe",
     .rope_style = RopeStyle::Neox,
     .qk_norm = true,
     .always_moe = true,
     .norm_topk_prob = true,
     .expert_width_default = ExpertWidthDefault::FfnLengthOverUsed},
    {.name = "qwen35",
     .rope_style = RopeStyle::Neox,
     .qk_norm = true,
     .never_moe = true,
     .nextn_blocks = true,
     .ffn_norm_is_post_attention = true,
     .hybrid_delta_net = true,
     .rope_sections = true},
    {.name = "qwen35moe",
     .rope_style = RopeStyle::Neox,
     .qk_norm = true,
     .always_moe = true,
     .shared_expert = true,
     .shared_expert_gate = true,
     .norm_topk_prob = true,
     .expert_width_default = ExpertWidthDefault::FfnLengthOverUsed,
     .nextn_blocks = true,
     .ffn_norm_is_post_attention = true,
     .hybrid_delta_net = true,
     .rope_sections = true},
    // Plain NEOX rope over part of each head (rope.dimension_count), no sections.
    {.name = "qwen3next",
     .rope_style = RopeStyle::Neox,
     .qk_norm = true,
     .always_moe = true,
     .shared_expert = true,
     .shared_expert_gate = true,
     .norm_topk_prob = true,
     .expert_width_default = ExpertWidthDefault::FfnLengthOverUsed,
     .nextn_blocks = true,
     .ffn_norm_is_post_attention = true,
     .hybrid_delta_net = true,
     .delta_net_grouped = true},
    // gpt-oss: attention with biases, per-head sinks and every other layer windowed; MoE in every
    // layer with a biased router whose top k logits are softmaxed alone, and biased experts with
    // the clamped SwiGLU.
    {.name = "gpt-oss",
     .rope_style = RopeStyle::Neox,
     .qkv_bias = true,
     .always_moe = true,
     .expert_width_default = ExpertWidthDefault::Required,
     .expert_gating = ExpertGating::SoftmaxTopK,
     .expert_activation = FfnActivation::SwigluOai,
     .attn_out_bias = true,
     .attn_sinks = true,
     .expert_bias = true,
     .ffn_norm_is_post_attention = true,
     .untied_output = true,
     .swa_period = 2},
    // GLM-4.5: attention with q/k/v biases and (355B only) per-head q/k norms, NEOX rope over half
    // of each head; the first leading_dense_block_count layers dense, the others 160 (Air: 128)
    // routed experts top-8 with sigmoid scores, a selection bias, renormalised and scaled
    // weights, beside an ungated shared expert; the FFN's pre-norm is post_attention_norm; one
    // multi-token-prediction block after the trunk.
    {.name = "glm4moe",
     .rope_style = RopeStyle::Neox,
     .always_moe = true,
     .shared_expert = true,
     .shared_width_from_experts = true,
     .expert_width_default = ExpertWidthDefault::Required,
     .expert_gating = ExpertGating::Sigmoid,
     .selection_bias = true,
     .nextn_blocks = true,
     .ffn_norm_is_post_attention = true,
     .refuses_rope_sections = true},
    {.name = "deepseek2",
     .shared_expert = true,
     .shared_width_from_experts = true,
     .expert_width_default = ExpertWidthDefault::Required,
     .mla = true},
}};

}  // namespace

const ArchTraits* find_arch_traits(std::string_view arch) {
    for (const auto& a : kArchitectures) {
        if (a.name == arch) return &a;
    }
    return nullptr;
}

std::span<const ArchTraits> known_arch_traits() {
    return kArchitectures;
}

std::string supported_architectures() {
    std::string out;
    for (const auto& a : kArchitectures) {
        if (!out.empty()) out += ", ";
        out += a.name;
    }
    return out;
}

}  // namespace strata
