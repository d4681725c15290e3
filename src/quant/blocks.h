// Block layouts of the quantized GGUF tensor formats, byte for byte as ggml writes them, plus the
// small tables and bit-field accessors that say what the stored codes mean.
//
// A row of n weights is n / block_size consecutive blocks. Every format splits a block of 32 the
// same way: byte j of a 16-byte nibble array holds element j in its low nibble and element j + 16
// in its high nibble. fp16 fields are raw IEEE binary16 bits (float_formats.h converts them).
//
// Geometry (elements per block, bytes per block) comes from the one table in gguf/tensor_type.h;
// the static_asserts below tie every struct to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gguf/tensor_type.h"

namespace strata::quant {

inline constexpr int kQK = 32;     // elements per block of the 32-wide formats
inline constexpr int kQK_K = 256;  // elements per super-block of the K-quants and IQ4_XS

// ---- 32-element formats ----------------------------------------------------------------------

// x = d * (q - 8), q in [0, 15].
struct BlockQ4_0 {
    uint16_t d;      // fp16 scale
    uint8_t qs[16];  // nibbles: element j low, element j + 16 high
};

// x = d * q + m, q in [0, 15].
struct BlockQ4_1 {
    uint16_t d;  // fp16 scale
    uint16_t m;  // fp16 block minimum
    uint8_t qs[16];
};

// x = d * (q - 16), q in [0, 31]: low 4 bits in qs, bit 4 of element j in bit j of qh (read as a
// little-endian uint32).
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};

// x = d * q + m, q in [0, 31], bits as in Q5_0.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[16];
};

// x = d * q, q in [-127, 127].
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};

// Q8_0 plus s = d * sum(qs), so a dot product with Q4_1 / Q5_1 weights can apply their minimum
// in one multiply. Only used for activations, never stored in files.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;  // fp16 of d * sum(qs)
    int8_t qs[32];
};

// IQ4_NL: x = d * kIq4nlValues[q], q in [0, 15]; a non-uniform 4-bit grid, denser near zero.
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[16];
};

// MXFP4 (OCP microscaling FP4): x = 2^(e - 128) * kMxfp4Values[q], i.e. a shared power-of-two
// scale 2^(e - 127) times an E2M1 value. The exponent byte comes first.
struct BlockMXFP4 {
    uint8_t e;  // E8M0 shared exponent
    uint8_t qs[16];
};

// ---- 256-element super-blocks (K-quants, IQ4_XS) ---------------------------------------------
//
// Element order inside a super-block follows the 2-bit / 4-bit packing (see the accessors and
// the dequantizers in k_quants.cpp): a byte holds elements that are 32 (4-bit) or 32 * k (2-bit)
// apart, so one 32-byte load feeds a whole SIMD register.

// x = d * sc * q - dmin * m per 16-element sub-block; sc, m 4-bit, q in [0, 3].
// Element 128h + 32j + l (l < 32) sits in bits 2j of qs[32h + l]; sub-block s = element / 16.
struct BlockQ2_K {
    uint8_t scales[16];  // sub-block s: low nibble sc, high nibble m
    uint8_t qs[64];
    uint16_t d;     // fp16 scale of the sub-block scales
    uint16_t dmin;  // fp16 scale of the sub-block minima
};

// x = d * (sc - 32) * (q - 4) per 16-element sub-block; sc 6-bit, q in [0, 7]: low 2 bits as in
// Q2_K, bit 2 of element 128h + 32j + l in bit (4h + j) of hmask[l].
struct BlockQ3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];  // 16 six-bit scales, see q3k_scale()
    uint16_t d;
};

// x = d * sc * q - dmin * m per 32-element sub-block; sc, m 6-bit, q in [0, 15].
// Element 64j + l (l < 32) is the low nibble of qs[32j + l] (sub-block 2j), element 64j + 32 + l
// the high nibble (sub-block 2j + 1).
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];  // 8 six-bit scales and 8 six-bit minima, see k4_scale_min()
    uint8_t qs[128];
};

// Q4_K with a fifth bit: q in [0, 31], bit 4 of element 64j + l in bit 2j of qh[l], of element
// 64j + 32 + l in bit 2j + 1.
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};

// x = d * sc * (q - 32) per 16-element sub-block; sc int8, q in [0, 63]. For half h (128
// elements) and l < 32, with ql' = ql + 64h and qh' = qh + 32h:
//   element 128h + l      : low nibble of ql'[l],      bits 0-1 of qh'[l]
//   element 128h + 32 + l : low nibble of ql'[l + 32], bits 2-3 of qh'[l]
//   element 128h + 64 + l : high nibble of ql'[l],     bits 4-5 of qh'[l]
//   element 128h + 96 + l : high nibble of ql'[l + 32], bits 6-7 of qh'[l]
struct BlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};

// x = d * q, q in [-127, 127], with the sums of each 16 quants precomputed (the dot products of
// the K-quants subtract minima with them). Only used for activations. d is fp32.
struct BlockQ8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};

// IQ4_XS: IQ4_NL values with a 6-bit scale per 32-element sub-block:
// x = d * (ls - 32) * kIq4nlValues[q], element order within a sub-block as in IQ4_NL.
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;    // bits 2s..2s+1: high 2 bits of ls for sub-block s
    uint8_t scales_l[4];  // nibble s % 2 of byte s / 2: low 4 bits of ls
    uint8_t qs[128];      // sub-block s: qs[16s .. 16s + 15]
};

// ---- value tables -----------------------------------------------------------------------------

