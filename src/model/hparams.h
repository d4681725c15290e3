// Architecture hyper-parameters of a model, read from GGUF metadata ("<arch>.<key>").
// One struct for every family: differences between families are data here (flags and sizes),
// plus small per-family functions in the engine, not `if (arch == ...)` spread around.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace strata {

class GgufFile;

namespace detail {
inline uint32_t per_layer_or(const std::vector<uint32_t>& v, uint32_t i, uint32_t fallback) {
    return i < v.size() ? v[i] : fallback;
}
}  // namespace detail

// How pairs of dimensions are rotated: adjacent pairs (llama "normal") or halves (NEOX: i, i+d/2).
enum class RopeStyle : uint8_t { Normal, Neox };

// How a mixture-of-experts router turns its logits into the chosen experts' weights.
enum class ExpertGating : uint8_t {
    Softmax,      // softmax over all n_expert logits, then the top k (Mixtral, Qwen MoE)
    SoftmaxTopK,  // the top k logits, then softmax over those k alone (gpt-oss)
    Sigmoid,      // sigmoid of each logit, the top k of them (DeepSeek-V3, Kimi K2, GLM-4.5)
};

// The activation joining an FFN's gate and up projections.
enum class FfnActivation : uint8_t {
    Silu,       // silu(gate) * up
    SwigluOai,  // gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit),
                // g * sigmoid(alpha * g) * (u + 1) with alpha 1.702, limit 7
};
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

// <arch>.rope.scaling.*: how positions beyond the training context are squeezed into it.
struct RopeScaling {
    std::string type = "none";      // "none", "linear", "yarn", "longrope", "llama3"
    float factor = 1.0f;            // context extension factor (1 = none)
    uint32_t original_context = 0;  // context length before extension (0 = not given)
    float attn_factor = 1.0f;       // yarn: attention magnitude scale
    // llama3 frequency scaling (llama.cpp's converter bakes it into rope_freqs.weight instead;
    // other writers give these keys)
    float low_freq_factor = 1.0f;
    float high_freq_factor = 4.0f;
    // DeepSeek's YaRN: the model's mscale_all_dim (<arch>.rope.scaling.yarn_log_multiplier, which
    // the converter writes as 0.1 x mscale_all_dim), by which the attention logits are scaled up
    // for the extended context instead of the rotation's magnitude; 0: not given.
    float mscale_all_dim = 0.0f;
};

struct ModelHparams {
    std::string arch;  // general.architecture: "llama", "qwen2", ..., "gpt-oss"
    std::string name;  // general.name (may be empty)

    uint32_t n_vocab = 0;
    uint32_t n_ctx_train = 0;  // <arch>.context_length
    uint32_t n_embd = 0;       // <arch>.embedding_length
    uint32_t n_layer = 0;      // <arch>.block_count less n_layer_nextn: the layers run

    uint32_t n_head = 0;      // <arch>.attention.head_count
    uint32_t n_head_kv = 0;   // <arch>.attention.head_count_kv (defaults to n_head)
    uint32_t head_dim_k = 0;  // <arch>.attention.key_length (defaults to n_embd / n_head)
    uint32_t head_dim_v = 0;  // <arch>.attention.value_length (defaults to head_dim_k)
    float rms_eps = 1e-5f;    // <arch>.attention.layer_norm_rms_epsilon

    // <arch>.feed_forward_length: dense FFN width. Mixtral-style llama MoE files give the expert
    // width here (and no expert_feed_forward_length); qwen MoE files may omit it.
    uint32_t n_ff = 0;

    // Per-layer values, filled only when the file gives an array whose entries differ between
    // layers; the scalars above then hold the maximum (what buffers must be sized for).
    std::vector<uint32_t> n_head_per_layer;
    std::vector<uint32_t> n_head_kv_per_layer;
    std::vector<uint32_t> n_ff_per_layer;

