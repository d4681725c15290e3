// The kernel template of the int8 tensor-core GEMM (mmq.h) and its launch, for one weight format
// of mmq_formats.cuh.
//
// A thread block: 4 warps, a tile of kTileRows weight rows x kTileTokens tokens; warp w owns the
// 32 x 32 sub-tile (rows 32 (w % 2), tokens 32 (w / 2)): 2 x 4 fragments of the m16n8 products.
// Per step of 256 columns:
//   1. the step's raw weight bytes (cp.async, issued during the previous step) are unpacked into
//      signed codes (smem_codes) and scales; the activations' scales are read;
//   2. the next step's raw bytes and activation codes are requested (cp.async);
//   3. the warps multiply: one mma per sub-block and fragment, from zero, weighted by the
//      sub-block's integer scale into an int32 block sum (K-quants) or scaled into fp32 at once
//      (32-element formats, whose scales are per block).
// Shared rows are 272 bytes apart (68 words): the fragment loads (8 rows x 4 words per warp)
// then hit 32 different banks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/mmq_formats.cuh"
#include "gguf/tensor_type.h"

namespace strata::cuda::mmq {

inline constexpr int kThreads = 128;
inline constexpr int kTileRows = 64;
inline constexpr int kTileTokens = 64;
inline constexpr int kStep = 256;               // columns per step
inline constexpr int kCodeStride = kStep + 16;  // bytes between rows of codes in shared memory
// Words of a row's raw span (at most Q8_0's 272 bytes, starting up to 3 bytes into a word, and
// the word after it that RawRow reads), rounded so every row starts 16-byte aligned (cp.async).
inline constexpr int kRawWords = 72;

struct Args {
    const uint8_t* w;
    size_t stride;
    int64_t rows;
    int64_t cols;
    // The quantized activations (matvec_q8.h): token t's codes at codes + t * cols; Q8_0 /
    // Q8_1 (d, sum or s) of its block b at ds[t * cols / 32 + b]; Q8_K d[t * cols / 256 + block]
    // and bsums[t * cols / 16 + group].
    q8detail::ScratchView act;
    int n;
    const float* bias;
    float* y;
    // Routed experts (mmq_grouped): blockIdx.y is tile i of tiles[3 i ..] = (expert, first row,
    // rows), or expert -1 (nothing to do); the tile multiplies expert e's matrix (w + e *
    // expert_stride) with activation rows first .. first + rows - 1 into the same rows of y.
    const int32_t* tiles = nullptr;
    int tile_count = 0;  // entries of tiles (the grid's height)
    size_t expert_stride = 0;
};

struct Smem {
    alignas(16) uint32_t raw[kTileRows][kRawWords];
    alignas(16) int8_t wcodes[kTileRows][kCodeStride];
    alignas(16) int8_t acodes[2][kTileTokens][kCodeStride];
    // K-quants: sub-block scales, minimums (16 per row, zero-padded), d, dmin; the activations'
    // d and block sums split as 64 hi + lo (both int8) per sub-block.
    int wsc[kTileRows][16];
    alignas(16) uint8_t wmin[kTileRows][16];
    float wd[kTileRows], wdmin[kTileRows];
    float ad[kTileTokens];
    alignas(16) int8_t abs_hi[kTileTokens][16], abs_lo[kTileTokens][16];
    // 32-element formats: each block's d (and m) and the activations' (d, s).
    float bd[kTileRows][8], bm[kTileRows][8];
    float2 ads[kTileTokens][8];
};

__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
    const unsigned s = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    const unsigned s = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;" ::: "memory");
}

// c = a (16 x 32, row-major) . b (32 x 8, column-major), int8 in, int32 out.
__device__ __forceinline__ void mma_k32(int (&c)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %10, %10, %10};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
#else
    (void)a, (void)b;
    c[0] = c[1] = c[2] = c[3] = 0;
    __trap();
