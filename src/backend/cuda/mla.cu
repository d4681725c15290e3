// Multi-head latent attention kernels (mla.h).
//
// The attention is multi-query attention over rows of rank + n_rot fp16 values: a block takes
// kRows query rows (token x head) and a range of positions, streams the range's rows through
// shared memory kTile at a time, and keeps an online softmax per query row (running max and
// sum, the output rescaled when the max grows). Every cached row a block loads serves all its
// query rows. A decode step's few rows leave the GPU mostly idle, so their positions are split
// over blocks (flash-decoding) whose partial max, sum and output a second kernel combines.
#include "backend/cuda/mla.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "backend/cuda/block_sum.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/formats_all.cuh"
#include "model/activation_memory.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

// grid: n rows; block: kThreads.
__global__ void rms_norm_strided_kernel(float* rows, int64_t cols, int64_t stride,
                                        const float* weight, float eps) {
    __shared__ double red[kThreads / 32];
    float* x = rows + int64_t(blockIdx.x) * stride;
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) sq += double(x[i]) * double(x[i]);
    const double sum = block_sum(sq, red);
    const float mean = float(sum / double(cols));
    const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
        x[i] = __fmul_rn(__fmul_rn(x[i], scale), weight[i]);
    }
}

// ---- per-head products

constexpr int kProductTokens = 8;  // tokens a warp multiplies with each dequantized row

struct ProductArgs {
    const uint8_t* w;
    size_t row_bytes;
    int64_t first, head_stride, rows;
    int cols;
    HeadRows x, y;
    int64_t n;
};

// grid: (n_head, ceil(rows / kWarps), ceil(n / kProductTokens)); a warp per output row, its
// lanes over the row's groups of 8 values, each group dequantized once for the block's tokens.
template <class F>
__global__ void __launch_bounds__(kThreads) head_products_kernel(ProductArgs a) {
    constexpr int kWarps = kThreads / 32;
    const int h = int(blockIdx.x);
    const int64_t r = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
    const int lane = int(threadIdx.x) % 32;
    const int64_t t0 = int64_t(blockIdx.z) * kProductTokens;
    if (r >= a.rows) return;
    const uint8_t* row = a.w + size_t(a.first + h * a.head_stride + r) * a.row_bytes;
    const int tokens = int(min(int64_t(kProductTokens), a.n - t0));
    float acc[kProductTokens] = {};
    const int groups = (a.cols + 7) / 8;
    for (int g = lane; g < groups; g += 32) {
        const int count = min(8, a.cols - 8 * g);
        float v[8] = {};
        dequant_group<F>(row, g, count, v);
#pragma unroll
        for (int t = 0; t < kProductTokens; ++t) {
            if (t >= tokens) break;
            const float* x = a.x.base + (t0 + t) * a.x.token + h * a.x.head + 8 * g;
            for (int i = 0; i < count; ++i) acc[t] += v[i] * x[i];
        }
    }
#pragma unroll
    for (int t = 0; t < kProductTokens; ++t) {
        float s = acc[t];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0 && t < tokens) a.y.base[(t0 + t) * a.y.token + h * a.y.head + r] = s;
    }
}

// grid: (n_head, ceil(groups / kThreads), ceil(n / kProductTokens)); a thread per group of 8
// output values, summing the head's rows in order (as the CPU's mla_absorb_transposed).
template <class F>
__global__ void __launch_bounds__(kThreads) head_products_transposed_kernel(ProductArgs a) {
    const int h = int(blockIdx.x);
    const int g = int(blockIdx.y) * kThreads + int(threadIdx.x);
    const int64_t t0 = int64_t(blockIdx.z) * kProductTokens;
    const int groups = (a.cols + 7) / 8;
    if (g >= groups) return;
    const int count = min(8, a.cols - 8 * g);
    const int tokens = int(min(int64_t(kProductTokens), a.n - t0));
    float acc[kProductTokens][8] = {};
    for (int64_t r = 0; r < a.rows; ++r) {
        const uint8_t* row = a.w + size_t(h * a.head_stride + r) * a.row_bytes;
        float v[8] = {};
        dequant_group<F>(row, g, count, v);
#pragma unroll
        for (int t = 0; t < kProductTokens; ++t) {
            if (t >= tokens) break;
            const float xr = a.x.base[(t0 + t) * a.x.token + h * a.x.head + r];
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[t][i] += v[i] * xr;
        }
    }
    for (int t = 0; t < tokens; ++t) {
        float* y = a.y.base + (t0 + t) * a.y.token + h * a.y.head + 8 * g;
        for (int i = 0; i < count; ++i) y[i] = acc[t][i];
    }
}

