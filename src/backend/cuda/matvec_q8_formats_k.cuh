// The 256-element weight formats of matvec_q8 (Q2_K..Q6_K) against Q8_K activations, ggml's
// vec_dot_<type>_q8_K arithmetic: per sub-block an exact integer dot product of the codes,
// weighted by the integer sub-block scale, summed in int32 over the lane's part of a block;
// then y.d * x.d (and y.d * x.dmin against the activation sums of the minimum terms) in fp32.
//
// Each format, Format<T>: its traits (kBlockElems, kBlockBytes: format_traits.h), kLanes (lanes
// per block; `sub` names the lane's part), kUnroll, W (the lane's weight registers) loaded by
// load<A16>, A (its activation registers of one token) loaded by load_act, dot() -> the lane's
// fp32 share of the block's product.
#pragma once

#include "backend/cuda/format_bits.cuh"
#include "backend/cuda/matvec_q8_kernel.cuh"

namespace strata::cuda::q8k {

__device__ __forceinline__ int sext16(uint32_t v) {
    return int(int16_t(uint16_t(v & 0xffffu)));
}
__device__ __forceinline__ int hi16(uint32_t v) {
    return int(v) >> 16;
}
__device__ __forceinline__ int dot4x4(const uint32_t (&q)[4], const int (&a)[4]) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) s = __dp4a(int(q[i]), a[i], s);
    return s;
}

// Activations of one 32-code sub-block pair (Q4_K, Q5_K): codes 64 j .. 64 j + 63 of block ib,
// j = sub, and the sums of each half.
struct APair {
    int lo[8], hi[8];
    float d;
    int bs_lo, bs_hi;
};
__device__ __forceinline__ void load_pair(const Act& a, int t, int64_t ib, int sub, APair& x) {
    const int64_t e = ib * 256 + 64 * sub;
    const int4 v0 = act16(a, t, e), v1 = act16(a, t, e + 16);
    const int4 v2 = act16(a, t, e + 32), v3 = act16(a, t, e + 48);
    x.lo[0] = v0.x, x.lo[1] = v0.y, x.lo[2] = v0.z, x.lo[3] = v0.w;
    x.lo[4] = v1.x, x.lo[5] = v1.y, x.lo[6] = v1.z, x.lo[7] = v1.w;
    x.hi[0] = v2.x, x.hi[1] = v2.y, x.hi[2] = v2.z, x.hi[3] = v2.w;
    x.hi[4] = v3.x, x.hi[5] = v3.y, x.hi[6] = v3.z, x.hi[7] = v3.w;
    const int2 bs =
        __ldg(reinterpret_cast<const int2*>(a.bsums + t * (a.cols / 16) + ib * 16 + 4 * sub));
    x.bs_lo = sext16(uint32_t(bs.x)) + hi16(uint32_t(bs.x));
    x.bs_hi = sext16(uint32_t(bs.y)) + hi16(uint32_t(bs.y));
    x.d = __ldg(a.d + t * (a.cols / 256) + ib);
}

// Activations of four 16-code groups at elements base + 32 g (g < 4) of block ib, with the sums
// of sub-blocks first + 2 g (Q2_K, Q3_K, Q6_K: h = sub / 2 picks the half, sub % 2 the 16).
struct AQuad {
    int a[4][4];
    float d;
    int bs[4];
};
__device__ __forceinline__ void load_quad(const Act& a, int t, int64_t ib, int sub, AQuad& x) {
    const int h = sub >> 1, hl = sub & 1;
    const int64_t e = ib * 256 + 128 * h + 16 * hl;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
        const int4 v = act16(a, t, e + 32 * g);
        x.a[g][0] = v.x, x.a[g][1] = v.y, x.a[g][2] = v.z, x.a[g][3] = v.w;
    }
    // bsums[8h .. 8h + 7]: word g holds sub-blocks 8h + 2g (low half) and 8h + 2g + 1.
    const int4 bs =
        __ldg(reinterpret_cast<const int4*>(a.bsums + t * (a.cols / 16) + ib * 16 + 8 * h));
    const uint32_t w[4] = {uint32_t(bs.x), uint32_t(bs.y), uint32_t(bs.z), uint32_t(bs.w)};
#pragma unroll
    for (int g = 0; g < 4; ++g) x.bs[g] = hl ? hi16(w[g]) : sext16(w[g]);
    x.d = __ldg(a.d + t * (a.cols / 256) + ib);
}