    // Mixture of experts (all zero for dense models).
    uint32_t n_expert = 0;         // <arch>.expert_count
    uint32_t n_expert_used = 0;    // <arch>.expert_used_count
    uint32_t n_ff_exp = 0;         // <arch>.expert_feed_forward_length (see ExpertWidthDefault)
    uint32_t n_ff_shexp = 0;       // <arch>.expert_shared_feed_forward_length (default n_ff)
    uint32_t n_expert_shared = 0;  // <arch>.expert_shared_count (qwen2moe: 1 without the key)
    bool norm_topk_prob = false;   // renormalise the selected experts' weights to sum 1
    uint32_t n_leading_dense = 0;  // <arch>.leading_dense_block_count (deepseek-style)
    ExpertGating expert_gating = ExpertGating::Softmax;  // <arch>.expert_gating_func
    FfnActivation expert_activation = FfnActivation::Silu;
    // Group-limited routing (DeepSeek-V3): the experts form n_expert_group equal groups, a token
    // keeps the n_expert_group_used groups whose two best (bias-added) scores sum highest and
    // chooses its top k among their experts. <arch>.expert_group_count / _used_count; 0: none.
    uint32_t n_expert_group = 0;
    uint32_t n_expert_group_used = 0;
    // The chosen weights times this (<arch>.expert_weights_scale, the routed scaling factor;
    // 1 when the file gives none or 0).
    float expert_weights_scale = 1.0f;
    // blk.N.exp_probs_b.bias: a learned per-expert bias added to the router's scores to choose
    // the experts, not to weigh them (DeepSeek-V3, GLM-4.5).
    bool has_selection_bias = false;

    // Sliding-window attention (gpt-oss): a windowed layer's query at position p sees only the
    // keys at p - n_swa + 1 .. p. <arch>.attention.sliding_window; 0: no layer is windowed.
    uint32_t n_swa = 0;
    // Per layer, 1 where the layer is windowed (<arch>.attention.sliding_window_pattern, or the
    // family's pattern: gpt-oss windows the even layers); empty when none is.
    std::vector<uint8_t> swa_layers;

    // Rotary position embedding.
    uint32_t n_rot = 0;  // <arch>.rope.dimension_count (defaults to head_dim_k)
    float rope_freq_base = 10000.0f;
    RopeStyle rope_style = RopeStyle::Normal;
    RopeScaling rope_scaling;

    // Structural flags, derived from the architecture and the tensors present.
    bool tied_output = false;   // no output.weight: token_embd doubles as the LM head
    bool has_qkv_bias = false;  // qwen2
    bool has_qk_norm = false;   // qwen3: per-head RMSNorm on q and k
    // rope_freqs.weight: per-dimension rope frequency factors (llama3 as converted by llama.cpp)
    bool has_rope_freqs = false;
    // blk.N.attn_sinks.weight (gpt-oss): one learned logit per query head that joins the
    // softmax's denominator and contributes no value.
    bool has_attn_sinks = false;
    // Biases on the routed experts' gate, up and down projections (ffn_*_exps.bias, gpt-oss).
    bool has_expert_bias = false;
    // The FFN's input norm is blk.N.post_attention_norm rather than blk.N.ffn_norm (gpt-oss).
    bool ffn_norm_is_post_attention = false;

