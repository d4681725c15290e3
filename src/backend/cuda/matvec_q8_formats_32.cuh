// The 32-element weight formats of matvec_q8 against Q8_0 / Q8_1 activations, ggml's
// vec_dot_<type>_q8_0 / q8_1 arithmetic: an exact int32 dot product of the block's codes, then
// d_w * d_x (and for Q4_1 / Q5_1 + m_w * s_x) in fp32. One lane per block (a warp pass covers 32
// consecutive blocks: 576 bytes of Q4_0, 1088 of Q8_0); the blocks are 18..34 bytes, so they
// sit at any even offset and load_words realigns them. Members as in matvec_q8_formats_k.cuh.
#pragma once

#include "backend/cuda/format_bits.cuh"
#include "backend/cuda/formats_legacy.cuh"
#include "backend/cuda/matvec_q8_kernel.cuh"

namespace strata::cuda::q8k {

// The 32 codes of block ib of token t and its (d, sum or s) pair.
struct A32 {
    int a[8];
    float2 ds;
};
__device__ __forceinline__ void load_a32(const Act& a, int t, int64_t ib, A32& x) {
    const int4 v0 = act16(a, t, ib * 32), v1 = act16(a, t, ib * 32 + 16);
    x.a[0] = v0.x, x.a[1] = v0.y, x.a[2] = v0.z, x.a[3] = v0.w;
    x.a[4] = v1.x, x.a[5] = v1.y, x.a[6] = v1.z, x.a[7] = v1.w;
    x.ds = __ldg(a.ds + t * (a.cols / 32) + ib);
}

// q . a for 16 bytes of nibbles: low nibble of byte j is element j, high nibble element j + 16.
// `high` ORs the fifth bits in (element j's bit j of qh, at bit 4 of its byte).
__device__ __forceinline__ int dot_nibbles(const uint32_t (&q)[4], uint32_t qh, const int (&a)[8]) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        // The fifth bits of elements 4i..4i+3 and 16 + 4i..: bits 4i..4i+3 (16 + ...) of qh.
        const uint32_t hlo = q5_fifth(qh, 4 * i);
        const uint32_t hhi = q5_fifth(qh, 16 + 4 * i);
        s = __dp4a(int((q[i] & 0x0f0f0f0fu) | hlo), a[i], s);
        s = __dp4a(int(((q[i] >> 4) & 0x0f0f0f0fu) | hhi), a[4 + i], s);
    }
    return s;
}

// Q8_0 (34 bytes): d, 32 int8 codes.
template <>
struct Format<TensorType::Q8_0> : FormatTraits<TensorType::Q8_0> {
    static constexpr int kLanes = 1, kUnroll = 4;
    struct W {
        uint32_t q[8], d;
    };
    using A = A32;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int, W& w) {
        load_words<8, false>(b + 2, w.q);
        w.d = ld_u16(b);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int, A& x) {
        load_a32(a, t, ib, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = __dp4a(int(w.q[i]), x.a[i], s);
        return (half_bits(w.d) * x.ds.x) * float(s);
    }
};

// Q4_0 (18 bytes): d, 16 nibble bytes; value q - 8, so q . a - 8 * (sum of a).
template <>
struct Format<TensorType::Q4_0> : FormatTraits<TensorType::Q4_0> {
    static constexpr int kLanes = 1, kUnroll = 4;
    struct W {
        uint32_t q[4], d;
    };
    using A = A32;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int, W& w) {
        load_words<4, false>(b + 2, w.q);
        w.d = ld_u16(b);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int, A& x) {
        load_a32(a, t, ib, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int) {
        const int s = dot_nibbles(w.q, 0, x.a) - 8 * int(x.ds.y);
        return (half_bits(w.d) * x.ds.x) * float(s);
    }
};

