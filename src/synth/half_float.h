// float <-> IEEE half (F16) and bfloat16 (BF16) conversion, bit-exact and portable.
// float -> half rounds to nearest, ties to even (what ggml and numpy do); NaN stays NaN (quiet,
// sign kept), values beyond the range become infinity, tiny values become subnormals or signed
// zero. Header-only so that conversion loops inline these and vectorise.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace strata {

inline uint16_t float_to_f16(float f) {
    // Branch-free (every case is computed, then selected with masks) so conversion loops
    // vectorise.
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t x = bits & 0x7fffffffu;  // |f|
    // Normal half (|f| >= 2^-14): rebias the exponent (127 -> 15, i.e. subtract 112 << 23) and
    // round the 23-bit mantissa to 10 bits, ties to even; a carry moves into the exponent.
    const uint32_t normal = (x - 0x38000000u + 0xfffu + ((x >> 13) & 1u)) >> 13;
    // Subnormal half (|f| < 2^-14) counts units of 2^-24: adding 0.5 puts |f| into a float whose
    // last mantissa bit is worth 2^-24, so the FPU's round-to-nearest-even does the rounding
    // (0x400, the smallest normal, comes out right too). Tiny inputs become signed zero.
    const uint32_t subnormal =
        std::bit_cast<uint32_t>(std::bit_cast<float>(x) + 0.5f) - 0x3f000000u;
    // NaN keeps its top payload bits and gets the quiet bit, so it can never become infinity.
    const uint32_t nan = 0x7e00u | ((x >> 13) & 0x3ffu);
    const uint32_t is_normal = 0u - static_cast<uint32_t>(x >= 0x38800000u);
    const uint32_t is_inf = 0u - static_cast<uint32_t>(x >= 0x477ff000u);  // >= 65520, or inf
    const uint32_t is_nan = 0u - static_cast<uint32_t>(x > 0x7f800000u);
    uint32_t r = (normal & is_normal) | (subnormal & ~is_normal);
    r = (0x7c00u & is_inf) | (r & ~is_inf);
    r = (nan & is_nan) | (r & ~is_nan);
    return static_cast<uint16_t>(sign | r);
}

inline float f16_to_float(uint16_t h) {
    const uint32_t sign = uint32_t{h & 0x8000u} << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;  // signed zero
    } else {
        // Subnormal half: normalise. Value = mant * 2^-24.
        uint32_t e = 113;  // exponent of 2^-14, biased for float
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            --e;
        }
        bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
    return std::bit_cast<float>(bits);
}

inline uint16_t float_to_bf16(float f) {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: truncate, force quiet bit
    }
    // Round the low 16 bits to nearest, ties to even; overflow past the largest finite value
    // correctly becomes infinity. Subnormals are kept (bf16 has the same exponent range).
    const uint32_t odd = (bits >> 16) & 1u;
    return static_cast<uint16_t>((bits + 0x7fffu + odd) >> 16);
}

inline float bf16_to_float(uint16_t b) {
    return std::bit_cast<float>(uint32_t{b} << 16);
}

}  // namespace strata
