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
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/float_formats.h"
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

// ---- quantization -----------------------------------------------------------------------------

namespace {

// fp16 bits of the super-block scale d = largest / end, where `end` is the multiplier the
// largest sub-block scale should get. Rounded to nearest, except when that would push the
// largest multiplier more than half a step past the end of its range: then the next fp16 away
// from zero. Only happens when d is an fp16 subnormal (few significant bits); without it the
// largest sub-block of a small-valued block would be clipped by up to half of d's precision.
uint16_t super_block_scale(float largest, float end) {
    const float d = largest / end;
    uint16_t h = fp32_to_fp16(d);
    const float stored = fp16_to_fp32(h);
    const bool clips = stored != 0 ? std::fabs(largest / stored) > std::fabs(end) + 0.5f : d != 0;
    if (clips && (h & 0x7fff) < 0x7bff) ++h;  // next magnitude, same sign
    return h;
}

// Affine super-block (Q2_K: 16 x 16, 4-bit multipliers; Q4_K / Q5_K: 8 x 32, 6-bit): fits every
// sub-block, stores d and dmin as fp16, picks the multipliers, and gives every element its code
// under the stored scales. codes[e] in [0, nmax], in element order.
struct AffineSuperBlock {
    uint16_t d = 0, dmin = 0;
    uint8_t scale_mult[16] = {};
    uint8_t min_mult[16] = {};
    uint8_t codes[kQK_K] = {};
};
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
// negative multiplier, so d = largest / (most negative). codes[e] + qneg in [0, qneg + qpos].
struct SymmetricSuperBlock {
    uint16_t d = 0;
    int mult[16] = {};
    uint8_t codes[kQK_K] = {};
};
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

// 2-bit fields of Q2_K / Q3_K: element 128h + 32j + l in bits 2j of qs[32h + l].
void pack_2bit(const uint8_t* codes, uint8_t* qs) {
    std::memset(qs, 0, kQK_K / 4);
    for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 128, j = (e % 128) / 32, l = e % 32;
        qs[32 * h + l] = uint8_t(qs[32 * h + l] | ((codes[e] & 3) << (2 * j)));
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

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        const AffineSuperBlock b = quantize_affine_super_block(x, 16, 3, 15);
        y[i].d = b.d;
        y[i].dmin = b.dmin;
        for (int s = 0; s < 16; ++s) {
            y[i].scales[s] = uint8_t(b.scale_mult[s] | (b.min_mult[s] << 4));
        }
        pack_2bit(b.codes, y[i].qs);
    }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        const SymmetricSuperBlock b = quantize_symmetric_super_block(x, 4, 3, -32, 31);
        y[i].d = b.d;
        uint8_t stored[16];
        for (int s = 0; s < 16; ++s) stored[s] = uint8_t(b.mult[s] + 32);
        q3k_pack_scales(stored, y[i].scales);
        pack_2bit(b.codes, y[i].qs);
        std::memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int e = 0; e < kQK_K; ++e) {
            const int h = e / 128, j = (e % 128) / 32, l = e % 32;
            y[i].hmask[l] = uint8_t(y[i].hmask[l] | (((b.codes[e] >> 2) & 1) << (4 * h + j)));
        }
    }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        const AffineSuperBlock b = quantize_affine_super_block(x, 32, 15, 63);
        y[i].d = b.d;
        y[i].dmin = b.dmin;
        k4_pack_scale_min(b.scale_mult, b.min_mult, y[i].scales);
        pack_4bit_k(b.codes, y[i].qs);
    }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        const AffineSuperBlock b = quantize_affine_super_block(x, 32, 31, 63);
        y[i].d = b.d;
        y[i].dmin = b.dmin;
        k4_pack_scale_min(b.scale_mult, b.min_mult, y[i].scales);
        pack_4bit_k(b.codes, y[i].qs);
        std::memset(y[i].qh, 0, sizeof y[i].qh);
        for (int s = 0; s < 8; ++s) {
            for (int l = 0; l < 32; ++l) {
                y[i].qh[l] = uint8_t(y[i].qh[l] | (((b.codes[32 * s + l] >> 4) & 1) << s));
            }
        }
    }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        const SymmetricSuperBlock b = quantize_symmetric_super_block(x, 32, 31, -128, 127);
        y[i].d = b.d;
        for (int s = 0; s < 16; ++s) y[i].scales[s] = int8_t(b.mult[s]);
        std::memset(y[i].ql, 0, sizeof y[i].ql);
        std::memset(y[i].qh, 0, sizeof y[i].qh);
        for (int e = 0; e < kQK_K; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            uint8_t& ql = y[i].ql[64 * h + l + 32 * (k % 2)];
            ql = uint8_t(ql | ((b.codes[e] & 0x0f) << (k < 2 ? 0 : 4)));
            uint8_t& qh = y[i].qh[32 * h + l];
            qh = uint8_t(qh | ((b.codes[e] >> 4) << (2 * k)));
        }
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
