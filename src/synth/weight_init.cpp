#include "synth/weight_init.h"

#include <algorithm>
#include <cmath>

namespace strata {

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;   // splitmix64 increment
constexpr uint64_t kRowSalt = 0x6a09e667f3bcc909ull;  // separates row factors from elements

// Approximately standard normal from 64 random bits, cheaply: the Irwin-Hall sum of four
// independent 16-bit uniforms, centred and scaled to exactly mean 0 and variance 1. Bounded at
// +-3.46 sigma (no long tails), which is fine for weights that only need the right scale.
// Variance of one uniform over 0..65535 is (65536^2 - 1) / 12; four of them: (65536^2 - 1) / 3.
const float kIrwinHallScale = static_cast<float>(1.0 / std::sqrt(4294967295.0 / 3.0));

inline float normal_from_bits(uint64_t h) {
    const uint32_t s = static_cast<uint32_t>((h & 0xffff) + ((h >> 16) & 0xffff) +
                                             ((h >> 32) & 0xffff) + (h >> 48));
    return static_cast<float>(static_cast<int32_t>(s) - 131070) * kIrwinHallScale;
}

// Uniform in [0, 1) from the top 24 bits.
inline float unit_from_bits(uint64_t h) {
    return static_cast<float>(h >> 40) * 0x1p-24f;
}

inline uint64_t element_bits(uint64_t key, uint64_t index) {
    return mix64(key + index * kGolden);
}

inline void normal_loop(uint64_t key, uint64_t first, size_t n, float scale, float* out) {
    for (size_t i = 0; i < n; ++i) out[i] = scale * normal_from_bits(element_bits(key, first + i));
}

// The hash needs 64-bit multiplies, which only AVX-512DQ has as a vector instruction; emulating
// them with SSE2 is slower than scalar code, so the baseline build keeps this loop scalar, and
// machines with AVX-512DQ run a vectorised copy (same integer and IEEE operations, same bytes).
__attribute__((optimize("no-tree-vectorize"))) void normal_loop_scalar(uint64_t key, uint64_t first,
                                                                       size_t n, float scale,
                                                                       float* out) {
    normal_loop(key, first, n, scale, out);
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq,avx512vl"))) void normal_loop_avx512(uint64_t key,
                                                                             uint64_t first,
                                                                             size_t n, float scale,
                                                                             float* out) {
    normal_loop(key, first, n, scale, out);
}
#endif

void fill_normal(uint64_t key, uint64_t first, size_t n, float scale, float* out) {
#if defined(__x86_64__)
    static const bool avx512 =
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (avx512) return normal_loop_avx512(key, first, n, scale, out);
#endif
    normal_loop_scalar(key, first, n, scale, out);
}

float role_gain(TensorRole role) {
    switch (role) {
        case TensorRole::AttnQ:
        case TensorRole::AttnK:
            return 1.28f;
        case TensorRole::AttnV:
            return 0.96f;
        case TensorRole::AttnOutput:
            return 0.80f;
        case TensorRole::FfnGate:
        case TensorRole::FfnUp:
        case TensorRole::ExpertGate:
        case TensorRole::ExpertUp:
        case TensorRole::SharedGate:
        case TensorRole::SharedUp:
            return 0.96f;
        case TensorRole::FfnDown:
        case TensorRole::ExpertDown:
        case TensorRole::SharedDown:
            return 1.39f;
        case TensorRole::MoeRouter:
            return 3.0f;
        default:
            return 1.0f;
    }
}

}  // namespace

WeightInit weight_init(const TensorSpec& spec, const ModelHparams& hp) {
    const float d = hp.tied_output ? 6.0f : 1.0f;
    WeightInit w;
    if (spec.is_bias) {
        w.kind = InitKind::Normal;
        w.sigma = 0.1f;
    } else if (spec.role == TensorRole::TokenEmbedding || spec.role == TensorRole::Output) {
        w.kind = InitKind::RowScaledNormal;
        w.sigma = spec.role == TensorRole::TokenEmbedding ? 0.1f / d : 0.1f;
        w.row_log_sigma = 0.5f;
    } else if (spec.role == TensorRole::OutputNorm) {
        const float k = 4.5f * d * std::sqrt(256.0f / static_cast<float>(hp.n_embd));
        w.kind = InitKind::Uniform;
        w.lo = 0.6f * k;
        w.hi = 1.4f * k;
    } else if (spec.role == TensorRole::SsmA) {
        // A = -exp(A_log): negative, so the state decays by exp(A * softplus(...)) < 1 a step.
        w.kind = InitKind::Uniform;
        w.lo = -1.5f;
        w.hi = -0.1f;
    } else if (spec.role == TensorRole::AttnSinks) {
        // Logits beside the scores' own (about unit size): large enough to take a visible share.
        w.kind = InitKind::Normal;
        w.sigma = 1.0f;
    } else if (is_norm_role(spec.role)) {
        w.kind = InitKind::Uniform;
        w.lo = 0.6f;
        w.hi = 1.4f;
    } else {
        w.kind = InitKind::Normal;
        w.sigma = role_gain(spec.role) / std::sqrt(static_cast<float>(spec.row_length()));
        // A sigmoid router's scores saturate where softmax logits only spread apart: at the
        // softmax routers' gain most of the chosen experts score near 1 and the selection bias
        // decides between near-ties. Logits of about two keep the scores apart.
        if (spec.role == TensorRole::MoeRouter && hp.expert_gating == ExpertGating::Sigmoid) {
            w.sigma *= 2.0f / role_gain(spec.role);
        }
    }
    return w;
}

uint64_t tensor_stream_key(uint64_t seed, std::string_view tensor_name) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the name, then mixed with the seed
    for (char c : tensor_name) {
        h ^= static_cast<uint8_t>(c);
        h *= 0x100000001b3ull;
    }
    return mix64(mix64(seed) ^ h);
}

void generate_values(const WeightInit& init, uint64_t key, uint64_t first, size_t n,
                     uint64_t row_length, float* out) {
    switch (init.kind) {
        case InitKind::Normal:
            fill_normal(key, first, n, init.sigma, out);
            break;
        case InitKind::Uniform: {
            const float span = init.hi - init.lo;
            for (size_t i = 0; i < n; ++i) {
                out[i] = init.lo + span * unit_from_bits(element_bits(key, first + i));
            }
            break;
        }
        case InitKind::RowScaledNormal: {
            const uint64_t row_key = mix64(key ^ kRowSalt);
            size_t done = 0;
            while (done < n) {
                const uint64_t e = first + done;
                const uint64_t row = e / row_length;
                const size_t take =
                    static_cast<size_t>(std::min<uint64_t>(n - done, (row + 1) * row_length - e));
                const float z = normal_from_bits(element_bits(row_key, row));
                const float scale = init.sigma * std::exp(init.row_log_sigma * z);
                fill_normal(key, e, take, scale, out + done);
                done += take;
            }
            break;
        }
    }
}

}  // namespace strata
