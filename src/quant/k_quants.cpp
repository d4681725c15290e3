// K-quants: 256-element super-blocks of 16- or 32-element sub-blocks, each sub-block with its
// own small integer scale (and minimum) times a per-super-block fp16 scale. Q8_K is the
// activation format their dot products use.
//
// Dequantization computes exactly what ggml computes, in the same float order, e.g. for Q4_K
// (d * sc) * q - (dmin * m). Quantization (Q2_K..Q6_K) is this project's own: per sub-block a
// least-squares scale search (scale_search.h), then super-block scales d = largest / max
// multiplier, then per sub-block the best floor/ceil multipliers, and finally each element's
// nearest code under the scales exactly as stored. Q8_K follows ggml's reference quantizer bit
// for bit (it has to: it is what activations become before a K-quant dot product).
// How a super-block's scales and codes are packed into each layout (namespace kq below) is shared
// with the lane-parallel fast path (fast_quantize.h), which replaces only the search.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/float_formats.h"
#include "quant/k_quant_parts.h"
#include "quant/reference.h"
#include "quant/scale_search.h"

#include "quant/strict_fp.h"

namespace strata::quant::ref {

// ---- dequantization ---------------------------------------------------------------------------

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int h = 0; h < 2; ++h) {  // halves of 128
            const uint8_t* qs = x[i].qs + 32 * h;
            for (int j = 0; j < 4; ++j) {  // bit pair j of each byte: 32 elements
                for (int half = 0; half < 2; ++half, y += 16) {  // two sub-blocks of 16
                    const uint8_t sc = x[i].scales[8 * h + 2 * j + half];
                    const float dl = d * float(sc & 0x0f);
                    const float ml = dmin * float(sc >> 4);
                    for (int l = 0; l < 16; ++l) {
                        y[l] = dl * float((qs[16 * half + l] >> (2 * j)) & 3) - ml;
                    }
                }
            }
        }
    }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = x[i].qs + 32 * h;
            for (int j = 0; j < 4; ++j) {
                const int hbit = 4 * h + j;  // bit of hmask[l] holding bit 2 of the code
                for (int half = 0; half < 2; ++half, y += 16) {
                    const float dl = d * float(q3k_scale(x[i].scales, 8 * h + 2 * j + half) - 32);
                    for (int l = 16 * half; l < 16 * half + 16; ++l) {
                        const int low = (qs[l] >> (2 * j)) & 3;
                        const int high = (x[i].hmask[l] >> hbit) & 1;
                        y[l - 16 * half] = dl * float(low + 4 * high - 4);
                    }
                }
            }
        }
    }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int s = 0; s < 8; ++s) {
            const ScaleMin sm = k4_scale_min(x[i].scales, s);
            const float ds = d * float(sm.scale);
            const float dm = dmin * float(sm.min);
            const uint8_t* qs = x[i].qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            for (int l = 0; l < 32; ++l) y[32 * s + l] = ds * float((qs[l] >> shift) & 0x0f) - dm;
        }
    }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int s = 0; s < 8; ++s) {
            const ScaleMin sm = k4_scale_min(x[i].scales, s);
            const float ds = d * float(sm.scale);
            const float dm = dmin * float(sm.min);
            const uint8_t* qs = x[i].qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            for (int l = 0; l < 32; ++l) {
                const int q = ((qs[l] >> shift) & 0x0f) | (((x[i].qh[l] >> s) & 1) << 4);
                y[32 * s + l] = ds * float(q) - dm;
            }
        }
    }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int h = 0; h < 2; ++h, y += 128) {
            const uint8_t* ql = x[i].ql + 64 * h;
            const uint8_t* qh = x[i].qh + 32 * h;
            const int8_t* sc = x[i].scales + 8 * h;
            for (int l = 0; l < 32; ++l) {
                // The four elements l, l + 32, l + 64, l + 96 share qh[l].
                const int q0 = (ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4);
                const int q1 = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
                const int q2 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                const int q3 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                const int s = l / 16;
                y[l] = d * float(sc[s]) * float(q0 - 32);
                y[l + 32] = d * float(sc[s + 2]) * float(q1 - 32);
                y[l + 64] = d * float(sc[s + 4]) * float(q2 - 32);
                y[l + 96] = d * float(sc[s + 6]) * float(q3 - 32);
            }
        }
    }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        for (int e = 0; e < kQK_K; ++e) y[e] = x[i].d * float(x[i].qs[e]);
    }
}

}  // namespace strata::quant::ref

// ---- quantization -----------------------------------------------------------------------------

