// The kernels behind GpuAttention (attention.h): the row-group attention kernel and the combine
// of split partials. Included by attention.cu only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kv_cache_gpu.h"
#include "backend/cuda/pdl.cuh"

namespace strata::cuda::attn {

constexpr int kThreads = 128;  // every attention block
constexpr int kWarps = kThreads / 32;
constexpr int kMaxSplits = 256;

__host__ __device__ constexpr int align16(int x) {
    return (x + 15) & ~15;
}

// Byte offsets in a block's dynamic shared memory; host and device compute them alike.
//   q:      F16: float [R][hd_k] (the query rounded to fp16); Q8_0: int8 [R][hd_k] codes, then
//           float [R][hd_k/32] scales at qd
//   sw:     float [T][sw_stride]: scores of the tile (odd stride: the softmax warp reading
//           one row's column over positions is free of bank conflicts)
//   wt:     float [T][R]: their softmax weights (16-byte rows: the value loop reads a
//           position's R weights as float4s)
//   stats:  float m[R], l[R], alpha[R]; int row_end[R], row_begin[R]
//   stage:  two stages of one tile of keys and values, reused at the end as float [R][hd_v]
//           for the reduction over position groups
//     F16:  keys [T][k_stride bytes], values [T][hd_v] halves at v
//     Q8_0: key codes [T][k_stride bytes], key scales at ks (the 16-byte span holding the
//           tile's scales, copied whole), value codes [T][hd_v] at v, value scales at vs
// Key rows are padded so that the lanes reading one 16-byte chunk each of different rows hit
// different banks.
struct Smem {
    int q = 0, qd = 0, sw = 0, sw_stride = 1, wt = 0, stats = 0, stage = 0, stage_bytes = 0;
    int k_stride = 0, v_stride = 0, ks = 0, v = 0, vs = 0, total = 0;

