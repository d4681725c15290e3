// Tensor-core attention for prompt batches over an F16 cache, head sizes 64 and 128 (keys and
// values alike): the same row groups, splits and partials as attend_kernel (attention_kernels.cuh),
// with both products on mma.sync m16n8k16 (fp16 inputs, fp32 accumulators). Included by
// attention.cu only.
//
// Each of the 4 warps owns 16 of the block's 64 query rows. Per tile of 64 key positions:
//   S (16 x 64 per warp) = Q K^T: the query rows stay in registers as A fragments (rounded to
//     fp16, as the reference rounds the query for an F16 cache); a key row's two adjacent
//     halves are exactly a B fragment register, read straight from shared memory;
//   online softmax on the accumulators: a row's values live in the 4 lanes of a quad, so its max
//     takes two shuffles;
//   O (16 x hd per warp) += P V: the fp32 accumulators of S, rounded to fp16, are the A fragments
//     of the second product as they lie (the C layout of two key tiles is the A layout of one
//     16-key step), and ldmatrix.trans turns rows of V into B fragments.
// The weights enter the value product rounded to fp16, as the reference's CPU path also rounds
// them (after normalising; here before).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.cuh"

namespace strata::cuda::attn {

constexpr int kMmaRows = 64;  // query rows per block: 16 per warp
constexpr int kMmaTile = 64;  // key positions per tile

// A cached row in shared memory: hd halves and 16 bytes of padding, so the 8 rows a fragment
// load touches start in different banks.
__host__ __device__ constexpr int mma_row_bytes(int hd) {
    return (hd + 8) * 2;
}
// Two stages of a tile of keys then values.
__host__ __device__ constexpr int mma_smem_bytes(int hd) {
    return 2 * 2 * kMmaTile * mma_row_bytes(hd);
}

__device__ inline uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);  // lo in the low 16 bits
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// Four 8x8 fp16 matrices, transposed: lane i gives the address of row i % 8 of matrix i / 8.
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
#else
    __trap();
#endif
}

// Keys and values of positions [p0, p0 + rows) of KV head kvh into one stage; value rows past
// `rows` are zeroed, since a weight of 0 times a stale NaN in the product would be NaN.
template <int HD>
__device__ void mma_load_tile(const Args& a, unsigned char* stage, int kvh, int p0, int rows) {
    constexpr int rb = mma_row_bytes(HD);
    const size_t head = size_t(kvh) * a.slots * HD * 2;
    copy_ring_rows(stage, rb, reinterpret_cast<const unsigned char*>(a.k.data) + head, HD * 2,
                   a.slots, p0, rows);
    unsigned char* v = stage + kMmaTile * rb;
    copy_ring_rows(v, rb, reinterpret_cast<const unsigned char*>(a.v.data) + head, HD * 2, a.slots,
                   p0, rows);
    for (int u = int(threadIdx.x); u < (kMmaTile - rows) * (HD / 8); u += kThreads) {
        const int r = rows + u / (HD / 8), c = u % (HD / 8);
        *reinterpret_cast<uint4*>(v + r * rb + c * 16) = make_uint4(0, 0, 0, 0);
    }
}