// IQ4_NL / IQ4_XS grid (a non-uniform 4-bit code book fitted to weight distributions).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// FP4 E2M1 values, doubled so they are integers: code c means kMxfp4Values[c] / 2, i.e.
// {0, 0.5, 1, 1.5, 2, 3, 4, 6} for c = 0..7 and the negatives for c = 8..15 (c = 8 is -0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// ---- packed-field accessors -------------------------------------------------------------------

// Q4_K / Q5_K: sub-block j (0..7) scale and minimum, 6 bits each, packed into 12 bytes:
// bytes 0-3 hold sc[0..3] (low 6 bits) and the top 2 bits of sc[4..7]; bytes 4-7 likewise for m;
// bytes 8-11 hold the low nibbles of sc[4..7] (low) and m[4..7] (high).
struct ScaleMin {
    uint8_t scale;
    uint8_t min;
};
constexpr ScaleMin k4_scale_min(const uint8_t* s, int j) {
    if (j < 4) return {uint8_t(s[j] & 63), uint8_t(s[j + 4] & 63)};
    return {uint8_t((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4)),
            uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4))};
}
// Inverse of k4_scale_min for all 8 sub-blocks; every value must be < 64.
constexpr void k4_pack_scale_min(const uint8_t* scale, const uint8_t* min, uint8_t* s) {
    for (int j = 0; j < 4; ++j) {
        s[j] = uint8_t(scale[j] | ((scale[j + 4] >> 4) << 6));
        s[j + 4] = uint8_t(min[j] | ((min[j + 4] >> 4) << 6));
        s[j + 8] = uint8_t((scale[j + 4] & 0x0f) | ((min[j + 4] & 0x0f) << 4));
    }
}

// Q3_K: sub-block j (0..15) scale, 6 bits, packed into 12 bytes: low nibbles in bytes 0-7
// (j < 8 low nibble of byte j, j >= 8 high nibble of byte j - 8), top 2 bits in bits 2(j/4) of
// byte 8 + j % 4. The stored value is sc; the multiplier is sc - 32.
constexpr uint8_t q3k_scale(const uint8_t* s, int j) {
    const uint8_t low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
    const uint8_t high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return uint8_t(low | (high << 4));
}
// Inverse of q3k_scale for all 16 sub-blocks; every value must be < 64.
constexpr void q3k_pack_scales(const uint8_t* scale, uint8_t* s) {
    for (int i = 0; i < 12; ++i) s[i] = 0;
    for (int j = 0; j < 16; ++j) {
        if (j < 8) {
            s[j] = uint8_t(s[j] | (scale[j] & 0x0f));
        } else {
            s[j - 8] = uint8_t(s[j - 8] | ((scale[j] & 0x0f) << 4));
        }
        s[8 + j % 4] = uint8_t(s[8 + j % 4] | ((scale[j] >> 4) << (2 * (j / 4))));
    }
}

// IQ4_XS: sub-block j (0..7) scale ls, 6 bits; the multiplier is ls - 32.
constexpr uint8_t iq4xs_scale(const BlockIQ4_XS& b, int j) {
    return uint8_t(((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) |
                   (((b.scales_h >> (2 * j)) & 3) << 4));
}

// ---- layout checks ----------------------------------------------------------------------------

template <typename Block>
constexpr bool block_matches(TensorType t, int elements) {
    return std::is_standard_layout_v<Block> && std::is_trivially_copyable_v<Block> &&
           tensor_type_info(t).has_value() && sizeof(Block) == tensor_type_info(t)->type_size &&
           tensor_type_info(t)->block_size == uint32_t(elements);
}

static_assert(block_matches<BlockQ4_0>(TensorType::Q4_0, kQK));
static_assert(block_matches<BlockQ4_1>(TensorType::Q4_1, kQK));
static_assert(block_matches<BlockQ5_0>(TensorType::Q5_0, kQK));
static_assert(block_matches<BlockQ5_1>(TensorType::Q5_1, kQK));
static_assert(block_matches<BlockQ8_0>(TensorType::Q8_0, kQK));
static_assert(block_matches<BlockQ8_1>(TensorType::Q8_1, kQK));
static_assert(block_matches<BlockIQ4_NL>(TensorType::IQ4_NL, kQK));
static_assert(block_matches<BlockMXFP4>(TensorType::MXFP4, kQK));
static_assert(block_matches<BlockQ2_K>(TensorType::Q2_K, kQK_K));
static_assert(block_matches<BlockQ3_K>(TensorType::Q3_K, kQK_K));
static_assert(block_matches<BlockQ4_K>(TensorType::Q4_K, kQK_K));
static_assert(block_matches<BlockQ5_K>(TensorType::Q5_K, kQK_K));
static_assert(block_matches<BlockQ6_K>(TensorType::Q6_K, kQK_K));
static_assert(block_matches<BlockQ8_K>(TensorType::Q8_K, kQK_K));
static_assert(block_matches<BlockIQ4_XS>(TensorType::IQ4_XS, kQK_K));

// Field offsets where padding or reordering could silently break compatibility.
static_assert(offsetof(BlockQ4_1, qs) == 4 && offsetof(BlockQ5_0, qs) == 6);
static_assert(offsetof(BlockQ5_1, qh) == 4 && offsetof(BlockQ5_1, qs) == 8);
static_assert(offsetof(BlockQ8_1, qs) == 4 && offsetof(BlockMXFP4, qs) == 1);
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ3_K, d) == 108);
static_assert(offsetof(BlockQ4_K, qs) == 16 && offsetof(BlockQ5_K, qs) == 48);
static_assert(offsetof(BlockQ6_K, scales) == 192 && offsetof(BlockQ6_K, d) == 208);
static_assert(offsetof(BlockQ8_K, bsums) == 260 && offsetof(BlockIQ4_XS, qs) == 8);

}  // namespace strata::quant