    __host__ __device__ Smem(bool q8, int R, int T, int hd_k, int hd_v) {
        const int tpp = kThreads / T;  // threads per key position in the score loop
        int end;
        if (!q8) {
            end = R * hd_k * 4;
            qd = end;
        } else {
            qd = align16(R * hd_k);
            end = qd + R * (hd_k / 32) * 4;
        }
        sw = align16(end);
        sw_stride = R == 1 ? 1 : R + 1;
        end = sw + T * sw_stride * 4;
        wt = align16(end);
        end = wt + T * R * 4;
        stats = align16(end);
        end = stats + 5 * R * 4;
        stage = align16(end);
        if (!q8) {
            // a row's 16-byte chunks: stride = tpp (mod 8) chunks, so a quarter warp (8 lanes,
            // 8 / tpp rows) covers all 32 banks once
            const int quads = hd_k / 8;
            const int pad = ((tpp % 8) - quads % 8 + 8) % 8;
            k_stride = (quads + pad) * 16;
            v_stride = hd_v * 2;
            ks = 0;
            v = T * k_stride;
            vs = 0;
            stage_bytes = v + T * v_stride;
        } else {
            const int quads = hd_k / 16;
            const int pad = (1 - quads % 8 + 8) % 8;
            k_stride = (quads + pad) * 16;
            v_stride = hd_v;
            ks = T * k_stride;
            v = ks + align16(T * hd_k / 16 + 32);
            vs = v + T * v_stride;
            stage_bytes = vs + align16(T * hd_v / 16 + 32);
        }
        const int red = R * hd_v * 4;
        total = stage + (2 * stage_bytes > red ? 2 * stage_bytes : red);
    }
};

struct Args {
    GpuKvPlane k, v;  // the layer's planes
    int slots;        // positions a head's plane holds: position p lies in slot p % slots
    int window;       // a row sees the `window` positions up to its own; 0: every one before it
    int n_head, group, hd_k, hd_v;  // group: query heads per KV head
    float scale;
    const float* sinks;  // [n_head]: a logit per head in every row's softmax sum, or null
    const float* q;      // [n][n_head][hd_k]
    int n;
    const int32_t* pos0;
    int hb, bq, head_chunks;  // a block's rows: bq tokens x hb heads of one chunk of a group
    int tile, max_splits;
    float* out;   // [n][n_head][hd_v]
    float* part;  // null: blocks write `out`; else [n * n_head][max_splits][hd_v] accumulators
    float* ml;    // [n * n_head][max_splits][2]: running max and sum of each partial
};

// The positions row group `group`'s tokens see, [group_start, group_length): up to the last
// token's own, from the first token's window start (0 without a window).
__device__ inline int group_length(const Args& a, int pos, int group) {
    return pos + min((group + 1) * a.bq, a.n);
}
__device__ inline int group_start(const Args& a, int pos, int group) {
    return a.window > 0 ? max(0, pos + group * a.bq + 1 - a.window) : 0;
}
// The first position a row whose own position is end - 1 sees.
__device__ inline int row_begin(const Args& a, int end) {
    return a.window > 0 ? max(0, end - a.window) : 0;
}
// Tiles per split when `length` positions are split over at most max_splits blocks.
__device__ inline int tiles_per_split(int length, int tile, int max_splits) {
    const int tiles = (length + tile - 1) / tile;
    return (tiles + max_splits - 1) / max_splits;
}

// Row r of a block: token t0 + r / hb, head chunk * hb + r % hb of the group. Null when the
// row is padding (past the batch, or past the group's heads).
__device__ inline const float* query_row(const Args& a, int r, int kvh, int chunk, int t0, int* t,
                                         int* head) {
    const int bt = r / a.hb, hq = chunk * a.hb + r % a.hb;
    *t = t0 + bt;
    *head = kvh * a.group + hq;
    if (bt >= a.bq || *t >= a.n || hq >= a.group) return nullptr;
    return a.q + (size_t(*t) * a.n_head + *head) * a.hd_k;
}

__device__ inline void cp_async16(void* smem, const void* gmem) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
    *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ inline void cp_async_commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ inline void cp_async_wait() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// `rows` rows of row_bytes (a multiple of 16) from contiguous global rows into shared rows
// dst_stride apart.
__device__ inline void copy_rows(unsigned char* dst, int dst_stride, const unsigned char* src,
                                 int row_bytes, int rows) {
    const int upr = row_bytes / 16;
    for (int u = int(threadIdx.x); u < rows * upr; u += kThreads) {
        const int r = u / upr, c = u % upr;
        cp_async16(dst + r * dst_stride + c * 16, src + size_t(r) * row_bytes + c * 16);
    }
}

// Positions [p0, p0 + rows) of one head in a plane of `slots` positions per head: they lie in
// slots p0 % slots onwards, the last `wrapped` of them (past the ring's end) from slot 0.
struct SlotRun {
    int first;    // slot of p0
    int wrapped;  // positions continuing at slot 0
};
__device__ inline SlotRun slot_run(int slots, int p0, int rows) {
    const int first = p0 % slots;
    return {first, max(0, first + rows - slots)};
}

// Rows of a head's plane (row_bytes each, `slots` rows from `head_base`) for positions
// [p0, p0 + rows) into shared rows dst_stride apart.
__device__ inline void copy_ring_rows(unsigned char* dst, int dst_stride,
                                      const unsigned char* head_base, int row_bytes, int slots,
                                      int p0, int rows) {
    const SlotRun run = slot_run(slots, p0, rows);
    copy_rows(dst, dst_stride, head_base + size_t(run.first) * row_bytes, row_bytes,
              rows - run.wrapped);
    if (run.wrapped > 0) {
        copy_rows(dst + (rows - run.wrapped) * dst_stride, dst_stride, head_base, row_bytes,
                  run.wrapped);
    }
}

// Byte offset, in a plane's scale array, of the first scale of (head, slot s).
__device__ inline size_t scale_byte(int head, int slots, int hd, int s) {
    return (size_t(head) * slots + s) * size_t(hd / 32) * 2;
}

// The Q8_0 scales of `rows` positions from p: the 16-byte aligned span that holds them (it
// stays inside the plane's 64-byte padded region). The first scale lands at
// dst + (scale_byte(head, slots, hd, p % slots) & 15), the others after it in position order.
// Where the positions wrap around a ring, the scales are copied one by one with plain loads
// instead (once per pass over the ring: the stores are seen after the barrier that precedes
// the tile's use, as the asynchronous copies are).
__device__ inline void copy_scales(unsigned char* dst, const uint16_t* scales, int head, int slots,
                                   int hd, int p, int rows) {
    const SlotRun run = slot_run(slots, p, rows);
    const size_t first = scale_byte(head, slots, hd, run.first);
    if (run.wrapped > 0) {
        const int nb = hd / 32;
        auto* out = reinterpret_cast<uint16_t*>(dst + (first & 15));
        const uint16_t* head_scales = scales + size_t(head) * slots * nb;
        for (int u = int(threadIdx.x); u < rows * nb; u += kThreads) {
            const int r = u / nb, b = u % nb;
            const int s = r < rows - run.wrapped ? run.first + r : r - (rows - run.wrapped);
            out[u] = head_scales[size_t(s) * nb + b];
        }
        return;
    }
    const size_t last = first + size_t(rows) * (hd / 32) * 2;
    const size_t a0 = first & ~size_t(15), a1 = (last + 15) & ~size_t(15);
    const auto* base = reinterpret_cast<const unsigned char*>(scales);
    for (int u = int(threadIdx.x); u < int((a1 - a0) / 16); u += kThreads) {
        cp_async16(dst + u * 16, base + a0 + size_t(u) * 16);
    }
}

// Keys and values of positions [p0, p0 + rows) of KV head kvh into one stage.
template <bool Q8>
__device__ void load_tile(const Args& a, const Smem& L, unsigned char* stage, int kvh, int p0,
                          int rows) {
    const int eb = Q8 ? 1 : 2;  // bytes per element
    const auto* kd =
        reinterpret_cast<const unsigned char*>(a.k.data) + size_t(kvh) * a.slots * a.hd_k * eb;
    const auto* vd =
        reinterpret_cast<const unsigned char*>(a.v.data) + size_t(kvh) * a.slots * a.hd_v * eb;
    copy_ring_rows(stage, L.k_stride, kd, a.hd_k * eb, a.slots, p0, rows);
    copy_ring_rows(stage + L.v, L.v_stride, vd, a.hd_v * eb, a.slots, p0, rows);
    if constexpr (Q8) {
        copy_scales(stage + L.ks, a.k.scales, kvh, a.slots, a.hd_k, p0, rows);
        copy_scales(stage + L.vs, a.v.scales, kvh, a.slots, a.hd_v, p0, rows);
    }
}

// Two int8 codes (the low bytes of w) as floats without the slow I2F pipe: the bit pattern
// 0x4B0000xx is the float 2^23 + xx, and xx = code + 128 after flipping the sign bit.
__device__ inline float2 i8x2_to_float2(unsigned w) {
    const unsigned u = w ^ 0x8080u;
    const float f0 = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7650));
    const float f1 = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7651));
    return make_float2(f0 - 8388736.0f, f1 - 8388736.0f);
}