#endif
}
// c = a (16 x 16) . b (16 x 8).
__device__ __forceinline__ void mma_k16(int (&c)[4], const uint32_t (&a)[2], uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%7, %7, %7, %7};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(b), "r"(0));
#else
    (void)a, (void)b;
    c[0] = c[1] = c[2] = c[3] = 0;
    __trap();
#endif
}

// The blocks of step `step`: eight 32-element blocks (or one K-quant block), fewer in the last
// step of a row whose 32-element blocks do not fill it.
template <class F>
__device__ __forceinline__ int step_blocks(const Args& a, int64_t step) {
    if constexpr (F::kLegacy) {
        const int64_t left = (a.cols - step * kStep) / 32;
        return left < 8 ? int(left) : 8;
    } else {
        return 1;
    }
}

// Rows and tokens past the end read the last one (their results are not stored).
__device__ __forceinline__ int64_t clamp_row(const Args& a, int64_t row) {
    return row < a.rows ? row : a.rows - 1;
}
__device__ __forceinline__ int clamp_token(const Args& a, int tok) {
    return tok < a.n ? tok : a.n - 1;
}

__device__ __forceinline__ uint32_t lds32(const int8_t* p) {
    return *reinterpret_cast<const uint32_t*>(p);
}

// Requests step `step`'s raw weight bytes (rows clamped to the last) and activation codes
// (tokens clamped to the last) into shared memory. V16: every span is 16-byte aligned.
template <class F, bool V16>
__device__ __forceinline__ void request_step(const Args& a, Smem& s, int64_t row0, int tok0,
                                             int64_t step, int buf) {
    const int tid = int(threadIdx.x);
    // Only the step's blocks are read: past them may lie the end of the matrix.
    const int blocks = step_blocks<F>(a, step);
    const int bytes = F::kLegacy ? blocks * F::kBlockBytes : F::kBytes;
    if constexpr (V16) {
        const int lines = (bytes + 15) / 16;
        for (int i = tid; i < kTileRows * lines; i += kThreads) {
            const int r = i / lines, l = i % lines;
            const int64_t row = clamp_row(a, row0 + r);
            const uint8_t* src = a.w + size_t(row) * a.stride + size_t(step) * F::kBytes + 16 * l;
            cp_async16(&s.raw[r][4 * l], src);
        }
    } else {
        constexpr int kWords = (F::kBytes + 3 + 3) / 4;  // a span starting 3 bytes into a word
        for (int i = tid; i < kTileRows * kWords; i += kThreads) {
            const int r = i / kWords, l = i % kWords;
            const int64_t row = clamp_row(a, row0 + r);
            const uintptr_t start = reinterpret_cast<uintptr_t>(a.w) + size_t(row) * a.stride +
                                    size_t(step) * F::kBytes;
            const uintptr_t base = start & ~uintptr_t(3);
            // The words that hold some byte of the step's blocks.
            if (4 * l < int(start - base) + bytes) {
                cp_async4(&s.raw[r][l], reinterpret_cast<const void*>(base + 4 * l));
            }
        }
    }
    const int act_lines = blocks * (kStep / 16) / (F::kLegacy ? 8 : 1);
    for (int i = tid; i < kTileTokens * act_lines; i += kThreads) {
        const int t = i / act_lines, l = i % act_lines;
        const int tok = clamp_token(a, tok0 + t);
        cp_async16(&s.acodes[buf][t][16 * l],
                   a.act.codes + int64_t(tok) * a.cols + step * kStep + 16 * l);
    }
    cp_async_commit();
}

