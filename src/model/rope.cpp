#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace strata {

namespace {

// The dimension at which a rotation makes n_rot turns over the original context (YaRN).
float yarn_corr_dim(int n_dims, uint32_t n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2 * std::numbers::pi_v<float>)) /
           (2 * std::log(base));
}

// llama3 frequency scaling as the reference converter bakes it into rope_freqs.weight.
std::vector<float> llama3_factors(const ModelHparams& hp) {
    const RopeScaling& sc = hp.rope_scaling;
    const float orig = static_cast<float>(sc.original_context ? sc.original_context : 8192);
    const float low_wavelen = orig / sc.low_freq_factor;
    const float high_wavelen = orig / sc.high_freq_factor;
    std::vector<float> f(hp.n_rot / 2);
    for (size_t i = 0; i < f.size(); ++i) {
        const float freq = std::pow(hp.rope_freq_base, -2.0f * i / hp.n_rot);
        const float wavelen = 2 * std::numbers::pi_v<float> / freq;
        if (wavelen < high_wavelen) {
            f[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            f[i] = sc.factor;
        } else {
            const float smooth =
                (orig / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
            f[i] = 1.0f / ((1 - smooth) / sc.factor + smooth);
        }
    }
    return f;
}

}  // namespace

Result<RopeConfig> make_rope_config(const ModelHparams& hp, const TensorView* rope_freqs) {
    RopeConfig rc;
    rc.n_rot = static_cast<int>(hp.n_rot);
    rc.style = hp.rope_style;
    rc.freq_base = hp.rope_freq_base;
    const RopeScaling& sc = hp.rope_scaling;
    if (rope_freqs && rope_freqs->present()) {
        if (rope_freqs->type != TensorType::F32 || rope_freqs->ne[0] < hp.n_rot / 2) {
            return err("rope_freqs.weight must be F32 with at least " +
                       std::to_string(hp.n_rot / 2) + " values");
        }
        rc.freq_factors.assign(rope_freqs->f32(), rope_freqs->f32() + hp.n_rot / 2);
    } else if (sc.type == "llama3") {
        rc.freq_factors = llama3_factors(hp);
    }
    const auto& sec = hp.rope_sections;
    const uint32_t sect_pairs = sec[0] + sec[1] + sec[2] + sec[3];
    if (sect_pairs > 0) {
        // As the reference engine assigns pairs to sections (its "imrope"): pair i is sector
        // i % sect_pairs, which goes to the time, height or width section by sector % 3 while
        // that section has pairs left, else to the fourth (extra) section.
        std::vector<bool> unrotated(hp.n_rot / 2, false);
        bool any = false;
        for (uint32_t i = 0; i < hp.n_rot / 2; ++i) {
            const uint32_t sector = i % sect_pairs;
            const uint32_t part = sector % 3;
            const bool positioned = sector < 3 * sec[part];
            unrotated[i] = !positioned;
            any = any || !positioned;
        }
        if (any) rc.unrotated_pairs = std::move(unrotated);
    }
    if (sc.type == "linear" || sc.type == "yarn") rc.freq_scale = 1.0f / sc.factor;
    if (sc.type == "longrope") {
        return err("rope scaling type 'longrope' is not supported yet");
    }
    if (sc.type == "yarn") {
        rc.ext_factor = 1.0f;
        rc.attn_factor = sc.attn_factor;
        // DeepSeek's YaRN (mscale_all_dim given) scales the attention logits instead of the
        // rotation's magnitude (mla_attention_scale): the correction rope_angles applies is
        // cancelled here, as the reference does.
        if (sc.mscale_all_dim != 0.0f) {
            const float factor = 1.0f / rc.freq_scale;
            rc.attn_factor = (1.0f / (1.0f + 0.1f * std::log(factor))) * sc.attn_factor;
        }
        const uint32_t orig = sc.original_context ? sc.original_context : hp.n_ctx_train;
        const float lo = yarn_corr_dim(rc.n_rot, orig, 32.0f, rc.freq_base);
        const float hi = yarn_corr_dim(rc.n_rot, orig, 1.0f, rc.freq_base);
        rc.corr_low = std::max(0.0f, std::floor(lo));
        rc.corr_high = std::min(static_cast<float>(rc.n_rot - 1), std::ceil(hi));
    }
    return rc;
}

float mla_attention_scale(const RopeConfig& rc, const ModelHparams& hp) {
    const float log_factor = std::log(1.0f / rc.freq_scale);
    const float mscale = rc.attn_factor * (1.0f + 0.1f * log_factor) *
                         (1.0f + 0.1f * hp.rope_scaling.mscale_all_dim * log_factor);
    return mscale * mscale / std::sqrt(float(hp.head_dim_k));
}

void rope_angles(const RopeConfig& rc, int64_t pos, float* cos, float* sin) {
    const float theta_scale = std::pow(rc.freq_base, -2.0f / static_cast<float>(rc.n_rot));
    float theta = static_cast<float>(pos);
    for (int i = 0; i < rc.n_rot / 2; ++i) {
        const float ff = rc.freq_factors.empty() ? 1.0f : rc.freq_factors[i];
        // A pair of the position-0 section turns by no angle at all.
        const bool still = !rc.unrotated_pairs.empty() && rc.unrotated_pairs[size_t(i)];
        const float extrap = (still ? 0.0f : theta) / ff;
        const float interp = rc.freq_scale * extrap;
        float t = interp;
        float mscale = rc.attn_factor;
        if (rc.ext_factor != 0.0f) {
            const float y = (static_cast<float>(i) - rc.corr_low) /
                            std::max(0.001f, rc.corr_high - rc.corr_low);
            const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * rc.ext_factor;
            t = interp * (1 - ramp) + extrap * ramp;
            mscale *= 1.0f + 0.1f * std::log(1.0f / rc.freq_scale);
        }
        cos[i] = std::cos(t) * mscale;
        sin[i] = std::sin(t) * mscale;
        theta *= theta_scale;
    }
}

void rope_apply(const RopeConfig& rc, float* x, int n_head, int head_dim, const float* cos,
                const float* sin) {
    const int half = rc.n_rot / 2;
    for (int h = 0; h < n_head; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;
        for (int i = 0; i < half; ++i) {
            // normal: dimensions 2i and 2i+1; NEOX: i and i + n_rot/2
            const int a = rc.style == RopeStyle::Neox ? i : 2 * i;
            const int b = rc.style == RopeStyle::Neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos[i] - x1 * sin[i];
            v[b] = x0 * sin[i] + x1 * cos[i];
        }
    }
}

}  // namespace strata
