// The few primitives the quantized-format decoders (formats_*.cuh) are written in, for the GPU
// and for the host: the decoders are plain functions that the kernels call on the GPU and the
// tests call on the CPU (tests/cuda/cuda_matmul_test.cpp checks them against the quant module's
// reference without a GPU). Included by .cu files (nvcc) and by host C++ (then everything here is
// ordinary inline code, with a portable version of each intrinsic).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD inline
#endif
// Loop unrolling in functions compiled for both sides (only nvcc's device pass knows the pragma).
#if defined(__CUDA_ARCH__)
#define STRATA_UNROLL _Pragma("unroll")
#else
#define STRATA_UNROLL
#endif

#if !defined(__CUDA_ARCH__)
#include "quant/float_formats.h"
#endif

namespace strata::cuda {

// ---- loads from a byte pointer whose alignment is known at compile time ------------------------
// `Align` is a power of two the address is known to be a multiple of (a block's offset inside a
// 16-byte aligned chunk, plus the field's offset). Narrower alignment costs more, smaller loads.

// Largest power of two (at most 16) dividing n; 16 for n = 0.
constexpr int pow2_alignment(int n) {
    int a = 1;
    while (a < 16 && n % (a * 2) == 0) a *= 2;
    return a;
}
// Alignment of offset `offset` inside something aligned to `align`.
constexpr int alignment_at(int align, int offset) {
    const int o = pow2_alignment(offset);
    return o < align ? o : align;
}

template <int Align>
STRATA_HD uint32_t load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    if constexpr (Align >= 2) {
        return *reinterpret_cast<const uint16_t*>(p);
    } else {
        return uint32_t(p[0]) | uint32_t(p[1]) << 8;
    }
#else
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}

// Four bytes, little-endian (as every GGUF field is).
template <int Align>
STRATA_HD uint32_t load_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    if constexpr (Align >= 4) {
        return *reinterpret_cast<const uint32_t*>(p);
    } else if constexpr (Align == 2) {
        const auto* h = reinterpret_cast<const uint16_t*>(p);
        return uint32_t(h[0]) | uint32_t(h[1]) << 16;
    } else {
        return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    }
#else
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}

// Eight bytes as two little-endian words (w0 the first four).
template <int Align>
STRATA_HD void load_u32x2(const uint8_t* p, uint32_t& w0, uint32_t& w1) {
#if defined(__CUDA_ARCH__)
    if constexpr (Align >= 8) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w0 = v.x;
        w1 = v.y;
        return;
    }
#endif
    w0 = load_u32<Align>(p);
    w1 = load_u32<Align>(p + 4);
}

// Byte `i` (0..11) of three little-endian words holding 12 consecutive bytes (the packed scales
// of Q3_K / Q4_K / Q5_K), without indexing a register array (which would spill to local memory).
STRATA_HD uint32_t byte_of3(uint32_t w0, uint32_t w1, uint32_t w2, int i) {
    const uint32_t w = i < 4 ? w0 : (i < 8 ? w1 : w2);
    return (w >> (8 * (i & 3))) & 0xff;
}

// ---- float arithmetic that is never fused ----------------------------------------------------
// The reference dequantizers round every product and sum on its own; nvcc would contract
// a * b + c into one fma (a different float), so the exact dequantizers use these.

STRATA_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;  // host C++ is compiled with -ffp-contract=off semantics (ISO mode)
#endif
}
STRATA_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
STRATA_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// IEEE division, correctly rounded (what the CPU's a / b gives).
STRATA_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

STRATA_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

STRATA_HD bool is_finite(float f) {
    return (float_bits(f) & 0x7f800000u) != 0x7f800000u;
}

// v rounded to the nearest integer, ties to even (the CPU's nearbyint in the default rounding
// mode); beyond the int range it saturates and NaN gives 0, as the GPU's conversion does.
STRATA_HD int round_half_even(float v) {
#if defined(__CUDA_ARCH__)
    return __float2int_rn(v);
#else
    if (!(v == v)) return 0;
    if (v >= 2147483648.0f) return INT32_MAX;
    if (v <= -2147483648.0f) return INT32_MIN;
    return int(std::nearbyint(v));
#endif
}

// ---- small-format conversions (exact) ---------------------------------------------------------

STRATA_HD float half_bits_to_float(uint32_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
    return quant::fp16_to_fp32(static_cast<uint16_t>(h));
#endif
}

STRATA_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

STRATA_HD float bf16_bits_to_float(uint32_t b) {
    return bits_to_float(b << 16);
}

// f rounded to the nearest fp16 (ties to even; Inf past its range) and back: quant::fp32_to_fp16.
STRATA_HD float round_to_half(float f) {
#if defined(__CUDA_ARCH__)
    return __half2float(__float2half_rn(f));
#else
    return quant::fp16_to_fp32(quant::fp32_to_fp16(f));
#endif
}

