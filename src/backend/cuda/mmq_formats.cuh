// The weight formats of the int8 tensor-core GEMM (mmq.h): how one row's 256 columns (one
// K-quant block, or eight 32-element blocks) turn into signed int8 codes and integer scales.
//
// Each format, Format<T>: its traits (format_traits.h), kBytes (bytes of 256 columns: Span256),
// kSub (columns per integer scale: 32, or 16 for
// Q2_K / Q3_K / Q6_K), kMin (a minimum term: Q2_K, Q4_K, Q5_K), kLegacy (32-element blocks
// with fp16 scales: the fp32 scale of every block is applied to its own integer product, as
// ggml's vec_dot_<type>_q8_0/1 does), kHasM (Q4_1 / Q5_1: + m * s of the activations).
//   codes(r, p, q): the 32 codes of columns 32p .. 32p + 31, four to a word, as signed bytes
//                   whose products with the activation codes are the CPU's integer products
//                   (Q4_0's q - 8, Q6_K's q - 32, Q3_K's q - 4 + 4 h);
//   K-quants:  scales(r, sc, mins, d, dmin): the kSub-column sub-blocks' integer scales and
//              minimums (mins: 16 bytes, zero past the last sub-block) and the fp32 d and dmin;
//   legacy:    scales(r, d, m): the eight blocks' d (and m) in fp32.
// r reads the raw bytes: r.u32(off) is the little-endian word at byte `off` of the row's 256-column
// span.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/format_bits.cuh"
#include "backend/cuda/format_traits.h"
#include "backend/cuda/formats_legacy.cuh"
#include "gguf/tensor_type.h"

namespace strata::cuda::mmq {

// One row's raw span in shared memory, copied from the word-aligned address at or below its
// start: the span begins `shift` (0 to 3; MXFP4's 17-byte blocks sit at any byte) bytes into the
// first word.
struct RawRow {
    const uint32_t* w;
    int shift;
    __device__ __forceinline__ uint32_t u32(int off) const {
        const int pos = shift + off;
        const uint32_t lo = w[pos >> 2], hi = w[(pos >> 2) + 1];
        return __funnelshift_r(lo, hi, unsigned(pos & 3) * 8);
    }
    __device__ __forceinline__ float f16(int off) const {
        return __half2float(__ushort_as_half(static_cast<unsigned short>(u32(off) & 0xffffu)));
    }
};

// How the GEMM reads weights of format T (FormatTraits<T>::kMmq says which types have it),
// specialised below; each derives from Span256<T>.
template <TensorType T>
struct Format;

// A format's traits and kBytes, the bytes of one row's 256 columns: the span a step reads.
template <TensorType T>
struct Span256 : FormatTraits<T> {
    static constexpr int kBytes = 256 / FormatTraits<T>::kBlockElems * FormatTraits<T>::kBlockBytes;
};

__device__ __forceinline__ uint32_t lo_nibbles(uint32_t w) {
    return w & 0x0f0f0f0fu;
}
__device__ __forceinline__ uint32_t hi_nibbles(uint32_t w) {
    return (w >> 4) & 0x0f0f0f0fu;
}
// Byte-wise subtraction (wrapping), so unsigned codes minus an offset become signed bytes.
__device__ __forceinline__ uint32_t minus(uint32_t w, uint32_t each) {
    return __vsub4(w, each * 0x01010101u);
}

// ---- 32-element formats (eight blocks per span) ------------------------------------------------

template <>
struct Format<TensorType::Q4_0> : Span256<TensorType::Q4_0> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = false, kLegacy = true, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(kBlockBytes * p + 2 + 4 * i);
            q[i] = minus(lo_nibbles(w), 8);
            q[4 + i] = minus(hi_nibbles(w), 8);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int p, float& d, float& m) {
        d = r.f16(kBlockBytes * p);
        m = 0;
    }
};

template <>
struct Format<TensorType::Q4_1> : Span256<TensorType::Q4_1> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = false, kLegacy = true, kHasM = true;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(kBlockBytes * p + 4 + 4 * i);
            q[i] = lo_nibbles(w);
            q[4 + i] = hi_nibbles(w);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int p, float& d, float& m) {
        d = r.f16(kBlockBytes * p);
        m = r.f16(kBlockBytes * p + 2);
    }
};

