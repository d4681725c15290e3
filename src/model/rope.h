// Rotary position embedding: the rotation applied to q and k before attention.
//
// Angles follow the reference engine exactly: theta_i = pos * base^(-2i/n_rot) computed by
// repeated multiplication in float, divided by the per-dimension frequency factor
// (rope_freqs.weight, or llama3's formula when only metadata describes it), then linear or YaRN
// scaling. Rotation pairs are adjacent dimensions (normal) or dimension i with i + n_rot/2 (NEOX);
// dimensions past n_rot are left as they are.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hparams.h"
#include "model/tensor_view.h"
#include "util/result.h"

namespace strata {

struct RopeConfig {
    int n_rot = 0;
    RopeStyle style = RopeStyle::Normal;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;   // 1 / context extension factor (linear, YaRN)
    float ext_factor = 0.0f;   // YaRN: 1 mixes interpolation and extrapolation per dimension
    float attn_factor = 1.0f;  // magnitude scale of cos and sin
    float corr_low = 0.0f, corr_high = 0.0f;  // YaRN: dimensions between the two ramps
    std::vector<float> freq_factors;          // n_rot/2 divisors of theta, or empty
    // Interleaved multi-section rope (qwen35: rope.dimension_sections): pair i belongs to section
    // i % 3 while that section has pairs left, else to the fourth. Text positions are the token's
    // position in the first three sections and 0 in the fourth, so that section's pairs are not
    // rotated: marked here (n_rot/2 flags; empty when every pair is rotated).
    std::vector<bool> unrotated_pairs;
};

// From the model's hyper-parameters and its rope_freqs tensor (optional, F32).
Result<RopeConfig> make_rope_config(const ModelHparams& hp, const TensorView* rope_freqs);

// The scale of a latent-attention layer's query-key products (deepseek2): 1/sqrt(head_dim_k)
// times the square of DeepSeek's YaRN magnitude, rc's attention factor with the context
// extension's correction and the model's mscale_all_dim (RopeScaling) applied, as the
// reference computes it (1/sqrt(head_dim_k) without scaling).
float mla_attention_scale(const RopeConfig& rc, const ModelHparams& hp);

// cos and sin of the n_rot/2 rotation angles at position pos.
void rope_angles(const RopeConfig& rc, int64_t pos, float* cos, float* sin);

// Rotates each of n_head heads (head_dim floats each, consecutive in x) by the given angles.
void rope_apply(const RopeConfig& rc, float* x, int n_head, int head_dim, const float* cos,
                const float* sin);

}  // namespace strata