// Q4_K (144 bytes = 9 aligned 16-byte lines): 4 lanes per block; lane j loads the 16-byte
// header (d, dmin, scales: one load shared by the 4 lanes) and the 32 bytes of sub-blocks
// 2j (low nibbles) and 2j + 1 (high nibbles).
template <>
struct Format<TensorType::Q4_K> : FormatTraits<TensorType::Q4_K> {
    static constexpr int kLanes = 4, kUnroll = 2;
    struct W {
        uint32_t h[4], q[8];
    };
    using A = APair;
    template <bool A16>
    static __device__ __forceinline__ void load(const uint8_t* b, int sub, W& w) {
        load_words<4, A16>(b, w.h);
        load_words<8, A16>(b + 16 + 32 * sub, w.q);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int sub,
                                                    A& x) {
        load_pair(a, t, ib, sub, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int sub) {
        int dlo = 0, dhi = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            dlo = __dp4a(int(w.q[i] & 0x0f0f0f0fu), x.lo[i], dlo);
            dhi = __dp4a(int((w.q[i] >> 4) & 0x0f0f0f0fu), x.hi[i], dhi);
        }
        int sc0, m0, sc1, m1;
        k4_scale_min(w.h[1], w.h[2], w.h[3], 2 * sub, sc0, m0);
        k4_scale_min(w.h[1], w.h[2], w.h[3], 2 * sub + 1, sc1, m1);
        const int isum = sc0 * dlo + sc1 * dhi;
        const int msum = m0 * x.bs_lo + m1 * x.bs_hi;
        return (x.d * half_bits(w.h[0])) * float(isum) -
               (x.d * half_bits(w.h[0] >> 16)) * float(msum);
    }
};

// Q5_K (176 bytes = 11 aligned lines): as Q4_K, plus the 32 high-bit bytes (two more loads
// shared by the block's 4 lanes; lane j takes bits 2j and 2j + 1).
template <>
struct Format<TensorType::Q5_K> : FormatTraits<TensorType::Q5_K> {
    static constexpr int kLanes = 4, kUnroll = 2;
    struct W {
        uint32_t h[4], qh[8], q[8];
    };
    using A = APair;
    template <bool A16>
    static __device__ __forceinline__ void load(const uint8_t* b, int sub, W& w) {
        load_words<4, A16>(b, w.h);
        load_words<8, A16>(b + 16, w.qh);
        load_words<8, A16>(b + 48 + 32 * sub, w.q);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int sub,
                                                    A& x) {
        load_pair(a, t, ib, sub, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int sub) {
        int dlo = 0, dhi = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t lo =
                (w.q[i] & 0x0f0f0f0fu) | (((w.qh[i] >> (2 * sub)) & 0x01010101u) << 4);
            const uint32_t hi =
                ((w.q[i] >> 4) & 0x0f0f0f0fu) | (((w.qh[i] >> (2 * sub + 1)) & 0x01010101u) << 4);
            dlo = __dp4a(int(lo), x.lo[i], dlo);
            dhi = __dp4a(int(hi), x.hi[i], dhi);
        }
        int sc0, m0, sc1, m1;
        k4_scale_min(w.h[1], w.h[2], w.h[3], 2 * sub, sc0, m0);
        k4_scale_min(w.h[1], w.h[2], w.h[3], 2 * sub + 1, sc1, m1);
        const int isum = sc0 * dlo + sc1 * dhi;
        const int msum = m0 * x.bs_lo + m1 * x.bs_hi;
        return (x.d * half_bits(w.h[0])) * float(isum) -
               (x.d * half_bits(w.h[0] >> 16)) * float(msum);
    }
};

// Q6_K (210 bytes, blocks at any even offset): 4 lanes per block; lane (h, l0) = (sub / 2,
// 16 (sub % 2)) loads ql[64h + l0], ql[64h + 32 + l0], qh[32h + l0] (16 bytes each), which
// hold elements 128h + 32g + l0 + (0..15) for g < 4 (sub-block 8h + 2g + sub % 2), plus the
// 8 scales of half h and d.
template <>
struct Format<TensorType::Q6_K> : FormatTraits<TensorType::Q6_K> {
    static constexpr int kLanes = 4, kUnroll = 2;
    struct W {
        uint32_t qla[4], qlb[4], qh[4], sc[2], d;
    };
    using A = AQuad;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int sub, W& w) {
        const int h = sub >> 1, l0 = 16 * (sub & 1);
        load_words<4, false>(b + 64 * h + l0, w.qla);
        load_words<4, false>(b + 64 * h + 32 + l0, w.qlb);
        load_words<4, false>(b + 128 + 32 * h + l0, w.qh);
        load_words<2, false>(b + 192 + 8 * h, w.sc);
        w.d = ld_u16(b + 208);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int sub,
                                                    A& x) {
        load_quad(a, t, ib, sub, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int sub) {
        const int hl = sub & 1;
        int isum = 0;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            uint32_t q[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t ql = (g & 1) ? w.qlb[i] : w.qla[i];
                q[i] = ((ql >> (4 * (g >> 1))) & 0x0f0f0f0fu) |
                       (((w.qh[i] >> (2 * g)) & 0x03030303u) << 4);
            }
            // (q - 32) . a = q . a - 32 * (sum of a).
            const int d = dot4x4(q, x.a[g]) - 32 * x.bs[g];
            const int sc = int(int8_t(uint8_t(w.sc[g >> 1] >> (8 * (hl + 2 * (g & 1))))));
            isum += sc * d;
        }
        return (x.d * half_bits(w.d)) * float(isum);
    }
};