// Q5_0 (22 bytes): d, 32 fifth bits, 16 nibble bytes; value q - 16.
template <>
struct Format<TensorType::Q5_0> : FormatTraits<TensorType::Q5_0> {
    static constexpr int kLanes = 1, kUnroll = 4;
    struct W {
        uint32_t q[4], qh, d;
    };
    using A = A32;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int, W& w) {
        load_words<4, false>(b + 6, w.q);
        w.qh = ld_u16(b + 2) | (ld_u16(b + 4) << 16);
        w.d = ld_u16(b);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int, A& x) {
        load_a32(a, t, ib, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int) {
        const int s = dot_nibbles(w.q, w.qh, x.a) - 16 * int(x.ds.y);
        return (half_bits(w.d) * x.ds.x) * float(s);
    }
};

// Q4_1 (20 bytes): d, m, 16 nibble bytes; against Q8_1: d_w d_x (q . a) + m_w s_x.
template <>
struct Format<TensorType::Q4_1> : FormatTraits<TensorType::Q4_1> {
    static constexpr int kLanes = 1, kUnroll = 4;
    struct W {
        uint32_t q[4], dm;
    };
    using A = A32;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int, W& w) {
        load_words<4, false>(b + 4, w.q);
        w.dm = ld_u16(b) | (ld_u16(b + 2) << 16);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int, A& x) {
        load_a32(a, t, ib, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int) {
        const int s = dot_nibbles(w.q, 0, x.a);
        return (half_bits(w.dm) * x.ds.x) * float(s) + half_bits(w.dm >> 16) * x.ds.y;
    }
};

// Q5_1 (24 bytes): d, m, 32 fifth bits, 16 nibble bytes; against Q8_1 as Q4_1.
template <>
struct Format<TensorType::Q5_1> : FormatTraits<TensorType::Q5_1> {
    static constexpr int kLanes = 1, kUnroll = 4;
    struct W {
        uint32_t q[4], qh, dm;
    };
    using A = A32;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int, W& w) {
        load_words<4, false>(b + 8, w.q);
        w.qh = ld_u16(b + 4) | (ld_u16(b + 6) << 16);
        w.dm = ld_u16(b) | (ld_u16(b + 2) << 16);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int, A& x) {
        load_a32(a, t, ib, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int) {
        const int s = dot_nibbles(w.q, w.qh, x.a);
        return (half_bits(w.dm) * x.ds.x) * float(s) + half_bits(w.dm >> 16) * x.ds.y;
    }
};

// The table-coded formats: an IQ4_NL block (18 bytes) is an fp16 d, a MXFP4 block (17 bytes) an
// E8M0 exponent e, then 16 bytes of nibble codes into the format's table (element j the low
// nibble of byte j, element j + 16 its high nibble); against Q8_0 as ggml's
// vec_dot_iq4_nl_q8_0 / vec_dot_mxfp4_q8_0: (d_x * d_w) * sum(value * a), d_w = d or 2^(e - 128).
template <TensorType T>
struct TableFormat : FormatTraits<T> {
    static constexpr bool kMx = T == TensorType::MXFP4;
    static constexpr int kLanes = 1, kUnroll = 4;
    struct W {
        uint32_t q[4], scale;
    };
    using A = A32;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int, W& w) {
        load_words<4, false>(b + (kMx ? 1 : 2), w.q);
        w.scale = kMx ? uint32_t(__ldg(b)) : ld_u16(b);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int, A& x) {
        load_a32(a, t, ib, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int) {
        const Table16 t = kMx ? mxfp4_table() : iq4nl_table();
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s = __dp4a(int(table_bytes(w.q[i] & 0x0f0f0f0fu, t)), x.a[i], s);
            s = __dp4a(int(table_bytes((w.q[i] >> 4) & 0x0f0f0f0fu, t)), x.a[4 + i], s);
        }
        return (x.ds.x * (kMx ? e8m0_half(w.scale) : half_bits(w.scale))) * float(s);
    }
};
template <>
struct Format<TensorType::IQ4_NL> : TableFormat<TensorType::IQ4_NL> {};
template <>
struct Format<TensorType::MXFP4> : TableFormat<TensorType::MXFP4> {};

}  // namespace strata::cuda::q8k