namespace strata::quant::kq {

// Rounded to nearest, except when that would push the largest multiplier more than half a step
// past the end of its range: then the next fp16 away from zero. Only happens when d is an fp16
// subnormal (few significant bits); without it the largest sub-block of a small-valued block
// would be clipped by up to half of d's precision.
uint16_t super_block_scale(float largest, float end) {
    const float d = largest / end;
    uint16_t h = fp32_to_fp16(d);
    const float stored = fp16_to_fp32(h);
    const bool clips = stored != 0 ? std::fabs(largest / stored) > std::fabs(end) + 0.5f : d != 0;
    if (clips && (h & 0x7fff) < 0x7bff) ++h;  // next magnitude, same sign
    return h;
}

namespace {

// The packing loops run over l, the byte index, and gather each byte's fields, so that they
// compile to vector code (written per element, Q6_K's took a fifth of the fast path's time).

// 2-bit fields of Q2_K / Q3_K: element 128h + 32j + l in bits 2j of qs[32h + l].
void pack_2bit(const uint8_t* codes, uint8_t* qs) {
    for (int h = 0; h < 2; ++h) {
        const uint8_t* c = codes + 128 * h;
        for (int l = 0; l < 32; ++l) {
            qs[32 * h + l] = uint8_t((c[l] & 3) | ((c[32 + l] & 3) << 2) | ((c[64 + l] & 3) << 4) |
                                     ((c[96 + l] & 3) << 6));
        }
    }
}

// Nibbles of Q4_K / Q5_K: element 64j + l low nibble of qs[32j + l], 64j + 32 + l high nibble.
void pack_4bit_k(const uint8_t* codes, uint8_t* qs) {
    for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 32; ++l) {
            qs[32 * j + l] =
                uint8_t((codes[64 * j + l] & 0x0f) | ((codes[64 * j + 32 + l] & 0x0f) << 4));
        }
    }
}

}  // namespace

void store_q2_k(const AffineSuperBlock& b, BlockQ2_K& y) {
    y.d = b.d;
    y.dmin = b.dmin;
    for (int s = 0; s < 16; ++s) y.scales[s] = uint8_t(b.scale_mult[s] | (b.min_mult[s] << 4));
    pack_2bit(b.codes, y.qs);
}

// hmask: bit 2 of element 128h + 32j + l in bit 4h + j of hmask[l].
void store_q3_k(const SymmetricSuperBlock& b, BlockQ3_K& y) {
    y.d = b.d;
    uint8_t stored[16];
    for (int s = 0; s < 16; ++s) stored[s] = uint8_t(b.mult[s] + 32);
    q3k_pack_scales(stored, y.scales);
    pack_2bit(b.codes, y.qs);
    for (int l = 0; l < 32; ++l) {
        unsigned m = 0;
        for (int k = 0; k < 8; ++k) m |= unsigned((b.codes[32 * k + l] >> 2) & 1) << k;
        y.hmask[l] = uint8_t(m);
    }
}

void store_q4_k(const AffineSuperBlock& b, BlockQ4_K& y) {
    y.d = b.d;
    y.dmin = b.dmin;
    k4_pack_scale_min(b.scale_mult, b.min_mult, y.scales);
    pack_4bit_k(b.codes, y.qs);
}

// qh: bit 4 of element 32s + l in bit s of qh[l].
void store_q5_k(const AffineSuperBlock& b, BlockQ5_K& y) {
    y.d = b.d;
    y.dmin = b.dmin;
    k4_pack_scale_min(b.scale_mult, b.min_mult, y.scales);
    pack_4bit_k(b.codes, y.qs);
    for (int l = 0; l < 32; ++l) {
        unsigned m = 0;
        for (int s = 0; s < 8; ++s) m |= unsigned((b.codes[32 * s + l] >> 4) & 1) << s;
        y.qh[l] = uint8_t(m);
    }
}

// Element 128h + 32k + l: low nibble in ql[64h + 32(k % 2) + l] (low half for k < 2, high half
// for k >= 2), top 2 bits in bits 2k of qh[32h + l].
void store_q6_k(const SymmetricSuperBlock& b, BlockQ6_K& y) {
    y.d = b.d;
    for (int s = 0; s < 16; ++s) y.scales[s] = int8_t(b.mult[s]);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* c = b.codes + 128 * h;
        for (int l = 0; l < 32; ++l) {
            y.ql[64 * h + l] = uint8_t((c[l] & 0x0f) | ((c[64 + l] & 0x0f) << 4));
            y.ql[64 * h + 32 + l] = uint8_t((c[32 + l] & 0x0f) | ((c[96 + l] & 0x0f) << 4));
            y.qh[32 * h + l] = uint8_t((c[l] >> 4) | ((c[32 + l] >> 4) << 2) |
                                       ((c[64 + l] >> 4) << 4) | ((c[96 + l] >> 4) << 6));
        }
    }
}

}  // namespace strata::quant::kq