// Unpacks the raw bytes of step `step` into codes and scales, and reads the activations' scales.
template <class F, bool V16>
__device__ __forceinline__ void unpack_step(const Args& a, Smem& s, int64_t row0, int tok0,
                                            int64_t step) {
    const int tid = int(threadIdx.x);
    const int blocks = step_blocks<F>(a, step);  // codes and scales of the others go unread
    const auto raw_row = [&](int r) {
        int shift = 0;
        if constexpr (!V16) {
            const int64_t row = clamp_row(a, row0 + r);
            shift = int((reinterpret_cast<uintptr_t>(a.w) + size_t(row) * a.stride +
                         size_t(step) * F::kBytes) &
                        3);
        }
        return RawRow{s.raw[r], shift};
    };
    for (int i = tid; i < kTileRows * 8; i += kThreads) {
        const int r = i >> 3, p = i & 7;
        if (F::kLegacy && p >= blocks) continue;
        uint32_t q[8];
        F::codes(raw_row(r), p, q);
        uint4* dst = reinterpret_cast<uint4*>(&s.wcodes[r][32 * p]);
        dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
        dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
    }
    if constexpr (F::kLegacy) {
        for (int i = tid; i < kTileRows * 8; i += kThreads) {
            const int r = i >> 3, p = i & 7;
            if (p < blocks) F::scales(raw_row(r), p, s.bd[r][p], s.bm[r][p]);
        }
        for (int i = tid; i < kTileTokens * 8; i += kThreads) {
            const int t = i >> 3, b = i & 7;
            if (b >= blocks) continue;
            const int tok = clamp_token(a, tok0 + t);
            s.ads[t][b] = a.act.ds[int64_t(tok) * (a.cols / 32) + step * 8 + b];
        }
    } else {
        if (tid < kTileRows) {
            F::scales(raw_row(tid), s.wsc[tid], s.wmin[tid], s.wd[tid], s.wdmin[tid]);
        }
        for (int i = tid; i < kTileTokens * 16; i += kThreads) {
            const int t = i >> 4, g = i & 15;
            const int tok = clamp_token(a, tok0 + t);
            const int16_t* bs = a.act.bsums + int64_t(tok) * (a.cols / 16) + step * 16;
            int v = 0;
            if constexpr (F::kSub == 16) {
                v = bs[g];
            } else if (g < 8) {
                v = bs[2 * g] + bs[2 * g + 1];
            }
            s.abs_hi[t][g] = int8_t(v >> 6);  // v = 64 hi + lo, lo in [0, 64)
            s.abs_lo[t][g] = int8_t(v & 63);
            if (g == 0) s.ad[t] = a.act.d[int64_t(tok) * (a.cols / 256) + step];
        }
    }
}

