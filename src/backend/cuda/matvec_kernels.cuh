// The decode matvec's kernels: y = W x for 1..8 tokens, weights in any supported format, one
// fused kernel that reads each weight byte once (matvec_chunk.cuh has the arithmetic).
//
// Work split: a block of 8 warps, one warp per weight row. A warp walks its row in chunks of
// 2048 elements (at most 2176 bytes: Q8_0): it loads chunk c + 1 into registers (up to five
// 16-byte words per lane, coalesced: lane i takes words i, i + 32, ...) while it computes chunk
// c from shared memory, where the previous step left it. Staging through shared memory makes
// the loads independent of the block size (18, 17, 110, 210 bytes...): a row is read as a flat
// run of 16-byte words whenever its start is 16-byte aligned, and with the widest narrower load
// its alignment allows otherwise (GGUF rows are only guaranteed their block struct's
// alignment); the decoders then read the staged blocks at their known alignment. At one token
// the kernels take 40-62 registers, so an SM holds 32-40 warps, each with a chunk (0.7-2.2 KB)
// in flight: 25-85 KB of loads outstanding per SM, enough to cover HBM latency.
//
// Every product sees the activations the CPU sees (formats_activations.cuh): a small kernel
// (one block per 512 elements and token) first rounds x as the CPU does for the weight type:
// block formats multiply their integer codes with the CPU's int8 activation codes (formats.cuh);
// F16 / BF16 take x rounded to fp16 / bf16 once per call (rounding it in the matvec would cost a
// conversion per weight and token); F32 takes x as it is, with no such launch. Per 16 weights a
// lane does a few tens of instructions at one token (the products: four dp4a), well under what
// an SM can issue while it streams its share of HBM bandwidth.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_chunk.cuh"
#include "backend/cuda/matvec_launch.h"

namespace strata::cuda {

namespace {

constexpr int kWarps = 8;  // rows per block of the matvec

// ---- activation rounding --------------------------------------------------------------------

// One block per activation group (512 elements) of one token, one thread per element.
// Block formats: the CPU's code of each element (round_in_block: a warp per 32-element block, 8
// warps per 256), the block's step (and Q8_1 sum), the sums of 16 codes (Q8_K); then, through
// shared memory, thread p writes position p of the group's layout (formats.cuh), so the writes
// are coalesced. F16 / BF16: each element rounded, in element order. Grid: (q_stride / 512, n).
// PRECONDITION: cols a multiple of F::kBlockElems; F is not F32.
template <class F>
__global__ void __launch_bounds__(kGroupElems)
    round_activations(const float* __restrict__ x, int cols, QuantizedActivations out) {
    constexpr TensorType kAct = activation_type(F::kType);
    const int t = blockIdx.y;
    const int e = blockIdx.x * kGroupElems + threadIdx.x;
    const bool inside = e < cols;
    const float v = inside ? x[size_t(t) * cols + e] : 0.0f;
    if constexpr (F::kFloat) {
        static_assert(kAct != TensorType::F32);
        if (inside) out.x[size_t(t) * cols + e] = round_float_activation<kAct>(v);
    } else {
        static_assert(F::kBlockElems == activation_block_elems(kAct));
        __shared__ int8_t codes[kGroupElems];
        __shared__ BlockRoundingScratch scratch;
        const RoundedActivation r = round_in_block<kAct>(v, scratch);
        codes[threadIdx.x] = int8_t(r.code);  // 0 past cols
        if (inside && e % F::kBlockElems == 0) {
            const size_t b = size_t(t) * (cols / F::kBlockElems) + e / F::kBlockElems;
            out.step[b] = r.step;
            if constexpr (kAct == TensorType::Q8_1) out.q8_1_sums[b] = r.q8_1_sum;
        }
        if constexpr (kAct == TensorType::Q8_K) {
            int sum = r.code;
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if (inside && e % 16 == 0) out.sums[size_t(t) * (cols / 16) + e / 16] = sum;
        }
        __syncthreads();
        out.q[size_t(t) * out.q_stride + e] = codes[activation_element<F>(threadIdx.x)];
    }
}

// ---- staging ------------------------------------------------------------------------------------

// 16 bytes at p (aligned to sizeof(Word)) with loads of Word, marked as read once (evict first).
template <typename Word>
__device__ __forceinline__ uint4 load16(const uint8_t* p) {
    if constexpr (sizeof(Word) == 16) {
        return __ldcs(reinterpret_cast<const uint4*>(p));
    } else if constexpr (sizeof(Word) == 8) {
        const uint2 a = __ldcs(reinterpret_cast<const uint2*>(p));
        const uint2 b = __ldcs(reinterpret_cast<const uint2*>(p) + 1);
        return make_uint4(a.x, a.y, b.x, b.y);
    } else if constexpr (sizeof(Word) == 4) {
        const auto* w = reinterpret_cast<const unsigned*>(p);
        return make_uint4(__ldcs(w), __ldcs(w + 1), __ldcs(w + 2), __ldcs(w + 3));
    } else if constexpr (sizeof(Word) == 2) {
        const auto* h = reinterpret_cast<const unsigned short*>(p);
        unsigned r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
            r[i] = unsigned(__ldcs(h + 2 * i)) | unsigned(__ldcs(h + 2 * i + 1)) << 16;
        return make_uint4(r[0], r[1], r[2], r[3]);
    } else {
        unsigned r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            r[i] = unsigned(__ldcs(p + 4 * i)) | unsigned(__ldcs(p + 4 * i + 1)) << 8 |
                   unsigned(__ldcs(p + 4 * i + 2)) << 16 | unsigned(__ldcs(p + 4 * i + 3)) << 24;
        }
        return make_uint4(r[0], r[1], r[2], r[3]);
    }
}

// A chunk of a row in flight in a warp's registers: 16-byte word k = lane + 32 i of the chunk in
// v[i]. Only whole words; the last bytes of a row whose length is not a multiple of 16 are
// copied straight to shared memory by store_tail.
template <int kBytes>
struct ChunkInFlight {
    static constexpr int kSlots = (kBytes / 16 + 31) / 32;
    uint4 v[kSlots];