// Q2_K (84 bytes): 4 lanes per block; lane (h, l0) loads qs[32h + l0] (16 bytes: elements
// 128h + 32g + l0 + (0..15), g < 4, in bits 2g) and the scale bytes of half h.
template <>
struct Format<TensorType::Q2_K> : FormatTraits<TensorType::Q2_K> {
    static constexpr int kLanes = 4, kUnroll = 2;
    struct W {
        uint32_t qs[4], sc[2], d;
    };
    using A = AQuad;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int sub, W& w) {
        const int h = sub >> 1, l0 = 16 * (sub & 1);
        load_words<4, false>(b + 16 + 32 * h + l0, w.qs);
        load_words<2, false>(b + 8 * h, w.sc);
        w.d = ld_u16(b + 80) | (ld_u16(b + 82) << 16);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int sub,
                                                    A& x) {
        load_quad(a, t, ib, sub, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int sub) {
        const int hl = sub & 1;
        int isum = 0, msum = 0;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            uint32_t q[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) q[i] = (w.qs[i] >> (2 * g)) & 0x03030303u;
            const uint32_t s = (w.sc[g >> 1] >> (8 * (hl + 2 * (g & 1)))) & 0xff;
            isum += int(s & 15) * dot4x4(q, x.a[g]);
            msum += int(s >> 4) * x.bs[g];
        }
        return (x.d * half_bits(w.d)) * float(isum) - (x.d * half_bits(w.d >> 16)) * float(msum);
    }
};

// Q3_K (110 bytes): lanes as Q2_K; lane (h, l0) also loads hmask[l0] (bit 4h + g: the third
// bit) and the 12 packed scale bytes.
template <>
struct Format<TensorType::Q3_K> : FormatTraits<TensorType::Q3_K> {
    static constexpr int kLanes = 4, kUnroll = 2;
    struct W {
        uint32_t qs[4], hm[4], sc[3], d;
    };
    using A = AQuad;
    template <bool>
    static __device__ __forceinline__ void load(const uint8_t* b, int sub, W& w) {
        const int h = sub >> 1, l0 = 16 * (sub & 1);
        load_words<4, false>(b + 32 + 32 * h + l0, w.qs);
        load_words<4, false>(b + l0, w.hm);
        load_words<3, false>(b + 96, w.sc);
        w.d = ld_u16(b + 108);
    }
    static __device__ __forceinline__ void load_act(const Act& a, int t, int64_t ib, int sub,
                                                    A& x) {
        load_quad(a, t, ib, sub, x);
    }
    static __device__ __forceinline__ float dot(const W& w, const A& x, int sub) {
        const int h = sub >> 1, hl = sub & 1;
        int isum = 0;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            uint32_t q[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                q[i] = ((w.qs[i] >> (2 * g)) & 0x03030303u) |
                       (((w.hm[i] >> (4 * h + g)) & 0x01010101u) << 2);
            }
            // Scale of sub-block k = 8h + 2g + hl (blocks.h q3k_scale), multiplier sc - 32.
            const int k = 8 * h + 2 * g + hl;
            const uint32_t lowb = (w.sc[(k & 7) >> 2] >> (8 * (k & 3))) & 0xff;
            const uint32_t low = k < 8 ? (lowb & 15) : (lowb >> 4);
            const uint32_t high = ((w.sc[2] >> (8 * (k & 3))) >> (2 * (k >> 2))) & 3;
            const int sc = int(low | (high << 4)) - 32;
            isum += sc * (dot4x4(q, x.a[g]) - 4 * x.bs[g]);
        }
        return (x.d * half_bits(w.d)) * float(isum);
    }
};

}  // namespace strata::cuda::q8k
