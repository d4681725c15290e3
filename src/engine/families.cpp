// One function per architecture family: the layer as the model defines it, from the shared
// blocks. Families that differ only in data the blocks read share one function.
#include <string_view>

#include "engine/engine.h"

namespace strata::engine {

namespace {

// The pre-norm transformer layer of Llama 2/3, Mistral, Mixtral, Qwen2, Qwen3, Qwen2-MoE and
// Qwen3-MoE: self-attention, then a SwiGLU FFN or routed experts (softmax over the router's
// logits, top k, the selected weights renormalised to sum 1 when norm_topk_prob says so). Their
// differences are in the tensors the layer has, which the blocks follow: biases on q, k and v
// (Qwen2), per-head RMSNorm of q and k before rope (attn_q_norm / attn_k_norm, Qwen3), a shared
// expert scaled by sigmoid(ffn_gate_inp_shexp . x) beside the routed ones (Qwen2-MoE).
// gpt-oss is the same layer with its differences in data: biases on every projection and on the
// router, attention sinks and every other layer windowed (the attention block passes the sinks,
// the backend reads the window from the hparams), the FFN norm named post_attention_norm, the
// router's top k logits softmaxed alone and the experts' clamped SwiGLU (ModelHparams'
// expert_gating and expert_activation).
// GLM-4.5 is the same layer as data too: optional biases on q, k and v and q/k norms, rope over
// half of each head (n_rot), the FFN norm named post_attention_norm, the first layers dense
// (n_leading_dense), then sigmoid routing with a selection bias, renormalised and scaled weights
// (engine::MoeConfig), beside a shared expert without a gate.
Result<void> pre_norm_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.attention_block(a));
    return e.hparams().is_moe_layer(uint32_t(a.layer))
               ? e.moe_ffn_block(a, e.hparams().norm_topk_prob)
               : e.dense_ffn_block(a);
}

// Qwen3.5 / 3.6 (dense and MoE) and Qwen3-Next: Gated DeltaNet layers, every fourth one gated
// full attention (the attention block follows hparams' attn_output_gate), then the FFN as above;
// the FFN's pre-norm is post_attention_norm (hparams' ffn_norm_is_post_attention). Qwen3-Next's
// differences are data: its delta net's fused projections and head pairing (the delta-net block
// and the backend follow hparams' ssm_fused_qkvz and ssm_grouped_heads) and plain rope.
Result<void> hybrid_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.hparams().is_recurrent(uint32_t(a.layer)) ? e.delta_net_block(a)
                                                           : e.attention_block(a));
    return e.hparams().is_moe_layer(uint32_t(a.layer))
               ? e.moe_ffn_block(a, e.hparams().norm_topk_prob)
               : e.dense_ffn_block(a);
}

// DeepSeek-V2/V3/R1 and Kimi K2 (deepseek2): multi-head latent attention, then a SwiGLU FFN in
// the first leading_dense_block_count layers and routed experts beside ungated shared ones after
// them. The router's gating, selection bias, groups and scaling are the hparams' data.
Result<void> latent_attention_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.mla_attention_block(a));
    return e.hparams().is_moe_layer(uint32_t(a.layer))
               ? e.moe_ffn_block(a, e.hparams().norm_topk_prob)
               : e.dense_ffn_block(a);
}

}  // namespace

LayerFn layer_function(std::string_view arch) {
    for (std::string_view known :
         {"llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "gpt-oss", "glm4moe"}) {
        if (arch == known) return pre_norm_layer;
    }
    for (std::string_view known : {"qwen35", "qwen35moe", "qwen3next"}) {
        if (arch == known) return hybrid_layer;
    }
    if (arch == "deepseek2") return latent_attention_layer;
    return nullptr;
}

}  // namespace strata::engine