__device__ inline float2 half2_bits_to_float2(unsigned bits) {
    return __half22float2(
        __halves2half2(__ushort_as_half(static_cast<unsigned short>(bits)),
                       __ushort_as_half(static_cast<unsigned short>(bits >> 16))));
}

// The block's query rows into shared memory: F16 caches take them rounded to fp16 (as the
// reference rounds the query to the key type); Q8_0 caches quantize them as
// quant::quantize_row_activations does (inverse scale 127 / amax, round half to even).
template <bool Q8, int R>
__device__ void load_queries(const Args& a, const Smem& L, unsigned char* smem, int kvh, int chunk,
                             int t0) {
    int t, head;
    if constexpr (!Q8) {
        float* qf = reinterpret_cast<float*>(smem + L.q);
        for (int i = int(threadIdx.x); i < R * a.hd_k; i += kThreads) {
            const int r = i / a.hd_k, d = i % a.hd_k;
            const float* src = query_row(a, r, kvh, chunk, t0, &t, &head);
            qf[i] = src ? __half2float(__float2half_rn(src[d])) : 0.0f;
        }
    } else {
        auto* qc = reinterpret_cast<int8_t*>(smem + L.q);
        float* qd = reinterpret_cast<float*>(smem + L.qd);
        const int nb = a.hd_k / 32, lane = int(threadIdx.x) % 32;
        // one warp per 32-element block; the loop bound is uniform across the warp
        for (int blk = int(threadIdx.x) / 32; blk < R * nb; blk += kWarps) {
            const int r = blk / nb, b = blk % nb;
            const float* src = query_row(a, r, kvh, chunk, t0, &t, &head);
            const float x = src ? src[b * 32 + lane] : 0.0f;
            float amax = fabsf(x);
            for (int o = 16; o > 0; o >>= 1) {
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            }
            const float d = __fdiv_rn(amax, 127.0f);
            const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
            const float scaled = isfinite(id) ? __fmul_rn(x, id) : __fdiv_rn(x, d);
            qc[r * a.hd_k + b * 32 + lane] = int8_t(__float2int_rn(scaled));
            if (lane == 0) qd[r * nb + b] = __half2float(__float2half_rn(d));
        }
    }
}