    // Hybrid models (qwen35, qwen35moe, qwen3next): Gated DeltaNet linear-attention layers between
    // full attention layers. The delta net's heads: ssm_n_group key heads and ssm_dt_rank value
    // heads (ssm_key_head says which key head a value head reads), each ssm_d_state wide; its
    // recurrent state
    // per sequence and layer is (ssm_d_conv - 1) x conv_channels() convolution inputs and
    // ssm_dt_rank x ssm_d_state x ssm_d_state floats. All zero for other families.
    // Multi-token-prediction blocks (<arch>.nextn_predict_layers) that the file stores after the
    // trunk, as blk.<n_layer>.. ; block_count counts them, n_layer does not. strata runs the
    // trunk only and leaves their tensors unread (ModelInfo::set_aside).
    uint32_t n_layer_nextn = 0;
    uint32_t ssm_d_conv = 0;   // <arch>.ssm.conv_kernel
    uint32_t ssm_d_inner = 0;  // <arch>.ssm.inner_size: value heads x value head size
    uint32_t ssm_d_state = 0;  // <arch>.ssm.state_size: the head size of q, k and v
    uint32_t ssm_n_group = 0;  // <arch>.ssm.group_count: key heads
    uint32_t ssm_dt_rank = 0;  // <arch>.ssm.time_step_rank: value heads
    // Per layer: true for a delta-net layer (<arch>.attention.recurrent_layers, or else
    // <arch>.full_attention_interval: every interval-th layer is full attention, 4 by default).
    // Empty: no recurrent layers.
    std::vector<bool> recurrent_layers;
    // Full attention whose q projection also yields a per-head output gate (sigmoid), as
    // [q_head0, gate_head0, q_head1, ...]: attn_q is [n_embd, 2 * n_head * head_dim_k].
    bool attn_output_gate = false;
    // <arch>.rope.dimension_sections (multi-section rope; for text every section sees the
    // token's position except the fourth, which sees 0). All zero: plain rope.
    std::array<uint32_t, 4> rope_sections{};
    // Qwen3-Next (ArchTraits::delta_net_grouped): value heads come in groups of
    // ssm_dt_rank / ssm_n_group per key head, and beta and alpha are one projection (ssm_ba),
    // [beta r | alpha r] per key head.
    bool ssm_grouped_heads = false;
    // blk.N.ssm_in holds a delta-net layer's q, k, v and z, [q S | k S | v r*S | z r*S] per key
    // head, in place of attn_qkv and attn_gate (qwen3next files of the earlier converters).
    bool ssm_fused_qkvz = false;

    // Multi-head latent attention (deepseek2: DeepSeek-V2/V3, Kimi K2). A query goes through a
    // low-rank projection (attn_q_a to n_lora_q values, RMS-normed, then attn_q_b; n_lora_q 0: one
    // attn_q); keys and values share one latent of n_lora_kv values (RMS-normed) plus an
    // n_rot-wide rotary key shared by every head (attn_kv_a_mqa), and that latent and rotary key
    // (mla_cache_width() values) are all the cache holds per token. Each head's key is
    // [nope | rope], head_dim_k wide: head_dim_nope() values from the latent through attn_k_b
    // (or attn_kv_b's key rows) and the shared rotary key; its value is head_dim_v wide, from the
    // latent through attn_v_b (or attn_kv_b's value rows). All zero for other families.
    uint32_t n_lora_q = 0;   // <arch>.attention.q_lora_rank
    uint32_t n_lora_kv = 0;  // <arch>.attention.kv_lora_rank
    // The per-head up-projections as one tensor, attn_kv_b [n_lora_kv, n_head x (nope + v)] (the
    // files of the earlier converters, which wrote no key_length_mla), in place of attn_k_b
    // [nope, n_lora_kv, n_head] and attn_v_b [n_lora_kv, v, n_head].
    bool mla_kv_b = false;

    bool is_mla() const { return n_lora_kv > 0; }
    uint32_t mla_cache_width() const { return n_lora_kv + n_rot; }
    uint32_t head_dim_nope() const { return head_dim_k - n_rot; }

    bool is_recurrent(uint32_t layer) const {
        return layer < recurrent_layers.size() && recurrent_layers[layer];
    }
    bool has_recurrent() const { return ssm_d_state > 0; }
    uint64_t ssm_key_dim() const { return uint64_t(ssm_d_state) * ssm_n_group; }
    uint64_t ssm_value_dim() const { return uint64_t(ssm_d_state) * ssm_dt_rank; }
    // Channels of the delta net's convolution: q, k and v side by side.
    uint64_t conv_channels() const { return 2 * ssm_key_dim() + ssm_value_dim(); }
    // The key head value head h reads: qwen35 tiles the value heads over the key heads (h % k),
    // qwen3next groups them per key head (h / (v / k)).
    uint32_t ssm_key_head(uint32_t h) const {
        return ssm_grouped_heads ? h / (ssm_dt_rank / ssm_n_group) : h % ssm_n_group;
    }
    // Columns of ssm_in's output (q, k, v and z): 2 key_dim + 2 value_dim.
    uint64_t ssm_qkvz_dim() const { return 2 * ssm_key_dim() + 2 * ssm_value_dim(); }
    // The widest fused projection output a delta-net layer ungroups (ssm_in's when the file has
    // it, else ssm_ba's); 0 where no projection is fused.
    uint64_t ssm_fused_dim() const {
        if (!ssm_grouped_heads) return 0;
        return std::max<uint64_t>(ssm_fused_qkvz ? ssm_qkvz_dim() : 0, 2 * uint64_t{ssm_dt_rank});
    }