template <>
struct Format<TensorType::Q5_0> : Span256<TensorType::Q5_0> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = false, kLegacy = true, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
        const uint32_t qh = r.u32(kBlockBytes * p + 2);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(kBlockBytes * p + 6 + 4 * i);
            q[i] = minus(lo_nibbles(w) | q5_fifth(qh, 4 * i), 16);
            q[4 + i] = minus(hi_nibbles(w) | q5_fifth(qh, 16 + 4 * i), 16);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int p, float& d, float& m) {
        d = r.f16(kBlockBytes * p);
        m = 0;
    }
};

template <>
struct Format<TensorType::Q5_1> : Span256<TensorType::Q5_1> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = false, kLegacy = true, kHasM = true;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
        const uint32_t qh = r.u32(kBlockBytes * p + 4);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(kBlockBytes * p + 8 + 4 * i);
            q[i] = lo_nibbles(w) | q5_fifth(qh, 4 * i);
            q[4 + i] = hi_nibbles(w) | q5_fifth(qh, 16 + 4 * i);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int p, float& d, float& m) {
        d = r.f16(kBlockBytes * p);
        m = r.f16(kBlockBytes * p + 2);
    }
};

template <>
struct Format<TensorType::Q8_0> : Span256<TensorType::Q8_0> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = false, kLegacy = true, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
#pragma unroll
        for (int i = 0; i < 8; ++i) q[i] = r.u32(kBlockBytes * p + 2 + 4 * i);
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int p, float& d, float& m) {
        d = r.f16(kBlockBytes * p);
        m = 0;
    }
};

// IQ4_NL (18 bytes: fp16 d) and MXFP4 (17 bytes: E8M0 exponent e, d = 2^(e - 128)), then 16
// bytes of nibble codes into the format's table: the table's int8 values are the codes.
template <TensorType T>
struct TableFormat : Span256<T> {
    static constexpr bool kMx = T == TensorType::MXFP4;
    static constexpr int kScaleBytes = kMx ? 1 : 2;
    static constexpr int kSub = 32;
    static constexpr bool kMin = false, kLegacy = true, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
        const Table16 t = kMx ? mxfp4_table() : iq4nl_table();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(Span256<T>::kBlockBytes * p + kScaleBytes + 4 * i);
            q[i] = table_bytes(lo_nibbles(w), t);
            q[4 + i] = table_bytes(hi_nibbles(w), t);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int p, float& d, float& m) {
        const int at = Span256<T>::kBlockBytes * p;
        d = kMx ? e8m0_half(r.u32(at) & 0xffu) : r.f16(at);
        m = 0;
    }
};
template <>
struct Format<TensorType::IQ4_NL> : TableFormat<TensorType::IQ4_NL> {};
template <>
struct Format<TensorType::MXFP4> : TableFormat<TensorType::MXFP4> {};

// ---- K-quants (one 256-element block per span) -------------------------------------------------

// Q2_K (84 bytes): scales[16] (low nibble scale, high nibble minimum), qs[64], d, dmin. Column
// 128h + 32j + l is bits 2j of qs[32h + l]: piece p = 4h + j.
template <>
struct Format<TensorType::Q2_K> : Span256<TensorType::Q2_K> {
    static constexpr int kSub = 16;
    static constexpr bool kMin = true, kLegacy = false, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
        const int h = p >> 2, j = p & 3;
#pragma unroll
        for (int i = 0; i < 8; ++i) q[i] = (r.u32(16 + 32 * h + 4 * i) >> (2 * j)) & 0x03030303u;
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int* sc, uint8_t* mins, float& d,
                                                  float& dmin) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(4 * i);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const uint32_t v = (w >> (8 * b)) & 0xff;
                sc[4 * i + b] = int(v & 15);
                mins[4 * i + b] = uint8_t(v >> 4);
            }
        }
        d = r.f16(80);
        dmin = r.f16(82);
    }
};