    template <typename Word>
    __device__ __forceinline__ void load_as(const uint8_t* src, int words, int lane) {
#pragma unroll
        for (int i = 0; i < kSlots; ++i) {
            const int k = i * 32 + lane;
            if (k < words) v[i] = load16<Word>(src + 16 * k);
        }
    }

    // Starts the loads of the `bytes` bytes at src, which is aligned to `width`.
    __device__ __forceinline__ void load(const uint8_t* src, int bytes, int width, int lane) {
        const int words = bytes >> 4;
        switch (width) {
            case 16:
                load_as<uint4>(src, words, lane);
                break;
            case 8:
                load_as<uint2>(src, words, lane);
                break;
            case 4:
                load_as<unsigned>(src, words, lane);
                break;
            case 2:
                load_as<unsigned short>(src, words, lane);
                break;
            default:
                load_as<unsigned char>(src, words, lane);
                break;
        }
    }

    __device__ __forceinline__ void store(uint8_t* stage, int bytes, int lane) const {
        const int words = bytes >> 4;
#pragma unroll
        for (int i = 0; i < kSlots; ++i) {
            const int k = i * 32 + lane;
            if (k < words) *reinterpret_cast<uint4*>(stage + 16 * k) = v[i];
        }
    }

    __device__ __forceinline__ static void store_tail(uint8_t* stage, const uint8_t* src, int bytes,
                                                      int lane) {
        const int whole = bytes & ~15;
        if (lane < bytes - whole) stage[whole + lane] = __ldcs(src + whole + lane);
    }
};

// ---- the matvec
// -----------------------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Grid: ceil(rows / kWarps) blocks of 32 * kWarps threads; warp w of block b computes row
// kWarps * b + w for all n tokens.
// PRECONDITION: 1 <= n <= N; the WeightRows preconditions (matmul_kernels.h).
template <class F, int N>
__global__ void __launch_bounds__(32 * kWarps) matvec(const MatvecArgs a) {
    constexpr int kChunkBlocks = chunk_blocks<F>();
    constexpr int kChunkBytes = chunk_bytes<F>();
    static_assert(kChunkBytes % 16 == 0);
    __shared__ __align__(16) uint8_t stage_all[kWarps][kChunkBytes];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = int64_t(blockIdx.x) * kWarps + warp;
    if (row >= a.rows) return;  // a whole warp; nothing below synchronizes the block
    uint8_t* stage = stage_all[warp];
    const uint8_t* src = a.w + size_t(row) * a.row_stride;
    const int nblocks = a.cols / F::kBlockElems;

    float acc[N];
#pragma unroll
    for (int t = 0; t < N; ++t) acc[t] = 0.0f;

    ChunkInFlight<kChunkBytes> chunk;
    chunk.load(src, min(kChunkBlocks, nblocks) * F::kBlockBytes, a.load_width, lane);
    for (int b0 = 0; b0 < nblocks; b0 += kChunkBlocks) {
        const int nb = min(kChunkBlocks, nblocks - b0);
        const int bytes = nb * F::kBlockBytes;
        __syncwarp();  // every lane is done with the previous chunk
        chunk.store(stage, bytes, lane);
        chunk.store_tail(stage, src + size_t(b0) * F::kBlockBytes, bytes, lane);
        __syncwarp();
        const int next = b0 + kChunkBlocks;
        if (next < nblocks) {
            chunk.load(src + size_t(next) * F::kBlockBytes,
                       min(kChunkBlocks, nblocks - next) * F::kBlockBytes, a.load_width, lane);
        }
        if constexpr (F::kFloat) {
            const float* x = activation_type(F::kType) == TensorType::F32 ? a.x : a.act.x;
            chunk_dot_float<F, N>(stage, b0, nb, lane, x, a.cols, a.n, a.x_aligned, acc);
        } else {
            chunk_dot<F, N>(stage, b0, nb, lane, a.act, a.cols, a.n, acc);
        }
    }
#pragma unroll
    for (int t = 0; t < N; ++t) {
        const float v = warp_sum(acc[t]);
        if (lane == 0 && t < a.n) a.y[size_t(t) * a.rows + row] = a.bias ? v + a.bias[row] : v;
    }
}

template <class F, int N>
void launch_tokens(const MatvecArgs& a, cudaStream_t stream) {
    const auto blocks = unsigned((a.rows + kWarps - 1) / kWarps);
    matvec<F, N><<<blocks, 32 * kWarps, 0, stream>>>(a);
    STRATA_CUDA_LAUNCHED();
}

// The activation rounding (all but F32) and the matvec with N >= a.n.
template <class F>
void launch_format(const MatvecArgs& a, cudaStream_t stream) {
    if constexpr (activation_type(F::kType) != TensorType::F32) {
        const dim3 grid(unsigned(a.act.q_stride / kGroupElems), unsigned(a.n));
        round_activations<F><<<grid, kGroupElems, 0, stream>>>(a.x, a.cols, a.act);
        STRATA_CUDA_LAUNCHED();
    }
    if (a.n == 1) {
        launch_tokens<F, 1>(a, stream);
    } else if (a.n == 2) {
        launch_tokens<F, 2>(a, stream);
    } else if (a.n <= 4) {
        launch_tokens<F, 4>(a, stream);
    } else {
        launch_tokens<F, 8>(a, stream);
    }
}

}  // namespace

}  // namespace strata::cuda