// grid: (max_splits, n_head_kv * head_chunks, ceil(n / bq)); block: kThreads; dynamic shared
// memory: mma_smem_bytes(HD). Rows, splits and outputs as attend_kernel's, with R = kMmaRows
// and tile = kMmaTile.
// PRECONDITION: F16 cache; hd_k == hd_v == HD; hb * bq <= kMmaRows; the plane holds the
//               positions each row group sees (as attend_kernel's).
template <int HD>
__global__ void __launch_bounds__(kThreads) attend_mma_kernel(const Args a) {
    pdl_trigger();  // launched with launch_pdl
    pdl_wait();
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int rb = mma_row_bytes(HD);
    constexpr int KS = HD / 16;       // 16-dimension steps of the score product
    constexpr int NT = kMmaTile / 8;  // 8-key column tiles of a score tile
    constexpr int DT = HD / 8;        // 8-dimension column tiles of the output
    const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, tq = lane % 4;  // fragment row and column pair of this lane
    const int split = int(blockIdx.x);
    const int kvh = int(blockIdx.y) / a.head_chunks, chunk = int(blockIdx.y) % a.head_chunks;
    const int t0 = int(blockIdx.z) * a.bq;
    const int pos = *a.pos0;
    const int length = group_length(a, pos, int(blockIdx.z));
    const int start = group_start(a, pos, int(blockIdx.z));
    const int per = tiles_per_split(length - start, kMmaTile, a.max_splits);
    const int c0 = start + split * per * kMmaTile;
    if (c0 >= length) return;
    const int c1 = min(length, c0 + per * kMmaTile);

    // This lane's two rows: g and g + 8 of the warp's 16, and the positions they see,
    // [begin, end).
    int tr[2], hr[2], end[2], begin[2];
    const float* qr[2];
    for (int i = 0; i < 2; ++i) {
        qr[i] = query_row(a, warp * 16 + g + 8 * i, kvh, chunk, t0, &tr[i], &hr[i]);
        end[i] = qr[i] ? pos + tr[i] + 1 : 0;  // padding rows see nothing
        begin[i] = row_begin(a, end[i]);
    }
    uint32_t qa[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        const int d = ks * 16 + 2 * tq;
        qa[ks][0] = qr[0] ? pack_half2(qr[0][d], qr[0][d + 1]) : 0u;
        qa[ks][1] = qr[1] ? pack_half2(qr[1][d], qr[1][d + 1]) : 0u;
        qa[ks][2] = qr[0] ? pack_half2(qr[0][d + 8], qr[0][d + 9]) : 0u;
        qa[ks][3] = qr[1] ? pack_half2(qr[1][d + 8], qr[1][d + 9]) : 0u;
    }
    float o[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's share

    const int ntiles = (c1 - c0 + kMmaTile - 1) / kMmaTile;
    const int stage_bytes = 2 * kMmaTile * rb;
    mma_load_tile<HD>(a, smem, kvh, c0, min(kMmaTile, c1 - c0));
    cp_async_commit();
    for (int it = 0; it < ntiles; ++it) {
        const int p0 = c0 + it * kMmaTile;
        if (it + 1 < ntiles) {
            mma_load_tile<HD>(a, smem + ((it + 1) & 1) * stage_bytes, kvh, p0 + kMmaTile,
                              min(kMmaTile, c1 - p0 - kMmaTile));
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const unsigned char* ks_ = smem + (it & 1) * stage_bytes;
        const unsigned char* vs_ = ks_ + kMmaTile * rb;

        // S = Q K^T: B fragment of keys nt*8 .. +7 = two halves of key row (nt*8 + g).
        float s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const unsigned char* kr = ks_ + (nt * 8 + g) * rb + (ks * 16 + 2 * tq) * 2;
                mma_16816(s[nt], qa[ks], *reinterpret_cast<const uint32_t*>(kr),
                          *reinterpret_cast<const uint32_t*>(kr + 16));
            }
        }

        // Scale and mask (element e: row g + 8 (e / 2), key nt*8 + 2 tq + e % 2); row maxima.
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int p = p0 + nt * 8 + 2 * tq + (e & 1);
                const bool seen = p < c1 && p < end[e / 2] && p >= begin[e / 2];
                s[nt][e] = seen ? s[nt][e] * a.scale : -INFINITY;
                mx[e / 2] = fmaxf(mx[e / 2], s[nt][e]);
            }
        }
        float use[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m[i], mx[i]);
            use[i] = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: weights stay 0
            const float alpha = expf(m[i] - use[i]);
            m[i] = m_new;
            l[i] *= alpha;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                o[dt][2 * i] *= alpha;
                o[dt][2 * i + 1] *= alpha;
            }
        }

        // Weights, packed as the A fragments of the value product: 16-key step kk takes key
        // tiles 2 kk (registers 0, 1) and 2 kk + 1 (registers 2, 3).
        uint32_t pa[NT / 2][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const float w0 = expf(s[nt][0] - use[0]), w1 = expf(s[nt][1] - use[0]);
            const float w2 = expf(s[nt][2] - use[1]), w3 = expf(s[nt][3] - use[1]);
            l[0] += w0 + w1;
            l[1] += w2 + w3;
            pa[nt / 2][(nt & 1) * 2] = pack_half2(w0, w1);
            pa[nt / 2][(nt & 1) * 2 + 1] = pack_half2(w2, w3);
        }

        // O += P V. ldmatrix: matrices (keys kk*16 + 0..7 | 8..15) x (dims dt*8 | (dt+1)*8),
        // transposed, are the B fragments of output tiles dt and dt + 1.
        const int mat = lane / 8, mrow = lane % 8;
#pragma unroll
        for (int kk = 0; kk < NT / 2; ++kk) {
#pragma unroll
            for (int dt = 0; dt < DT; dt += 2) {
                uint32_t b[4];
                ldmatrix_x4_trans(
                    b, vs_ + (kk * 16 + (mat & 1) * 8 + mrow) * rb + (dt + (mat >> 1)) * 16);
                mma_16816(o[dt], pa[kk], b[0], b[1]);
                mma_16816(o[dt + 1], pa[kk], b[2], b[3]);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 2; ++i) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        if (!qr[i]) continue;
        const size_t row = size_t(tr[i]) * a.n_head + hr[i];
        if (!a.part) {
            const float2 f = finish(a, hr[i], m[i], l[i]);
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                reinterpret_cast<float2*>(a.out + row * HD + dt * 8)[tq] =
                    make_float2(o[dt][2 * i] * f.x / f.y, o[dt][2 * i + 1] * f.x / f.y);
            }
        } else {
            const size_t idx = row * a.max_splits + split;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                reinterpret_cast<float2*>(a.part + idx * HD + dt * 8)[tq] =
                    make_float2(o[dt][2 * i], o[dt][2 * i + 1]);
            }
            if (tq == 0) {
                a.ml[idx * 2] = m[i];
                a.ml[idx * 2 + 1] = l[i];
            }
        }
    }
}

}  // namespace strata::cuda::attn