template <class F, bool V16>
__global__ void __launch_bounds__(kThreads, 2) mmq_kernel(Args a) {
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    Smem& s = *reinterpret_cast<Smem*>(smem_bytes);
    const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    const int g = lane >> 2, tg = lane & 3;
    const int64_t row0 = int64_t(blockIdx.x) * kTileRows;
    int tok0 = int(blockIdx.y) * kTileTokens;
    if (a.tiles) {  // one expert's rows; a.n becomes the end of the tile's rows
        const int32_t* tile = a.tiles + 3 * blockIdx.y;
        if (tile[0] < 0) return;
        a.w += size_t(tile[0]) * a.expert_stride;
        tok0 = tile[1];
        a.n = tile[1] + tile[2];
    }
    const int wr = 32 * (warp & 1), wt = 32 * (warp >> 1);
    const int64_t steps = (a.cols + kStep - 1) / kStep;

    float acc[2][4][4] = {};

    request_step<F, V16>(a, s, row0, tok0, 0, 0);
    for (int64_t step = 0; step < steps; ++step) {
        const int buf = int(step & 1);
        cp_async_wait_all();
        __syncthreads();  // this step's bytes are in; the last step's products are done
        unpack_step<F, V16>(a, s, row0, tok0, step);
        __syncthreads();  // codes and scales ready; the raw buffer is free
        if (step + 1 < steps) request_step<F, V16>(a, s, row0, tok0, step + 1, buf ^ 1);

        const int8_t(*ac)[kCodeStride] = s.acodes[buf];
        if constexpr (F::kLegacy) {
            const int blocks = step_blocks<F>(a, step);
#pragma unroll 2
            for (int j = 0; j < 8; ++j) {
                if (j >= blocks) break;
                uint32_t af[2][4], bf[4][2];
#pragma unroll
                for (int m = 0; m < 2; ++m) {
                    const int r = wr + 16 * m + g;
                    af[m][0] = lds32(&s.wcodes[r][32 * j + 4 * tg]);
                    af[m][1] = lds32(&s.wcodes[r + 8][32 * j + 4 * tg]);
                    af[m][2] = lds32(&s.wcodes[r][32 * j + 16 + 4 * tg]);
                    af[m][3] = lds32(&s.wcodes[r + 8][32 * j + 16 + 4 * tg]);
                }
#pragma unroll
                for (int n = 0; n < 4; ++n) {
                    const int t = wt + 8 * n + g;
                    bf[n][0] = lds32(&ac[t][32 * j + 4 * tg]);
                    bf[n][1] = lds32(&ac[t][32 * j + 16 + 4 * tg]);
                }
#pragma unroll
                for (int m = 0; m < 2; ++m) {
                    const int r = wr + 16 * m + g;
                    const float d0 = s.bd[r][j], d1 = s.bd[r + 8][j];
                    const float m0 = s.bm[r][j], m1 = s.bm[r + 8][j];
#pragma unroll
                    for (int n = 0; n < 4; ++n) {
                        int c[4];
                        mma_k32(c, af[m], bf[n]);
                        const int t = wt + 8 * n + 2 * tg;
                        const float2 x0 = s.ads[t][j], x1 = s.ads[t + 1][j];
                        const float v[4] = {(d0 * x0.x) * float(c[0]), (d0 * x1.x) * float(c[1]),
                                            (d1 * x0.x) * float(c[2]), (d1 * x1.x) * float(c[3])};
                        if constexpr (F::kHasM) {
                            acc[m][n][0] += v[0] + m0 * x0.y;
                            acc[m][n][1] += v[1] + m0 * x1.y;
                            acc[m][n][2] += v[2] + m1 * x0.y;
                            acc[m][n][3] += v[3] + m1 * x1.y;
                        } else {
                            (void)m0, (void)m1;
#pragma unroll
                            for (int i = 0; i < 4; ++i) acc[m][n][i] += v[i];
                        }
                    }
                }
            }
        } else {
            int isum[2][4][4] = {};
            constexpr int kSubs = kStep / F::kSub;
#pragma unroll 2
            for (int j = 0; j < kSubs; ++j) {
                const int k0 = F::kSub * j;
#pragma unroll
                for (int m = 0; m < 2; ++m) {
                    const int r = wr + 16 * m + g;
                    const int sc0 = s.wsc[r][j], sc1 = s.wsc[r + 8][j];
                    uint32_t af[4];
                    af[0] = lds32(&s.wcodes[r][k0 + 4 * tg]);
                    af[1] = lds32(&s.wcodes[r + 8][k0 + 4 * tg]);
                    if constexpr (F::kSub == 32) {
                        af[2] = lds32(&s.wcodes[r][k0 + 16 + 4 * tg]);
                        af[3] = lds32(&s.wcodes[r + 8][k0 + 16 + 4 * tg]);
                    }
#pragma unroll
                    for (int n = 0; n < 4; ++n) {
                        const int t = wt + 8 * n + g;
                        int c[4];
                        if constexpr (F::kSub == 32) {
                            const uint32_t bf[2] = {lds32(&ac[t][k0 + 4 * tg]),
                                                    lds32(&ac[t][k0 + 16 + 4 * tg])};
                            mma_k32(c, af, bf);
                        } else {
                            const uint32_t a2[2] = {af[0], af[1]};
                            mma_k16(c, a2, lds32(&ac[t][k0 + 4 * tg]));
                        }
                        isum[m][n][0] += sc0 * c[0];
                        isum[m][n][1] += sc0 * c[1];
                        isum[m][n][2] += sc1 * c[2];
                        isum[m][n][3] += sc1 * c[3];
                    }
                }
            }
            // The block's fp32 terms: (d_w d_x) isum - (dmin_w d_x) (minimums . block sums).
#pragma unroll
            for (int m = 0; m < 2; ++m) {
                const int r = wr + 16 * m + g;
                uint32_t mf[2] = {0, 0};
                if constexpr (F::kMin) {
                    mf[0] = *reinterpret_cast<const uint32_t*>(&s.wmin[r][4 * tg]);
                    mf[1] = *reinterpret_cast<const uint32_t*>(&s.wmin[r + 8][4 * tg]);
                }
                const float dw[2] = {s.wd[r], s.wd[r + 8]};
                const float dm[2] = {s.wdmin[r], s.wdmin[r + 8]};
#pragma unroll
                for (int n = 0; n < 4; ++n) {
                    const int t = wt + 8 * n + 2 * tg;
                    int msum[4] = {0, 0, 0, 0};
                    if constexpr (F::kMin) {
                        const int tb = wt + 8 * n + g;
                        int hi[4], lo[4];
                        mma_k16(hi, mf, lds32(&s.abs_hi[tb][4 * tg]));
                        mma_k16(lo, mf, lds32(&s.abs_lo[tb][4 * tg]));
#pragma unroll
                        for (int i = 0; i < 4; ++i) msum[i] = 64 * hi[i] + lo[i];
                    }
                    const float dx[2] = {s.ad[t], s.ad[t + 1]};
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const float x = dx[i & 1];
                        const int h = i >> 1;
                        float v = (dw[h] * x) * float(isum[m][n][i]);
                        if constexpr (F::kMin) v -= (dm[h] * x) * float(msum[i]);
                        acc[m][n][i] += v;
                    }
                }
            }
        }
    }