namespace strata::quant::ref {

namespace {

using kq::AffineSuperBlock;
using kq::super_block_scale;
using kq::SymmetricSuperBlock;

// Affine super-block: fits every sub-block, stores d and dmin as fp16, picks the multipliers,
// and gives every element its code under the stored scales.
AffineSuperBlock quantize_affine_super_block(const float* x, int sub_size, int nmax, int max_mult) {
    const int n_sub = kQK_K / sub_size;
    search::AffineFit fit[16];
    float max_scale = 0, max_min = 0;
    for (int s = 0; s < n_sub; ++s) {
        fit[s] = search::fit_affine(x + sub_size * s, sub_size, nmax);
        max_scale = std::max(max_scale, fit[s].scale);
        max_min = std::max(max_min, fit[s].min);
    }
    AffineSuperBlock b;
    b.d = super_block_scale(max_scale, float(max_mult));
    b.dmin = super_block_scale(max_min, float(max_mult));
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int s = 0; s < n_sub; ++s) {
        const float* xs = x + sub_size * s;
        const search::AffineMultipliers m =
            search::best_affine_multipliers(xs, sub_size, nmax, fit[s], d, dmin, max_mult);
        b.scale_mult[s] = uint8_t(m.scale_mult);
        b.min_mult[s] = uint8_t(m.min_mult);
        // The stored scales, computed as the dequantizer computes them.
        const float ds = d * float(m.scale_mult), dm = dmin * float(m.min_mult);
        for (int l = 0; l < sub_size; ++l) {
            b.codes[sub_size * s + l] = uint8_t(search::affine_code(xs[l], nmax, ds, dm));
        }
    }
    return b;
}

// Symmetric super-block of 16 sub-blocks of 16 (Q3_K: codes [-4, 3], multipliers [-32, 31];
// Q6_K: codes [-32, 31], multipliers [-128, 127]). The largest sub-block scale gets the most
// negative multiplier, so d = largest / (most negative).
SymmetricSuperBlock quantize_symmetric_super_block(const float* x, int qneg, int qpos, int mult_lo,
                                                   int mult_hi) {
    constexpr int kSub = 16;
    float scale[16];
    float max_scale = 0, amax_scale = 0;
    for (int s = 0; s < 16; ++s) {
        scale[s] = search::fit_symmetric(x + kSub * s, kSub, qneg, qpos);
        if (std::fabs(scale[s]) > amax_scale) {
            amax_scale = std::fabs(scale[s]);
            max_scale = scale[s];
        }
    }
    SymmetricSuperBlock b;
    b.d = super_block_scale(max_scale, float(mult_lo));
    const float d = fp16_to_fp32(b.d);
    for (int s = 0; s < 16; ++s) {
        const float* xs = x + kSub * s;
        b.mult[s] =
            search::best_symmetric_multiplier(xs, kSub, qneg, qpos, scale[s], d, mult_lo, mult_hi);
        const float ds = d * float(b.mult[s]);
        for (int l = 0; l < kSub; ++l) {
            b.codes[kSub * s + l] = uint8_t(search::symmetric_code(xs[l], qneg, qpos, ds) + qneg);
        }
    }
    return b;
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        kq::store_q2_k(quantize_affine_super_block(x, 16, 3, 15), y[i]);
    }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        kq::store_q3_k(quantize_symmetric_super_block(x, 4, 3, -32, 31), y[i]);
    }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        kq::store_q4_k(quantize_affine_super_block(x, 32, 15, 63), y[i]);
    }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        kq::store_q5_k(quantize_affine_super_block(x, 32, 31, 63), y[i]);
    }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        kq::store_q6_k(quantize_symmetric_super_block(x, 32, 31, -128, 127), y[i]);
    }
}

// ggml's quantize_row_q8_K: scale -127 / (value of largest magnitude), so that value becomes
// -127; codes round half to even and are capped at 127; d = 1 / that scale, kept in fp32.
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float max = 0, amax = 0;
        for (int e = 0; e < kQK_K; ++e) {
            if (std::fabs(x[e]) > amax) {
                amax = std::fabs(x[e]);
                max = x[e];
            }
        }
        BlockQ8_K& b = y[i];
        if (amax == 0) {
            b.d = 0;
            std::memset(b.qs, 0, sizeof b.qs);
            std::memset(b.bsums, 0, sizeof b.bsums);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int e = 0; e < kQK_K; ++e) {
            b.qs[e] = int8_t(std::min(127, round_nearest_even(iscale * x[e])));
        }
        for (int g = 0; g < kQK_K / 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
            b.bsums[g] = int16_t(sum);
        }
        b.d = 1 / iscale;
    }
}

}  // namespace strata::quant::ref
