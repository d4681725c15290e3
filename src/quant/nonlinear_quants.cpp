// Formats whose 4-bit codes index a non-uniform value table: IQ4_NL, IQ4_XS (kIq4nlValues) and
// MXFP4 (E2M1 values, kMxfp4Values).
//
// IQ4_NL / IQ4_XS quantization reproduces llama-quantize without an importance matrix, so the
// bytes match the reference engine's files. Per 32-element sub-block it
//   1. weighs each element by x^2 (large weights matter most),
//   2. tries the scales that map the value of largest magnitude, max, onto grid value
//      -127 + t for t = -7..7 (first with scale max / 127), assigning each element its nearest
//      grid value and fitting the least-squares scale sum(w q x) / sum(w q^2) to those codes,
//   3. keeps the fitted scale with the smallest weighted error.
// IQ4_NL stores that scale as fp16 and re-assigns codes with it. IQ4_XS stores one fp16 d per
// 256 elements (the largest sub-block scale / -32) and a 6-bit multiplier per sub-block, then
// re-assigns codes with the rounded sub-block scale. All intermediate arithmetic is float in
// the reference's order, which keeps the results bit-identical.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/float_formats.h"
#include "quant/reference.h"

#include "quant/strict_fp.h"

namespace strata::quant::ref {

namespace {

// Index of the grid value nearest to v (kIq4nlValues is sorted); on an exact tie, the upper one.
// The final comparison is written as the reference writes it ((v - lo) < (hi - v) in float) so
// that values a rounding error away from a midpoint go the same way. Counting the grid values
// <= v instead of a binary search gives the same bracket without unpredictable branches.
int nearest_iq4nl_index(float v) {
    const int8_t* g = kIq4nlValues;
    if (v <= float(g[0])) return 0;
    if (v >= float(g[15])) return 15;
    int hi = 1;  // first index with v < g[hi]
    for (int k = 1; k < 15; ++k) hi += float(g[k]) <= v;
    return v - float(g[hi - 1]) < float(g[hi]) - v ? hi - 1 : hi;
}

// Steps 1-3 above for one 32-element sub-block: the best scale (0 for an all-zero block).
float iq4_subblock_scale(const float* x) {
    float weight[kQK];
    float amax = 0, max = 0;
    for (int j = 0; j < kQK; ++j) {
        weight[j] = x[j] * x[j];
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    if (amax < kIq4ZeroBlockMax) return 0;

    // Weighted fit of a scale to the codes that inverse scale `id` assigns.
    struct Fit {
        float sum_qx = 0, sum_q2 = 0;
    };
    auto fit = [&](float id) {
        Fit f;
        for (int j = 0; j < kQK; ++j) {
            const float q = float(kIq4nlValues[nearest_iq4nl_index(id * x[j])]);
            f.sum_qx += weight[j] * q * x[j];
            f.sum_q2 += weight[j] * q * q;
        }
        return f;
    };

    const float first_d = -max / float(kIq4nlValues[0]);
    Fit f = fit(1.0f / first_d);
    float d = f.sum_qx / f.sum_q2;
    float best = d * f.sum_qx;  // weighted sum of x * fitted value: larger is better
    for (int t = -7; t <= 7; ++t) {
        f = fit(float(t + kIq4nlValues[0]) / max);
        if (f.sum_q2 > 0 && f.sum_qx * f.sum_qx > best * f.sum_q2) {
            d = f.sum_qx / f.sum_q2;
            best = d * f.sum_qx;
        }
    }
    return d;
}

// Codes of 32 elements for inverse scale id, packed as nibbles (element j low, j + 16 high).
void pack_iq4_codes(const float* x, float id, uint8_t* qs) {
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = nearest_iq4nl_index(id * x[j]);
        const int hi = nearest_iq4nl_index(id * x[j + kQK / 2]);
        qs[j] = uint8_t(lo | (hi << 4));
    }
}

// MXFP4 code nearest to v for scale d (codes scale kMxfp4Values); on a tie the lower code, so
// zero is always code 0, never the -0 code 8.
int nearest_mxfp4_code(float v, float d) {
    int best = 0;
    float best_err = std::fabs(float(kMxfp4Values[0]) * d - v);
    for (int c = 1; c < 16; ++c) {
        const float e = std::fabs(float(kMxfp4Values[c]) * d - v);
        if (e < best_err) {
            best = c;
            best_err = e;
        }
    }
    return best;
}

}  // namespace

// ---- dequantization ---------------------------------------------------------------------------

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = d * float(kIq4nlValues[x[i].qs[j] & 0x0f]);
            y[j + kQK / 2] = d * float(kIq4nlValues[x[i].qs[j] >> 4]);
        }
    }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int s = 0; s < kQK_K / kQK; ++s, y += kQK) {
            const float dl = d * float(iq4xs_scale(x[i], s) - 32);
            const uint8_t* qs = x[i].qs + 16 * s;
            for (int j = 0; j < kQK / 2; ++j) {
                y[j] = dl * float(kIq4nlValues[qs[j] & 0x0f]);
                y[j + kQK / 2] = dl * float(kIq4nlValues[qs[j] >> 4]);
            }
        }
    }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = float(kMxfp4Values[x[i].qs[j] & 0x0f]) * d;
            y[j + kQK / 2] = float(kMxfp4Values[x[i].qs[j] >> 4]) * d;
        }
    }
}