#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t row = row0 + wr + 16 * m + g + 8 * h;
            if (row >= a.rows) continue;
            const float b = a.bias ? a.bias[row] : 0.0f;
#pragma unroll
            for (int n = 0; n < 4; ++n) {
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int tok = tok0 + wt + 8 * n + 2 * tg + i;
                    if (tok < a.n) a.y[int64_t(tok) * a.rows + row] = acc[m][n][2 * h + i] + b;
                }
            }
        }
    }
}

template <class F, bool V16>
void launch_instance(const Args& a, cudaStream_t stream) {
    static const bool configured = [] {
        STRATA_CUDA(cudaFuncSetAttribute(
            mmq_kernel<F, V16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(Smem))));
        return true;
    }();
    (void)configured;
    const dim3 grid(unsigned((a.rows + kTileRows - 1) / kTileRows),
                    unsigned(a.tiles ? a.tile_count : (a.n + kTileTokens - 1) / kTileTokens));
    mmq_kernel<F, V16><<<grid, kThreads, sizeof(Smem), stream>>>(a);
    STRATA_CUDA_LAUNCHED();
}

// One format's launch: 16-byte copies when every row's every step starts 16-byte aligned.
template <class F>
void launch_format(const Args& a, cudaStream_t stream) {
    if constexpr (F::kBytes % 16 == 0) {
        if (reinterpret_cast<uintptr_t>(a.w) % 16 == 0 && a.stride % 16 == 0 &&
            a.expert_stride % 16 == 0) {
            return launch_instance<F, true>(a, stream);
        }
    }
    launch_instance<F, false>(a, stream);
}

// The launchers of the two format families (mmq_k.cu, mmq_32.cu).
void launch_k(TensorType t, const Args& a, cudaStream_t stream);
void launch_32(TensorType t, const Args& a, cudaStream_t stream);

}  // namespace strata::cuda::mmq
