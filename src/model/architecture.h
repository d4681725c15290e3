// The architecture families strata can run and what differs between them, as data: one row per
// family (general.architecture), read by the hparams loader, the tensor-shape validation, the
// tensor layout of synthetic models and (later) the forward pass.
// Adding a family means adding a row here, its extra keys in hparams.cpp (MLA ranks, sliding
// window, ...), its extra tensors in tensor_validation.cpp and tensor_layout.cpp, and its layer
// function in engine/families.cpp.
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
    Required,           // gpt-oss: the key must be given
};

struct ArchTraits {
    std::string_view name;  // general.architecture
    RopeStyle rope_style = RopeStyle::Normal;
    bool qkv_bias = false;    // q, k and v projections carry biases (required tensors)
    bool qk_norm = false;     // per-head RMSNorm on q and k (required tensors)
    bool always_moe = false;  // every layer is mixture-of-experts; expert_count is required
    bool never_moe = false;   // a dense-only family: expert_count is not allowed
    // Always-active shared expert(s) beside the routed ones (one when expert_shared_count is not
    // given); with shared_expert_gate its output is scaled by sigmoid(ffn_gate_inp_shexp . x)
    // (qwen2moe and the Qwen3.5 families), and with shared_width_from_experts its width defaults
    // to the experts' times their count, as the reference sizes deepseek-style shared experts.
    bool shared_expert = false;
    bool shared_expert_gate = false;
    bool shared_width_from_experts = false;
    bool norm_topk_prob = false;  // renormalise the selected experts' router weights to sum 1
    ExpertWidthDefault expert_width_default = ExpertWidthDefault::FfnLength;
    ExpertGating expert_gating = ExpertGating::Softmax;
    FfnActivation expert_activation = FfnActivation::Silu;
    bool attn_out_bias = false;  // attn_output carries a bias (required)
    bool attn_sinks = false;     // attn_sinks.weight, one logit per head (required)
    // The router and the routed experts' gate, up and down projections carry biases (required).
    bool expert_bias = false;
    // Every MoE layer has a selection bias (exp_probs_b, required; optional elsewhere), and the
    // file gives the routing's keys (gating, scale, renormalisation, groups), which synth writes.
    bool selection_bias = false;
    // The reference converter may append multi-token-prediction blocks after the trunk
    // (<arch>.nextn_predict_layers); strata sets them aside and synth can write them.
    bool nextn_blocks = false;
    // The FFN's input norm is named post_attention_norm (gpt-oss), not ffn_norm.
    bool ffn_norm_is_post_attention = false;
    bool untied_output = false;  // output.weight is required (no tied LM head)
    // Sliding-window attention: <arch>.attention.sliding_window is required, and without a
    // sliding_window_pattern key layer il is windowed when il % swa_period < swa_period - 1
    // (the reference's convention: period 2 windows the even layers). 0: no windowed layers.
    uint32_t swa_period = 0;
    // Qwen3.5 hybrids: Gated DeltaNet layers (ssm.* keys and tensors) with every
    // full_attention_interval-th layer gated full attention (a q projection doubled into query and
    // output gate); the FFN's pre-norm is post_attention_norm.
    bool hybrid_delta_net = false;
    // Multi-section rope: <arch>.rope.dimension_sections is read (Qwen3.5).
    bool rope_sections = false;
    // A file that gives rope.dimension_sections is a vision model's, which the reference runs
    // with multi-section rope (GLM-4.5V under glm4moe): refused rather than run wrong. Other
    // families ignore the key as the reference does (qwen3next).
    bool refuses_rope_sections = false;
    // Qwen3-Next's delta net: value heads grouped by key head (value head h reads key head
    // h / (value heads / key heads), where qwen35's tile them: h % key heads), beta and alpha in
    // one projection (ssm_ba) grouped per key head, and q/k/v/z either in one projection grouped
    // per key head (ssm_in, the earlier converters' files) or as qwen35 has them (attn_qkv,
    // attn_gate).
    bool delta_net_grouped = false;
    // Multi-head latent attention (ModelHparams::is_mla): the attention.q_lora_rank,
    // kv_lora_rank and key/value_length_mla keys and the attn_q_a / attn_kv_a_mqa / attn_k_b
    // (or attn_kv_b) tensors in place of attn_q, attn_k and attn_v.
    bool mla = false;
};

// nullptr for an architecture strata does not run.
const ArchTraits* find_arch_traits(std::string_view arch);
// Every supported family, in a fixed order.
std::span<const ArchTraits> known_arch_traits();
// "llama, qwen2, qwen3, qwen2moe, qwen3moe, qwen35, qwen35moe, qwen3next, gpt-oss, glm4moe,
// deepseek2"
std::string supported_architectures();

}  // namespace strata