// Q3_K (110 bytes): hmask[32], qs[64], scales[12], d. Column 128h + 32j + l: bits 2j of
// qs[32h + l], plus 4 when bit 4h + j of hmask[l] is set, minus 4.
template <>
struct Format<TensorType::Q3_K> : Span256<TensorType::Q3_K> {
    static constexpr int kSub = 16;
    static constexpr bool kMin = false, kLegacy = false, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
        const int h = p >> 2, j = p & 3;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t lo = (r.u32(32 + 32 * h + 4 * i) >> (2 * j)) & 0x03030303u;
            const uint32_t hb = (r.u32(4 * i) >> (4 * h + j)) & 0x01010101u;
            q[i] = minus(lo | (hb << 2), 4);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int* sc, uint8_t* mins, float& d,
                                                  float& dmin) {
        const uint32_t a0 = r.u32(96), a1 = r.u32(100), a2 = r.u32(104);
        const uint32_t words[4] = {
            (a0 & 0x0f0f0f0fu) | ((a2 & 0x03030303u) << 4),
            (a1 & 0x0f0f0f0fu) | (((a2 >> 2) & 0x03030303u) << 4),
            ((a0 >> 4) & 0x0f0f0f0fu) | (((a2 >> 4) & 0x03030303u) << 4),
            ((a1 >> 4) & 0x0f0f0f0fu) | (((a2 >> 6) & 0x03030303u) << 4),
        };
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int b = 0; b < 4; ++b) sc[4 * i + b] = int((words[i] >> (8 * b)) & 0xff) - 32;
#pragma unroll
        for (int i = 0; i < 16; ++i) mins[i] = 0;
        d = r.f16(108);
        dmin = 0;
    }
};

// Q4_K / Q5_K's 6-bit scales and minimums of the 8 sub-blocks, from the 12 bytes at `off`.
__device__ __forceinline__ void k4_scales(const RawRow& r, int off, int* sc, uint8_t* mins) {
    const uint32_t s0 = r.u32(off), s1 = r.u32(off + 4), s2 = r.u32(off + 8);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        int m;
        k4_scale_min(s0, s1, s2, j, sc[j], m);
        mins[j] = uint8_t(m);
    }
#pragma unroll
    for (int j = 8; j < 16; ++j) mins[j] = 0;
}

// Q4_K (144 bytes): d, dmin, scales[12], qs[128]. Sub-block p: low (p even) or high nibbles of
// qs[32 (p / 2) ..].
template <>
struct Format<TensorType::Q4_K> : Span256<TensorType::Q4_K> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = true, kLegacy = false, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t w = r.u32(16 + 32 * (p >> 1) + 4 * i);
            q[i] = (p & 1) ? hi_nibbles(w) : lo_nibbles(w);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int* sc, uint8_t* mins, float& d,
                                                  float& dmin) {
        k4_scales(r, 4, sc, mins);
        d = r.f16(0);
        dmin = r.f16(2);
    }
};

// Q5_K (176 bytes): d, dmin, scales[12], qh[32], qs[128]; bit p of qh[l] is bit 4 of column
// 32p + l.
template <>
struct Format<TensorType::Q5_K> : Span256<TensorType::Q5_K> {
    static constexpr int kSub = 32;
    static constexpr bool kMin = true, kLegacy = false, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t w = r.u32(48 + 32 * (p >> 1) + 4 * i);
            const uint32_t hb = ((r.u32(16 + 4 * i) >> p) & 0x01010101u) << 4;
            q[i] = ((p & 1) ? hi_nibbles(w) : lo_nibbles(w)) | hb;
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int* sc, uint8_t* mins, float& d,
                                                  float& dmin) {
        k4_scales(r, 4, sc, mins);
        d = r.f16(0);
        dmin = r.f16(2);
    }
};

// Q6_K (210 bytes): ql[128], qh[64], scales[16] (int8), d. Column 128h + 32g + l: the low
// (g < 2) or high nibble of ql[64h + 32 (g % 2) + l], bits 2g of qh[32h + l] on top, minus 32.
template <>
struct Format<TensorType::Q6_K> : Span256<TensorType::Q6_K> {
    static constexpr int kSub = 16;
    static constexpr bool kMin = false, kLegacy = false, kHasM = false;
    static __device__ __forceinline__ void codes(const RawRow& r, int p, uint32_t (&q)[8]) {
        const int h = p >> 2, g = p & 3;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t w = r.u32(64 * h + 32 * (g & 1) + 4 * i);
            const uint32_t hb = ((r.u32(128 + 32 * h + 4 * i) >> (2 * g)) & 0x03030303u) << 4;
            q[i] = minus(((g >> 1) ? hi_nibbles(w) : lo_nibbles(w)) | hb, 32);
        }
    }
    static __device__ __forceinline__ void scales(const RawRow& r, int* sc, uint8_t* mins, float& d,
                                                  float& dmin) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = r.u32(192 + 4 * i);
#pragma unroll
            for (int b = 0; b < 4; ++b) sc[4 * i + b] = int(int8_t(uint8_t(w >> (8 * b))));
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) mins[i] = 0;
        d = r.f16(208);
        dmin = 0;
    }
};

}  // namespace strata::cuda::mmq
