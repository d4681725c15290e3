// What each tensor of a model is for. Names follow llama.cpp's GGUF conventions
// ("blk.<layer>.<base>.<suffix>"); the role decides placement (plan/) and how the engine uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

enum class TensorRole : uint8_t {
    TokenEmbedding,    // token_embd.weight            [n_embd, n_vocab]
    OutputNorm,        // output_norm.weight / .bias   [n_embd]
    Output,            // output.weight (LM head)      [n_embd, n_vocab]
    RopeFreqs,         // rope_freqs.weight            [head_dim/2]
    AttnNorm,          // blk.N.attn_norm
    AttnQ,             // blk.N.attn_q                 [n_embd, n_head*head_dim]
    AttnK,             // blk.N.attn_k                 [n_embd, n_head_kv*head_dim]
    AttnV,             // blk.N.attn_v
    AttnQkv,           // blk.N.attn_qkv (fused q/k/v)
    AttnOutput,        // blk.N.attn_output            [n_head*head_dim, n_embd]
    AttnQNorm,         // blk.N.attn_q_norm (per-head RMSNorm, qwen3)
    AttnKNorm,         // blk.N.attn_k_norm
    AttnPostNorm,      // blk.N.post_attention_norm
    AttnSinks,         // blk.N.attn_sinks (gpt-oss)
    AttnOther,         // other attention tensors (attn_* names without a role of their own)
    FfnNorm,           // blk.N.ffn_norm
    FfnPostNorm,       // blk.N.post_ffw_norm
    FfnGate,           // blk.N.ffn_gate               [n_embd, n_ff]
    FfnUp,             // blk.N.ffn_up                 [n_embd, n_ff]
    FfnDown,           // blk.N.ffn_down               [n_ff, n_embd]
    MoeRouter,         // blk.N.ffn_gate_inp           [n_embd, n_expert]
    MoeRouterBias,     // blk.N.exp_probs_b (deepseek3 / gpt-oss selection bias)
    ExpertGate,        // blk.N.ffn_gate_exps          [n_embd, n_ff_exp, n_expert]
    ExpertUp,          // blk.N.ffn_up_exps            [n_embd, n_ff_exp, n_expert]
    ExpertDown,        // blk.N.ffn_down_exps          [n_ff_exp, n_embd, n_expert]
    ExpertGateUp,      // blk.N.ffn_gate_up_exps (fused gate+up experts)
    SharedGate,        // blk.N.ffn_gate_shexp
    SharedUp,          // blk.N.ffn_up_shexp
    SharedDown,        // blk.N.ffn_down_shexp
    SharedExpertGate,  // blk.N.ffn_gate_inp_shexp (qwen2moe: scalar gate of the shared expert)
    // Gated DeltaNet (linear attention) layers of hybrid models (qwen35, qwen3next); their fused
    // q/k/v projection is AttnQkv [n_embd, 2*key_dim + value_dim].
    AttnGate,   // blk.N.attn_gate: the output gate z     [n_embd, value_dim]
    SsmConv1d,  // blk.N.ssm_conv1d: causal conv taps     [d_conv, 2*key_dim + value_dim]
    SsmDt,      // blk.N.ssm_dt.bias: decay bias          [n_v_heads]
    SsmA,       // blk.N.ssm_a (no suffix): -exp(A_log)   [n_v_heads]
    SsmBeta,    // blk.N.ssm_beta: write strength         [n_embd, n_v_heads]
    SsmAlpha,   // blk.N.ssm_alpha: decay input           [n_embd, n_v_heads]
    SsmNorm,    // blk.N.ssm_norm: gated output RMSNorm   [head_v_dim]
    SsmOut,     // blk.N.ssm_out: output projection       [value_dim, n_embd]
    // qwen3next's fused forms, their columns grouped per key head (r = value heads per key head):
    // ssm_in is q, k, v and z as [q S | k S | v r*S | z r*S] per key head (in place of attn_qkv
    // and attn_gate, in files of the earlier converters); ssm_ba is beta and alpha as
    // [beta r | alpha r] per key head (in place of ssm_beta and ssm_alpha).
    SsmIn,         // blk.N.ssm_in                  [n_embd, 2*key_dim + 2*value_dim]
    SsmBetaAlpha,  // blk.N.ssm_ba                  [n_embd, 2*n_v_heads]
    // Multi-head latent attention (deepseek2; r_q, r_kv the ranks, nope + rope = head_dim_k):
    AttnQA,       // blk.N.attn_q_a: query compression       [n_embd, r_q]
    AttnQANorm,   // blk.N.attn_q_a_norm                      [r_q]
    AttnQB,       // blk.N.attn_q_b: query heads              [r_q, n_head*head_dim_k]
    AttnKvAMqa,   // blk.N.attn_kv_a_mqa: latent + rotary key [n_embd, r_kv + n_rot]
    AttnKvANorm,  // blk.N.attn_kv_a_norm                     [r_kv]
    AttnKB,       // blk.N.attn_k_b: latent from key, per head  [nope, r_kv, n_head]
    AttnVB,       // blk.N.attn_v_b: value from latent, per head [r_kv, head_dim_v, n_head]
    AttnKvB,      // blk.N.attn_kv_b (earlier files)  [r_kv, n_head*(nope + head_dim_v)]
    Other,
};

std::string_view tensor_role_name(TensorRole r);  // "attn_q", "expert_down", ...

// True for the per-expert tensors whose bytes are read only when the router picks an expert.
bool is_expert_role(TensorRole r);
bool is_ffn_role(TensorRole r);  // dense FFN, experts, shared experts, router
bool is_attention_role(TensorRole r);
bool is_norm_role(TensorRole r);

struct TensorName {
    TensorRole role = TensorRole::Other;
    int layer = -1;        // -1 for tensors outside the blocks
    int expert = -1;       // >= 0 for old per-expert layouts (blk.N.ffn_gate.E.weight)
    bool is_bias = false;  // ".bias" rather than ".weight"
};

// Classifies a GGUF tensor name. Never fails: unknown names are TensorRole::Other.
TensorName classify_tensor_name(std::string_view name);

// The GGUF name of a role in a layer: tensor_name(TensorRole::AttnQ, 3) -> "blk.3.attn_q.weight".
std::string tensor_name(TensorRole role, int layer = -1, bool bias = false);

}  // namespace strata
