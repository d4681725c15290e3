// One function per architecture family: the layer as the model defines it, from the shared
// blocks. What the families share (pre-norm residual blocks, SwiGLU) is in the blocks; what
// differs is here, in a line or two each.
#include <string_view>

#include "engine/engine.h"

namespace strata::engine {

namespace {

// Llama 2/3, Mistral, and Mixtral (llama with experts: softmax over all router logits, top-k,
// the selected weights renormalised to sum 1).
Result<void> llama_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.attention_block(a));
    return e.hparams().is_moe() ? e.moe_ffn_block(a, e.hparams().norm_topk_prob)
                                : e.dense_ffn_block(a);
}

// Qwen2: biases on q, k and v (the attention block adds whatever biases the layer has).
Result<void> qwen2_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.attention_block(a));
    return e.dense_ffn_block(a);
}

// Qwen3: per-head RMSNorm of q and k before rope (present in the layer as attn_q_norm/k_norm).
Result<void> qwen3_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.attention_block(a));
    return e.dense_ffn_block(a);
}

// Qwen2-MoE: routed experts without renormalisation, plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp . x).
Result<void> qwen2moe_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.attention_block(a));
    return e.moe_ffn_block(a, e.hparams().norm_topk_prob);
}

// Qwen3-MoE: q/k norms, routed experts renormalised when norm_topk_prob says so.
Result<void> qwen3moe_layer(Engine& e, const LayerArgs& a) {
    STRATA_TRY(e.attention_block(a));
    return e.moe_ffn_block(a, e.hparams().norm_topk_prob);
}

}  // namespace

LayerFn layer_function(std::string_view arch) {
    if (arch == "llama") return llama_layer;
    if (arch == "qwen2") return qwen2_layer;
    if (arch == "qwen3") return qwen3_layer;
    if (arch == "qwen2moe") return qwen2moe_layer;
    if (arch == "qwen3moe") return qwen3moe_layer;
    return nullptr;
}

}  // namespace strata::engine