// Scores of one key position (the thread's share of its dimensions) against the R rows.
template <bool Q8, int R>
__device__ void score_position(const Args& a, const Smem& L, const unsigned char* smem,
                               const unsigned char* stage, int kskew, int pos, int sub, int tpp,
                               float (&acc)[R]) {
    const unsigned char* krow = stage + pos * L.k_stride;
    if constexpr (!Q8) {
        const float* qf = reinterpret_cast<const float*>(smem + L.q);
        for (int c = sub; c < a.hd_k / 8; c += tpp) {
            const uint4 raw = *reinterpret_cast<const uint4*>(krow + c * 16);
            const float2 k0 = half2_bits_to_float2(raw.x), k1 = half2_bits_to_float2(raw.y);
            const float2 k2 = half2_bits_to_float2(raw.z), k3 = half2_bits_to_float2(raw.w);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const float4 x0 = *reinterpret_cast<const float4*>(qf + r * a.hd_k + c * 8);
                const float4 x1 = *reinterpret_cast<const float4*>(qf + r * a.hd_k + c * 8 + 4);
                float s = acc[r];
                s = fmaf(x0.x, k0.x, s);
                s = fmaf(x0.y, k0.y, s);
                s = fmaf(x0.z, k1.x, s);
                s = fmaf(x0.w, k1.y, s);
                s = fmaf(x1.x, k2.x, s);
                s = fmaf(x1.y, k2.y, s);
                s = fmaf(x1.z, k3.x, s);
                s = fmaf(x1.w, k3.y, s);
                acc[r] = s;
            }
        }
    } else {
        const auto* qc = reinterpret_cast<const int8_t*>(smem + L.q);
        const float* qd = reinterpret_cast<const float*>(smem + L.qd);
        const int nb = a.hd_k / 32;
        const auto* ksc = reinterpret_cast<const __half*>(stage + L.ks + kskew) + pos * nb;
        for (int b = sub; b < nb; b += tpp) {
            const int4 k0 = *reinterpret_cast<const int4*>(krow + b * 32);
            const int4 k1 = *reinterpret_cast<const int4*>(krow + b * 32 + 16);
            const float dk = __half2float(ksc[b]);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int4 x0 = *reinterpret_cast<const int4*>(qc + r * a.hd_k + b * 32);
                const int4 x1 = *reinterpret_cast<const int4*>(qc + r * a.hd_k + b * 32 + 16);
                int s = __dp4a(k0.x, x0.x, 0);
                s = __dp4a(k0.y, x0.y, s);
                s = __dp4a(k0.z, x0.z, s);
                s = __dp4a(k0.w, x0.w, s);
                s = __dp4a(k1.x, x1.x, s);
                s = __dp4a(k1.y, x1.y, s);
                s = __dp4a(k1.z, x1.z, s);
                s = __dp4a(k1.w, x1.w, s);
                // as the reference's Q8_0 dot: (d_k * d_q) rounded, times the integer sum
                acc[r] = fmaf(__fmul_rn(dk, qd[r * nb + b]), float(s), acc[r]);
            }
        }
    }
}