// ---- quantization -----------------------------------------------------------------------------

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        const float d = iq4_subblock_scale(x);
        y[i].d = fp32_to_fp16(d);
        pack_iq4_codes(x, d != 0 ? 1.0f / d : 0.0f, y[i].qs);
    }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
    constexpr int kSub = kQK_K / kQK;  // 8 sub-blocks of 32
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float scale[kSub];
        float max_scale = 0, amax_scale = 0;
        for (int s = 0; s < kSub; ++s) {
            scale[s] = iq4_subblock_scale(x + kQK * s);
            if (std::fabs(scale[s]) > amax_scale) {
                amax_scale = std::fabs(scale[s]);
                max_scale = scale[s];
            }
        }
        // The largest sub-block scale gets multiplier -32, the end of the 6-bit range with room.
        const float d = -max_scale / 32;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        BlockIQ4_XS& b = y[i];
        b.d = fp32_to_fp16(d);
        b.scales_h = 0;
        std::memset(b.scales_l, 0, sizeof b.scales_l);
        for (int s = 0; s < kSub; ++s) {
            int l = round_nearest_even(id * scale[s]);
            l = l < -32 ? -32 : (l > 31 ? 31 : l);
            const float dl = d * float(l);
            pack_iq4_codes(x + kQK * s, dl != 0 ? 1.0f / dl : 0.0f, b.qs + 16 * s);
            const unsigned ls = unsigned(l + 32);
            b.scales_l[s / 2] = uint8_t(b.scales_l[s / 2] | ((ls & 0x0f) << (4 * (s % 2))));
            b.scales_h = uint16_t(b.scales_h | ((ls >> 4) << (2 * s)));
        }
    }
}

// MXFP4: the shared exponent is floor(log2(amax)) - 2, so amax lands in [4, 8) times the scale
// 2^exponent, i.e. on or above the largest E2M1 value 6 (values up to 8 saturate to 6, the
// OCP MX convention); then each element takes the nearest E2M1 value. floor(log2(amax)) is read
// exactly from the float's exponent bits rather than through log2f.
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        float amax = 0;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
        int e = 0;
        if (amax > 0) {
            int exp2;
            std::frexp(amax, &exp2);  // amax = m * 2^exp2, m in [0.5, 1): floor(log2) = exp2 - 1
            e = (exp2 - 1) - 2 + 127;
            e = e < 0 ? 0 : (e > 254 ? 254 : e);
        }
        y[i].e = uint8_t(e);
        const float d = e8m0_to_fp32_half(uint8_t(e));
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = nearest_mxfp4_code(x[j], d);
            const int hi = nearest_mxfp4_code(x[j + kQK / 2], d);
            y[i].qs[j] = uint8_t(lo | (hi << 4));
        }
    }
}

}  // namespace strata::quant::ref