template <bool kTransposed>
void launch_products(const TensorView& w, ProductArgs a, int n_head, cudaStream_t s) {
    if (a.n <= 0 || n_head <= 0) return;
    constexpr int kWarps = kThreads / 32;
    const unsigned token_blocks = unsigned((a.n + kProductTokens - 1) / kProductTokens);
    const bool took = with_format(w.type, [&](auto format) {
        using F = decltype(format);
        if constexpr (kTransposed) {
            const int groups = (a.cols + 7) / 8;
            const dim3 grid(unsigned(n_head), unsigned((groups + kThreads - 1) / kThreads),
                            token_blocks);
            head_products_transposed_kernel<F><<<grid, kThreads, 0, s>>>(a);
        } else {
            const dim3 grid(unsigned(n_head), unsigned((a.rows + kWarps - 1) / kWarps),
                            token_blocks);
            head_products_kernel<F><<<grid, kThreads, 0, s>>>(a);
        }
        STRATA_CUDA_LAUNCHED();
    });
    if (!took) std::abort();  // the backend checks linear_supports first: a bug
}

// ---- attention

constexpr int kRows = kGpuMlaRowsPerBlock;  // query rows of a block
constexpr int kTile = 32;                   // positions a tile

struct AttnArgs {
    const __half* cache;  // [slots][width]
    int width, rank, n_rot, n_head;
    float scale;
    HeadRows q_latent, q_rope, out;
    int64_t rows;  // n * n_head
    const int32_t* pos0;
    int64_t span;    // positions a split covers (a multiple of kTile)
    float* partial;  // split partials: [splits][rows] maxima, sums, then [splits][rows][rank]
    int splits;
};

// Shared memory: the block's queries (fp16, row stride width/2 + 1 words), a tile of cached rows
// (same stride), the tile's weights per query row.
size_t attn_smem_bytes(int width) {
    const size_t stride = size_t(width / 2 + 1) * 4;
    return stride * (kRows + kTile) + sizeof(float) * kRows * kTile;
}