// How a row's accumulator becomes its output, out = acc * x / y, given its running max m and
// sum l (of exp(s - m)): x = 1, y = l without a sink; with the head's sink logit z, a term
// exp(z) joins the sum, taken over the larger of m and z so that neither overflows:
// x = exp(m - M), y = l x + exp(z - M), M = max(m, z).
__device__ inline float2 finish(const Args& a, int head, float m, float l) {
    if (!a.sinks) return make_float2(1.0f, l);
    const float z = a.sinks[head];
    const float M = fmaxf(m, z);
    const float x = expf(m - M);
    return make_float2(x, l * x + expf(z - M));
}

// One value pair (dimensions 2 dp, 2 dp + 1) of tile position p, as floats.
template <bool Q8>
__device__ inline float2 value_pair(const Args& a, const Smem& L, const unsigned char* stage,
                                    int vskew, int p, int dp) {
    const unsigned char* vrow = stage + L.v + p * L.v_stride;
    if constexpr (!Q8) {
        return half2_bits_to_float2(*reinterpret_cast<const unsigned*>(vrow + 4 * dp));
    } else {
        const float2 c = i8x2_to_float2(*reinterpret_cast<const unsigned short*>(vrow + 2 * dp));
        const auto* vsc = reinterpret_cast<const __half*>(stage + L.vs + vskew);
        const float d = __half2float(vsc[p * (a.hd_v / 32) + (2 * dp) / 32]);
        return make_float2(c.x * d, c.y * d);
    }
}

// The R weights of one position (a 16-byte aligned row when R >= 4).
template <int R>
__device__ inline void load_weights(const float* src, float (&w)[R]) {
    if constexpr (R >= 4) {
#pragma unroll
        for (int i = 0; i < R / 4; ++i) {
            const float4 x = reinterpret_cast<const float4*>(src)[i];
            w[4 * i] = x.x;
            w[4 * i + 1] = x.y;
            w[4 * i + 2] = x.z;
            w[4 * i + 3] = x.w;
        }
    } else {
#pragma unroll
        for (int r = 0; r < R; ++r) w[r] = src[r];
    }
}