// The bf16 nearest to f (ties to even; NaN kept a NaN), as quant::fp32_to_bf16 computes it.
STRATA_HD uint32_t float_to_bf16_bits(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// MXFP4's shared scale: half the E8M0 value, 2^(e - 128) (quant::e8m0_to_fp32_half).
STRATA_HD float e8m0_half(uint32_t e) {
    return bits_to_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// ---- integer intrinsics ------------------------------------------------------------------------

// Byte permute: byte n of the result is byte ((s >> 4n) & 7) of the 8 bytes {b:a} (a = bytes 0-3).
STRATA_HD uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
    return __byte_perm(a, b, s);
#else
    const uint64_t src = uint64_t(b) << 32 | a;
    uint32_t r = 0;
    for (int n = 0; n < 4; ++n) {
        const uint32_t sel = (s >> (4 * n)) & 7;
        r |= uint32_t((src >> (8 * sel)) & 0xff) << (8 * n);
    }
    return r;
#endif
}

// c + the sum of the products of the four signed bytes of a and b: dp4a.
STRATA_HD int dp4a(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
    return __dp4a(int(a), int(b), c);
#else
    for (int i = 0; i < 4; ++i)
        c += int(int8_t((a >> (8 * i)) & 0xff)) * int(int8_t((b >> (8 * i)) & 0xff));
    return c;
#endif
}

// Read-only data loads (activations, their scales): the non-coherent cache path on the GPU.
template <typename T>
STRATA_HD T load_ro(const T* p) {
#if defined(__CUDA_ARCH__)
    return __ldg(p);
#else
    return *p;
#endif
}

// ---- packed byte tricks -------------------------------------------------------------------------

// Four 4-bit values b (bits 0-3) spread to bit 0 of bytes 0-3: the products of the bits with
// 1 + 2^7 + 2^14 + 2^21 land on distinct positions, bit i of b at 8i among them.
STRATA_HD uint32_t spread_bits4(uint32_t b) {
    return (b * 0x00204081u) & 0x01010101u;
}

// Per byte, v - offset as a signed byte, for bytes v in [0, 2 * offset) with offset a power of
// two <= 64: v + (128 - offset) stays below 256 (no carry into the next byte) and has its top
// bit set exactly when v >= offset; flipping the top bit gives v - offset in two's complement.
template <uint32_t Offset>
STRATA_HD uint32_t minus_offset(uint32_t v) {
    static_assert(Offset == 4 || Offset == 8 || Offset == 16 || Offset == 32);
    return (v + (128 - Offset) * 0x01010101u) ^ 0x80808080u;
}

// A 16-entry table of int8 values as four little-endian words (entries 4i..4i+3 in word i).
// Built from the words (kept as scalar constants, which device code may use directly).
struct Table16 {
    uint32_t w0, w1, w2, w3;
};
constexpr uint32_t table16_word(const int8_t* v, int word) {
    uint32_t w = 0;
    for (int i = 0; i < 4; ++i) w |= uint32_t(uint8_t(v[4 * word + i])) << (8 * i);
    return w;
}

// Table entries for the four nibbles in bits 0-15 of `nibbles` (the low 16 bits of a word of
// packed 4-bit codes), as four int8 in nibble order. Two permutes look every nibble up in entries
// 0-7 and in 8-15; a third picks per byte by the nibble's top bit (moved to the selector's bit 2).
STRATA_HD uint32_t lookup4(uint32_t nibbles, const Table16& t) {
    const uint32_t sel = nibbles & 0x7777u;
    const uint32_t low = byte_perm(t.w0, t.w1, sel);
    const uint32_t high = byte_perm(t.w2, t.w3, sel);
    return byte_perm(low, high, 0x3210u | ((nibbles >> 1) & 0x4444u));
}

// The int8 values of the four nibbles at bits 0-3, 8-11, 16-19 and 24-27 of `nibbles` in the
// table, in byte order: the low (or, shifted, the high) nibbles of four code bytes.
STRATA_HD uint32_t table_bytes(uint32_t nibbles, const Table16& t) {
    const uint32_t x = nibbles | (nibbles >> 4);   // bytes 0 and 2: two nibbles each
    return lookup4(byte_perm(x, 0u, 0x4420u), t);  // those two bytes as 16 bits of nibbles
}

// One entry of the table.
STRATA_HD int table_value(uint32_t code, const Table16& t) {
    const uint32_t w = code & 8 ? byte_perm(t.w2, t.w3, code & 7) : byte_perm(t.w0, t.w1, code & 7);
    return int(int8_t(w & 0xff));
}

}  // namespace strata::cuda