// grid: (ceil(rows / kRows), splits); block: kThreads. Thread (r = tid / 16, c = tid % 16):
// scores of query row r against positions c and c + 16 of a tile; output columns (half2 pairs)
// c + 16 k of row r.
__global__ void __launch_bounds__(kThreads) mla_attention_kernel(AttnArgs a) {
    extern __shared__ unsigned smem_words[];
    const int stride = a.width / 2 + 1;  // words (half2) per row in shared memory
    __half2* qs = reinterpret_cast<__half2*>(smem_words);
    __half2* ks = qs + kRows * stride;
    float* ws = reinterpret_cast<float*>(ks + kTile * stride);
    const int tid = int(threadIdx.x), r = tid / 16, c = tid % 16;
    const int64_t row0 = int64_t(blockIdx.x) * kRows;
    const int split = int(blockIdx.y);
    const int64_t p_base = *a.pos0;

    // The block's query rows, rounded to fp16 as the CPU's F16 product rounds them.
    const int half_width = a.width / 2, half_rank = a.rank / 2;
    for (int e = tid; e < kRows * half_width; e += kThreads) {
        const int rr = e / half_width, i = e % half_width;
        const int64_t row = row0 + rr;
        float2 v = make_float2(0.0f, 0.0f);
        if (row < a.rows) {
            const int64_t t = row / a.n_head, h = row % a.n_head;
            const float* src =
                i < half_rank
                    ? a.q_latent.base + t * a.q_latent.token + h * a.q_latent.head + 2 * i
                    : a.q_rope.base + t * a.q_rope.token + h * a.q_rope.head + 2 * (i - half_rank);
            v = make_float2(src[0], src[1]);
        }
        qs[rr * stride + i] = __float22half2_rn(v);
    }
    // Each query row sees positions up to its token's; the block's last row sees the most.
    const int64_t my_row = row0 + r;
    const int64_t my_last = my_row < a.rows ? p_base + my_row / a.n_head : -1;
    const int64_t block_last =
        p_base + (std::min(row0 + kRows, a.rows) - 1) / a.n_head;  // inclusive
    const int64_t p_begin = int64_t(split) * a.span;
    const int64_t p_end = std::min(p_begin + a.span, block_last + 1);

    constexpr int kPairs = kMlaMaxRank / 32;
    float2 acc[kPairs];  // the thread's output pairs: rank / 32 of them
#pragma unroll
    for (int k = 0; k < kPairs; ++k) acc[k] = make_float2(0.0f, 0.0f);
    const int pairs = half_rank / 16;  // output pairs per thread
    float run_max = -INFINITY, run_sum = 0.0f;

    for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        __syncthreads();  // the last tile's rows and weights are used
        const int in_tile = int(std::min<int64_t>(kTile, p_end - p0));
        const unsigned* src = reinterpret_cast<const unsigned*>(a.cache + p0 * a.width);
        unsigned* dst = reinterpret_cast<unsigned*>(ks);
        for (int e = tid; e < kTile * half_width; e += kThreads) {
            const int j = e / half_width, i = e % half_width;
            dst[j * stride + i] = j < in_tile ? src[int64_t(j) * half_width + i] : 0u;
        }
        __syncthreads();
        // Scores.
        float s0 = 0.0f, s1 = 0.0f;
        const __half2* q = qs + r * stride;
        const __half2* k0 = ks + c * stride;
        const __half2* k1 = ks + (c + 16) * stride;
        for (int i = 0; i < half_width; ++i) {
            const float2 qv = __half22float2(q[i]);
            const float2 a0 = __half22float2(k0[i]), a1 = __half22float2(k1[i]);
            s0 = fmaf(qv.x, a0.x, fmaf(qv.y, a0.y, s0));
            s1 = fmaf(qv.x, a1.x, fmaf(qv.y, a1.y, s1));
        }
        const int64_t pa = p0 + c, pb = p0 + c + 16;
        s0 = pa <= my_last && c < in_tile ? s0 * a.scale : -INFINITY;
        s1 = pb <= my_last && c + 16 < in_tile ? s1 * a.scale : -INFINITY;
        // The row's 16 threads are lanes 0-15 or 16-31 of one warp: max and sum among them.
        float tile_max = fmaxf(s0, s1);
        for (int o = 8; o > 0; o >>= 1) {
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
        }
        const float new_max = fmaxf(run_max, tile_max);
        float w0 = 0.0f, w1 = 0.0f, corr = 1.0f;
        if (new_max != -INFINITY) {
            w0 = s0 == -INFINITY ? 0.0f : __expf(s0 - new_max);
            w1 = s1 == -INFINITY ? 0.0f : __expf(s1 - new_max);
            corr = run_max == -INFINITY ? 0.0f : __expf(run_max - new_max);
        }
        float tile_sum = w0 + w1;
        for (int o = 8; o > 0; o >>= 1) tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, o);
        run_sum = run_sum * corr + tile_sum;
        run_max = new_max;
        // The weights, rounded to fp16 as the CPU's value product takes them.
        ws[r * kTile + c] = __half2float(__float2half_rn(w0));
        ws[r * kTile + c + 16] = __half2float(__float2half_rn(w1));
        __syncwarp();
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            acc[k].x *= corr;
            acc[k].y *= corr;
        }
        for (int j = 0; j < in_tile; ++j) {
            const float wj = ws[r * kTile + j];
            if (wj == 0.0f) continue;
            const __half2* v = ks + j * stride;
#pragma unroll
            for (int k = 0; k < kPairs; ++k) {
                if (k >= pairs) break;
                const float2 vv = __half22float2(v[c + 16 * k]);
                acc[k].x = fmaf(wj, vv.x, acc[k].x);
                acc[k].y = fmaf(wj, vv.y, acc[k].y);
            }
        }
    }
    if (my_row >= a.rows) return;
    if (a.splits == 1) {
        const int64_t t = my_row / a.n_head, h = my_row % a.n_head;
        float* o = a.out.base + t * a.out.token + h * a.out.head;
        const float inv = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            if (k >= pairs) break;
            const int i = 2 * (c + 16 * k);
            o[i] = acc[k].x * inv;
            o[i + 1] = acc[k].y * inv;
        }
        return;
    }
    float* maxima = a.partial;
    float* sums = maxima + int64_t(a.splits) * a.rows;
    float* outs = sums + int64_t(a.splits) * a.rows;
    const int64_t slot = int64_t(split) * a.rows + my_row;
    if (c == 0) {
        maxima[slot] = run_max;
        sums[slot] = run_sum;
    }
    float* o = outs + slot * a.rank;
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
        if (k >= pairs) break;
        const int i = 2 * (c + 16 * k);
        o[i] = acc[k].x;
        o[i + 1] = acc[k].y;
    }
}

