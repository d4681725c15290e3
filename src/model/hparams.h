// Architecture hyper-parameters of a model, read from GGUF metadata ("<arch>.<key>").
// One struct for every family: differences between families are data here (flags and sizes),
// plus small per-family functions in the engine, not `if (arch == ...)` spread around.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

// How pairs of dimensions are rotated: adjacent pairs (llama "normal") or halves (NEOX: i, i+d/2).
enum class RopeStyle : uint8_t { Normal, Neox };

struct RopeScaling {
    std::string type = "none";  // "none", "linear", "yarn", "llama3"
    float factor = 1.0f;
    uint32_t original_context = 0;
    // llama3 frequency scaling
    float low_freq_factor = 1.0f;
    float high_freq_factor = 4.0f;
};

struct ModelHparams {
    std::string arch;  // general.architecture: "llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe"
    std::string name;  // general.name (may be empty)

    uint32_t n_vocab = 0;
    uint32_t n_ctx_train = 0;  // <arch>.context_length
    uint32_t n_embd = 0;       // <arch>.embedding_length
    uint32_t n_layer = 0;      // <arch>.block_count

    uint32_t n_head = 0;     // <arch>.attention.head_count
    uint32_t n_head_kv = 0;  // <arch>.attention.head_count_kv (defaults to n_head)
    uint32_t head_dim_k = 0; // <arch>.attention.key_length (defaults to n_embd / n_head)
    uint32_t head_dim_v = 0; // <arch>.attention.value_length (defaults to head_dim_k)
    float rms_eps = 1e-5f;   // <arch>.attention.layer_norm_rms_epsilon

    uint32_t n_ff = 0;  // <arch>.feed_forward_length: dense FFN width (0 when every layer is MoE)

    // Mixture of experts (all zero for dense models).
    uint32_t n_expert = 0;           // <arch>.expert_count
    uint32_t n_expert_used = 0;      // <arch>.expert_used_count
    uint32_t n_ff_exp = 0;           // <arch>.expert_feed_forward_length (defaults to n_ff)
    uint32_t n_ff_shexp = 0;         // <arch>.expert_shared_feed_forward_length
    uint32_t n_expert_shared = 0;    // <arch>.expert_shared_count (qwen2moe: 1 when present)
    bool norm_topk_prob = false;     // renormalise the selected experts' weights to sum 1
    uint32_t n_leading_dense = 0;    // <arch>.leading_dense_block_count (deepseek-style)

    // Rotary position embedding.
    uint32_t n_rot = 0;  // <arch>.rope.dimension_count (defaults to head_dim_k)
    float rope_freq_base = 10000.0f;
    RopeStyle rope_style = RopeStyle::Normal;
    RopeScaling rope_scaling;

    // Structural flags, derived from the architecture and the tensors present.
    bool tied_output = false;   // no output.weight: token_embd doubles as the LM head
    bool has_qkv_bias = false;  // qwen2
    bool has_qk_norm = false;   // qwen3: per-head RMSNorm on q and k

    bool is_moe() const { return n_expert > 0; }
    uint32_t n_embd_k_gqa() const { return head_dim_k * n_head_kv; }
    uint32_t n_embd_v_gqa() const { return head_dim_v * n_head_kv; }
};

}  // namespace strata
