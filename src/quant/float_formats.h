// Small floating-point encodings found inside GGUF tensors: IEEE binary16 (F16), bfloat16 (BF16)
// and the OCP microscaling E8M0 exponent that scales MXFP4 blocks.
//
// The scalar conversions are exact and independent of the floating-point environment (pure
// integer arithmetic, so flush-to-zero or a changed rounding mode cannot alter them):
//   float -> half / bf16 rounds to nearest, ties to even; values past the largest finite half
//   become Inf; subnormals are produced and read, never flushed;
//   NaN stays NaN: quieted, payload truncated, sign kept (what x86 F16C does, bit for bit);
//   half / bf16 -> float is exact for every pattern (NaNs are quieted, as F16C does).
// When the compiler targets F16C (-mf16c, -march=native) the scalar fp16 conversions use the
// instructions; the row converters in float_formats.cpp also pick them at run time.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace strata::quant {

namespace detail {

constexpr uint32_t float_bits(float f) {
    return std::bit_cast<uint32_t>(f);
}
constexpr float float_from_bits(uint32_t u) {
    return std::bit_cast<float>(u);
}

// Portable fp16 -> fp32, always compiled so that tests can hold the F16C path against it.
constexpr float fp16_to_fp32_portable(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) {  // Inf, or NaN with its payload kept and the quiet bit set
        const uint32_t payload = mantissa << 13;
        return float_from_bits(sign | 0x7f800000u | payload | (payload ? 0x400000u : 0u));
    }
    if (exponent != 0) {  // normal: rebias the exponent from 15 to 127
        return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    }
    if (mantissa == 0) return float_from_bits(sign);
    // Subnormal: value = mantissa * 2^-24. Normalise: with p the index of the leading one,
    // value = 1.f * 2^(p - 24), a normal float.
    const int p = std::bit_width(mantissa) - 1;
    const uint32_t fraction = (mantissa << (23 - p)) & 0x7fffffu;
    return float_from_bits(sign | (uint32_t(p + 103) << 23) | fraction);
}

// Portable fp32 -> fp16, round to nearest even.
constexpr uint16_t fp32_to_fp16_portable(float f) {
    const uint32_t x = float_bits(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {  // NaN: quiet it, keep the top payload bits
        return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16: it and everything
    // above rounds to Inf.
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
    if (a >= 0x38800000u) {  // normal half (>= 2^-14): rebias, round the 13 dropped bits
        const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
        return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
    }
    // Subnormal half or zero: the value in units of 2^-24, rounded to nearest even. Below 2^-25
    // (float exponent < 102) that is always 0.
    const uint32_t exponent = a >> 23;
    if (exponent < 102) return sign;
    const uint32_t significand = (a & 0x7fffffu) | 0x800000u;  // value = significand * 2^(e-150)
    const uint32_t shift = 126 - exponent;                     // 14..24
    uint32_t units = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (units & 1u))) ++units;  // may carry into 0x400: fine
    return uint16_t(sign | units);
}

}  // namespace detail

inline float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return detail::fp16_to_fp32_portable(h);
#endif
}

inline uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
    return detail::fp32_to_fp16_portable(f);
#endif
}

// bfloat16 is the top half of a float: widening is a shift.
constexpr float bf16_to_fp32(uint16_t b) {
    return detail::float_from_bits(uint32_t(b) << 16);
}

// Round to nearest even; NaN is quieted (bit 6 of the bf16 set) so it cannot round to Inf.
constexpr uint16_t fp32_to_bf16(float f) {
    const uint32_t x = detail::float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// E8M0: an unsigned power-of-two exponent with bias 127, as in the OCP MX formats.
// MXFP4 stores its E2M1 codes doubled (see kMxfp4Values in blocks.h), so its dequantizer uses
// half the E8M0 value: 2^(e - 128). e = 0 and 1 give the float subnormals 2^-128 and 2^-127.
// The spec reserves 0xFF for NaN; like the reference engine we read it as 2^127 (no encoder
// produces it: it would take block maxima near 2^130, beyond float range).
constexpr float e8m0_to_fp32_half(uint8_t e) {
    return detail::float_from_bits(e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23);
}
constexpr float e8m0_to_fp32(uint8_t e) {
    return detail::float_from_bits(e == 0 ? 0x00400000u : uint32_t(e) << 23);
}

// Row converters (contiguous arrays that do not overlap). They use F16C instructions (fp16) and
// AVX2 (bf16) when the CPU has them; every path gives the scalar conversions' bits.
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

// Which fp16 row path fp16_to_fp32_row / fp32_to_fp16_row take on this machine ("f16c" or
// "portable"); tests and benchmarks print it.
const char* fp16_row_path();

namespace detail {
// The portable row paths, for tests that compare them with the F16C ones.
void fp16_to_fp32_row_portable(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row_portable(const float* src, uint16_t* dst, int64_t n);
}  // namespace detail

}  // namespace strata::quant