// grid: (max_splits, n_head_kv * head_chunks, ceil(n / bq)); block: kThreads; dynamic shared
// memory: Smem(Q8, R, tile, hd_k, hd_v).total.
// Block (split, kvh * head_chunks + chunk, group) attends rows [group * bq, +bq) x heads
// [chunk * hb, +hb) of KV head kvh's group over its split of positions [start, length)
// (group_start, group_length); each row sees those of its own window.
// Roles of the 128 threads:
//   scores:  tpp = 128 / tile threads per key position, each a share of its dimensions;
//   softmax: one warp per row, lanes over the tile's positions;
//   values:  hd_v / 2 threads per position group, each a pair of output dimensions for all R
//            rows, 128 / (hd_v / 2) position groups summed at the end.
// PRECONDITION: R >= hb * bq; hd_k, hd_v multiples of 8 (32 for Q8_0) and <= 256;
//               tile in {16, 32, 64}; the plane holds positions [start, length) of every
//               row group: slots >= length, or window > 0 and slots >= window + bq - 1.
template <bool Q8, int R>
__global__ void __launch_bounds__(kThreads) attend_kernel(const Args a) {
    pdl_trigger();  // launched with launch_pdl
    pdl_wait();
    extern __shared__ __align__(16) unsigned char smem[];
    const int T = a.tile;
    const Smem L(Q8, R, T, a.hd_k, a.hd_v);
    const int tid = int(threadIdx.x);
    const int split = int(blockIdx.x);
    const int kvh = int(blockIdx.y) / a.head_chunks, chunk = int(blockIdx.y) % a.head_chunks;
    const int t0 = int(blockIdx.z) * a.bq;
    const int pos = *a.pos0;
    const int length = group_length(a, pos, int(blockIdx.z));
    const int start = group_start(a, pos, int(blockIdx.z));
    const int per = tiles_per_split(length - start, T, a.max_splits);
    const int c0 = start + split * per * T;
    if (c0 >= length) return;  // a surplus split: the context is shorter than the grid allows
    const int c1 = min(length, c0 + per * T);

    float* m_s = reinterpret_cast<float*>(smem + L.stats);
    float* l_s = m_s + R;
    float* al_s = l_s + R;
    int* end_s = reinterpret_cast<int*>(al_s + R);
    int* begin_s = end_s + R;
    float* sw = reinterpret_cast<float*>(smem + L.sw);
    float* wt = reinterpret_cast<float*>(smem + L.wt);
    if (tid < R) {
        int t, head;
        const bool valid = query_row(a, tid, kvh, chunk, t0, &t, &head) != nullptr;
        end_s[tid] = valid ? pos + t + 1 : 0;  // padding rows see nothing
        begin_s[tid] = row_begin(a, end_s[tid]);
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }
    load_queries<Q8, R>(a, L, smem, kvh, chunk, t0);

    const int tpp = kThreads / T;
    const int qpos = tid / tpp, sub = tid % tpp;
    const int np = a.hd_v / 2, groups = kThreads / np;
    const int pg = tid / np, dp = tid % np;
    float2 o[R];
#pragma unroll
    for (int r = 0; r < R; ++r) o[r] = make_float2(0.0f, 0.0f);

    const int ntiles = (c1 - c0 + T - 1) / T;
    unsigned char* stages = smem + L.stage;
    load_tile<Q8>(a, L, stages, kvh, c0, min(T, c1 - c0));
    cp_async_commit();
    for (int it = 0; it < ntiles; ++it) {
        const int p0 = c0 + it * T;
        const int nvalid = min(T, c1 - p0);
        if (it + 1 < ntiles) {
            // the other stage was last read in the previous iteration, which ended in a barrier
            load_tile<Q8>(a, L, stages + ((it + 1) & 1) * L.stage_bytes, kvh, p0 + T,
                          min(T, c1 - p0 - T));
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const unsigned char* stage = stages + (it & 1) * L.stage_bytes;
        int kskew = 0, vskew = 0;
        if constexpr (Q8) {
            kskew = int(scale_byte(kvh, a.slots, a.hd_k, p0 % a.slots) & 15);
            vskew = int(scale_byte(kvh, a.slots, a.hd_v, p0 % a.slots) & 15);
        }

        // Scores: s = scale * q.k, -inf where the row's token cannot see the position (after
        // its own, or before its window).
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0.0f;
        if (qpos < nvalid) score_position<Q8, R>(a, L, smem, stage, kskew, qpos, sub, tpp, acc);
        for (int off = 1; off < tpp; off <<= 1) {
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
        }
        if (sub == 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int p = p0 + qpos;
                const bool seen = qpos < nvalid && p < end_s[r] && p >= begin_s[r];
                sw[qpos * L.sw_stride + r] = seen ? acc[r] * a.scale : -INFINITY;
            }
        }
        __syncthreads();

        // Online softmax, one warp per row: new max, weights exp(s - max), rescale factor.
        const int lane = tid % 32;
        for (int r = tid / 32; r < R; r += kWarps) {
            const float s0 = lane < T ? sw[lane * L.sw_stride + r] : -INFINITY;
            const float s1 = lane + 32 < T ? sw[(lane + 32) * L.sw_stride + r] : -INFINITY;
            float mx = fmaxf(s0, s1);
            for (int o2 = 16; o2 > 0; o2 >>= 1) {
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o2));
            }
            const float m_old = m_s[r];
            const float m_new = fmaxf(m_old, mx);
            // a row that has seen nothing yet keeps weights 0 instead of exp(-inf + inf)
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float w0 = expf(s0 - m_use), w1 = expf(s1 - m_use);
            if (lane < T) wt[lane * R + r] = w0;
            if (lane + 32 < T) wt[(lane + 32) * R + r] = w1;
            float sum = w0 + w1;
            for (int o2 = 16; o2 > 0; o2 >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o2);
            const float alpha = expf(m_old - m_use);
            __syncwarp();
            if (lane == 0) {
                m_s[r] = m_new;
                l_s[r] = l_s[r] * alpha + sum;
                al_s[r] = alpha;
            }
        }
        __syncthreads();

        // Values: o = alpha * o + sum_p w_p v_p for this thread's dimension pair.
        if (pg < groups) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                o[r].x *= al_s[r];
                o[r].y *= al_s[r];
            }
            for (int p = pg; p < nvalid; p += groups) {
                const float2 v = value_pair<Q8>(a, L, stage, vskew, p, dp);
                float w[R];
                load_weights<R>(wt + p * R, w);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    o[r].x = fmaf(w[r], v.x, o[r].x);
                    o[r].y = fmaf(w[r], v.y, o[r].y);
                }
            }
        }
        __syncthreads();
    }

    // Sum the position groups' accumulators (the stages are free: every copy has landed).
    auto* red = reinterpret_cast<float2*>(smem + L.stage);
    for (int g = 1; g < groups; ++g) {
        if (pg == g) {
#pragma unroll
            for (int r = 0; r < R; ++r) red[r * np + dp] = o[r];
        }
        __syncthreads();
        if (pg == 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                o[r].x += red[r * np + dp].x;
                o[r].y += red[r * np + dp].y;
            }
        }
        __syncthreads();
    }

    if (pg == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int t, head;
            if (!query_row(a, r, kvh, chunk, t0, &t, &head)) continue;
            const size_t row = size_t(t) * a.n_head + head;
            if (!a.part) {
                const float2 f = finish(a, head, m_s[r], l_s[r]);
                reinterpret_cast<float2*>(a.out + row * a.hd_v)[dp] =
                    make_float2(o[r].x * f.x / f.y, o[r].y * f.x / f.y);
            } else {
                const size_t idx = row * a.max_splits + split;
                reinterpret_cast<float2*>(a.part + idx * a.hd_v)[dp] = o[r];
                if (dp == 0) {
                    a.ml[idx * 2] = m_s[r];
                    a.ml[idx * 2 + 1] = l_s[r];
                }
            }
        }
    }
}