// grid: rows; block: kThreads over the row's values.
__global__ void mla_combine_kernel(AttnArgs a) {
    const int64_t row = blockIdx.x;
    const float* maxima = a.partial;
    const float* sums = maxima + int64_t(a.splits) * a.rows;
    const float* outs = sums + int64_t(a.splits) * a.rows;
    float m = -INFINITY;
    for (int sp = 0; sp < a.splits; ++sp) m = fmaxf(m, maxima[int64_t(sp) * a.rows + row]);
    float total = 0.0f;
    for (int sp = 0; sp < a.splits; ++sp) {
        const float ms = maxima[int64_t(sp) * a.rows + row];
        if (ms != -INFINITY) total += sums[int64_t(sp) * a.rows + row] * __expf(ms - m);
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const int64_t t = row / a.n_head, h = row % a.n_head;
    float* o = a.out.base + t * a.out.token + h * a.out.head;
    for (int i = int(threadIdx.x); i < a.rank; i += kThreads) {
        float v = 0.0f;
        for (int sp = 0; sp < a.splits; ++sp) {
            const float ms = maxima[int64_t(sp) * a.rows + row];
            if (ms == -INFINITY) continue;
            v += outs[(int64_t(sp) * a.rows + row) * a.rank + i] * __expf(ms - m);
        }
        o[i] = v * inv;
    }
}

int sm_count() {
    static const int count = [] {
        int device = 0, sms = 0;
        STRATA_CUDA(cudaGetDevice(&device));
        STRATA_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        return std::max(1, sms);
    }();
    return count;
}

}  // namespace

void rms_norm_strided(float* rows, int64_t n, int64_t cols, int64_t stride, const float* weight,
                      float eps, cudaStream_t s) {
    if (n <= 0) return;
    rms_norm_strided_kernel<<<unsigned(n), kThreads, 0, s>>>(rows, cols, stride, weight, eps);
    STRATA_CUDA_LAUNCHED();
}

void head_products(const TensorView& w, int64_t first, int64_t head_stride, int64_t rows,
                   int n_head, HeadRows x, HeadRows y, int64_t n, cudaStream_t s) {
    ProductArgs a{reinterpret_cast<const uint8_t*>(w.data),
                  w.row_bytes,
                  first,
                  head_stride,
                  rows,
                  int(w.ne[0]),
                  x,
                  y,
                  n};
    launch_products<false>(w, a, n_head, s);
}

void head_products_transposed(const TensorView& w, int64_t head_stride, int nope, int n_head,
                              HeadRows x, HeadRows y, int64_t n, cudaStream_t s) {
    ProductArgs a{reinterpret_cast<const uint8_t*>(w.data),
                  w.row_bytes,
                  0,
                  head_stride,
                  nope,
                  int(w.ne[0]),
                  x,
                  y,
                  n};
    launch_products<true>(w, a, n_head, s);
}

bool mla_shape_supported(int rank, int n_rot) {
    return rank > 0 && rank % 32 == 0 && rank <= kMlaMaxRank && n_rot >= 0 && n_rot % 2 == 0;
}

int64_t mla_scratch_floats(int rank) {
    return int64_t(2 * sm_count() * kRows) * (2 + int64_t(rank));
}

void mla_attention(const GpuKvCache& kv, int layer, const MlaAttentionShape& shape,
                   HeadRows q_latent, HeadRows q_rope, HeadRows out, int64_t n, const int32_t* pos0,
                   int64_t kv_bound, float* scratch, cudaStream_t s) {
    if (n <= 0) return;
    const GpuKvLayer& L = kv.layer(layer);
    AttnArgs a{};
    a.cache = reinterpret_cast<const __half*>(L.k.data);
    a.width = shape.rank + shape.n_rot;
    a.rank = shape.rank;
    a.n_rot = shape.n_rot;
    a.n_head = shape.n_head;
    a.scale = shape.scale;
    a.q_latent = q_latent;
    a.q_rope = q_rope;
    a.out = out;
    a.rows = n * shape.n_head;
    a.pos0 = pos0;
    a.partial = scratch;
    const int64_t row_blocks = (a.rows + kRows - 1) / kRows;
    const int64_t tiles = (std::max<int64_t>(kv_bound, 1) + kTile - 1) / kTile;
    // Splits fill the GPU twice over where the rows alone would not.
    int splits = 1;
    if (row_blocks < 2 * sm_count()) {
        splits = int(std::min<int64_t>({kMlaMaxSplits, tiles, 2 * sm_count() / row_blocks}));
        splits = std::max(splits, 1);
    }
    a.splits = splits;
    a.span = (tiles + splits - 1) / splits * kTile;
    const size_t smem = attn_smem_bytes(a.width);
    static int configured = 0;
    if (smem > size_t(configured)) {
        STRATA_CUDA(cudaFuncSetAttribute(mla_attention_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        configured = int(smem);
    }
    mla_attention_kernel<<<dim3(unsigned(row_blocks), unsigned(splits)), kThreads, smem, s>>>(a);
    STRATA_CUDA_LAUNCHED();
    if (splits > 1) {
        mla_combine_kernel<<<unsigned(a.rows), kThreads, 0, s>>>(a);
        STRATA_CUDA_LAUNCHED();
    }
}

}  // namespace strata::cuda