    bool is_moe() const { return n_expert > 0; }
    // Whether layer `layer` has routed experts (the first n_leading_dense layers of a
    // deepseek-style model are dense).
    bool is_moe_layer(uint32_t layer) const { return is_moe() && layer >= n_leading_dense; }
    bool grouped_routing() const { return n_expert_group > 1; }
    // A batch of `tokens` that uses every routed expert twice on average (tokens * k >= 2 *
    // n_expert): one whose RAM-resident experts are worth shipping to a GPU, one read of them
    // against the CPU's compute over the whole batch. The engine ships such batches; the plan
    // sizes its prompt limit by them.
    bool batch_ships_experts(int64_t tokens) const {
        return is_moe() && tokens * int64_t(n_expert_used) >= 2 * int64_t(n_expert);
    }
    // A batch of `tokens` whose projections and FFN, of a layer the CPU holds in RAM beside a GPU,
    // are worth shipping to the GPU: the CPU multiplies a matrix by a batch of 16 or more
    // at its compute rate (several times the time it takes to read the matrix once, as a decode
    // step does), while the bus brings the matrix in about twice that read's time and the GPU's
    // compute is a small part of it. The engine ships such batches; the plan sizes its prompt
    // limit by them.
    static constexpr int64_t kShippedLayerBatch = 16;
    bool batch_ships_layers(int64_t tokens) const { return tokens >= kShippedLayerBatch; }
    // Per-layer head and FFN sizes (the scalars when the file gives one value for all layers).
    uint32_t n_head_at(uint32_t layer) const {
        return detail::per_layer_or(n_head_per_layer, layer, n_head);
    }
    uint32_t n_head_kv_at(uint32_t layer) const {
        return detail::per_layer_or(n_head_kv_per_layer, layer, n_head_kv);
    }
    uint32_t n_ff_at(uint32_t layer) const {
        return detail::per_layer_or(n_ff_per_layer, layer, n_ff);
    }
    // Whether the layer's attention is windowed, and the positions its keys must span for a
    // query: n_swa for a windowed layer, all of `n_ctx` otherwise.
    bool is_swa(uint32_t layer) const { return layer < swa_layers.size() && swa_layers[layer]; }
    uint32_t attention_span(uint32_t layer, uint32_t n_ctx) const {
        return is_swa(layer) ? std::min(n_swa, n_ctx) : n_ctx;
    }
    uint32_t n_embd_k_gqa() const { return head_dim_k * n_head_kv; }
    uint32_t n_embd_v_gqa() const { return head_dim_v * n_head_kv; }
};

std::string_view rope_style_name(RopeStyle s);  // "normal", "neox"
// "softmax", "softmax of the chosen", "sigmoid"
std::string_view expert_gating_name(ExpertGating g);

// Reads the hyper-parameters of a supported architecture from `<arch>.*` metadata, with
// llama.cpp's defaults for keys that may be absent. Any integer encoding is accepted (u8..u64,
// i8..i64); head counts and FFN widths may be per-layer arrays. The structural flags
// (tied_output, has_qkv_bias, has_qk_norm, has_rope_freqs) come from the tensors present.
// Errors name the file and the key: an unsupported architecture, a missing required key
// (embedding_length, block_count, attention.head_count, ...), a value of the wrong type or an
// inconsistent value (more experts used than exist, heads that do not divide the embedding).
Result<ModelHparams> load_hparams(const GgufFile& file);

}  // namespace strata