// grid: (n_head, n); block: kThreads. Merges the partials of a row: out = sum_s e_s acc_s /
// (sum_s e_s l_s + [sink] e^(z - M)) with e_s = exp(m_s - M), M the largest m_s (and the head's
// sink logit z), over the splits the attend kernel ran for it.
// PRECONDITION: the Args of the attend launch before it, with part and ml set.
__global__ void __launch_bounds__(kThreads) combine_kernel(const Args a) {
    pdl_trigger();  // launched with launch_pdl
    pdl_wait();
    __shared__ float weight[kMaxSplits];
    const int head = int(blockIdx.x), t = int(blockIdx.y);
    const int span = group_length(a, *a.pos0, t / a.bq) - group_start(a, *a.pos0, t / a.bq);
    const int per = tiles_per_split(span, a.tile, a.max_splits);
    const int tiles = (span + a.tile - 1) / a.tile;
    const int used = (tiles + per - 1) / per;
    const size_t row = size_t(t) * a.n_head + head;
    const float* ml = a.ml + row * a.max_splits * 2;
    float mx = a.sinks ? a.sinks[head] : -INFINITY;
    for (int s = 0; s < used; ++s) mx = fmaxf(mx, ml[2 * s]);
    // (a split that saw none of the row's positions has m = -inf: weight 0)
    for (int s = int(threadIdx.x); s < used; s += kThreads) weight[s] = expf(ml[2 * s] - mx);
    __syncthreads();
    float den = a.sinks ? expf(a.sinks[head] - mx) : 0.0f;
    for (int s = 0; s < used; ++s) den += weight[s] * ml[2 * s + 1];
    const float* acc = a.part + row * a.max_splits * a.hd_v;
    for (int d = int(threadIdx.x); d < a.hd_v; d += kThreads) {
        float num = 0.0f;
        for (int s = 0; s < used; ++s) num += weight[s] * acc[size_t(s) * a.hd_v + d];
        a.out[row * a.hd_v + d] = num / den;
    }
}

}  // namespace strata::cuda::attn
