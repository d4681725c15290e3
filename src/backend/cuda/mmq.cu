// mmq.h: which weights the int8 tensor-core GEMM takes, and its arguments from the quantized
// activations' scratch (matvec_q8.h's layout).
#include "backend/cuda/mmq.h"

#include "backend/cuda/format_traits.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/mmq_kernel.cuh"

namespace strata::cuda {

bool mmq_supports(TensorType t, int64_t cols) {
    const FormatInfo f = format_info(t);
    return f.mmq && cols > 0 && cols % f.block_elems == 0;
}

namespace {

// One thread per expert (a single block): its rows by binary search in the ascending ids, its
// tiles' place by a scan of the tile counts, then its tiles written; the rest marked unused.
constexpr int kTileThreads = 1024;

__global__ void __launch_bounds__(kTileThreads)
    make_tiles(const int32_t* __restrict__ ids, int slots, int n_expert, int max_tiles,
               int32_t* __restrict__ tiles) {
    __shared__ int counts[kTileThreads];
    const int e = int(threadIdx.x);
    const auto lower_bound = [&](int v) {
        int lo = 0, hi = slots;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (ids[mid] < v) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    };
    int first = 0, rows = 0;
    if (e < n_expert) {
        first = lower_bound(e);
        rows = lower_bound(e + 1) - first;
    }
    const int mine = (rows + mmq::kTileTokens - 1) / mmq::kTileTokens;
    counts[e] = mine;
    __syncthreads();
    for (int o = 1; o < kTileThreads; o *= 2) {  // inclusive scan (Hillis-Steele)
        const int v = e >= o ? counts[e - o] : 0;
        __syncthreads();
        counts[e] += v;
        __syncthreads();
    }
    const int start = counts[e] - mine, total = counts[kTileThreads - 1];
    for (int i = 0; i < mine; ++i) {
        const int r0 = i * mmq::kTileTokens;
        int32_t* t = tiles + 3 * (start + i);
        t[0] = e;
        t[1] = first + r0;
        t[2] = min(mmq::kTileTokens, rows - r0);
    }
    for (int i = total + e; i < max_tiles; i += kTileThreads) tiles[3 * i] = -1;
}

// The kernel arguments of weights w on `n` rows quantized into the scratch.
mmq::Args args_for(const WeightRows& w, int n, const float* bias, float* y, const void* scratch) {
    mmq::Args a;
    a.act = q8detail::scratch_view(matvec_q8_act_type(w.type), w.cols, n, scratch);
    a.w = w.data;
    a.stride = w.row_stride;
    a.rows = w.rows;
    a.cols = w.cols;
    a.n = n;
    a.bias = bias;
    a.y = y;
    return a;
}

void launch_args(TensorType t, const mmq::Args& a, cudaStream_t stream) {
    if (matvec_q8_act_type(t) == TensorType::Q8_K) {
        mmq::launch_k(t, a, stream);
    } else {
        mmq::launch_32(t, a, stream);
    }
}

}  // namespace

void launch_mmq(const WeightRows& w, int n, const float* bias, float* y, const void* scratch,
                cudaStream_t stream) {
    launch_args(w.type, args_for(w, n, bias, y, scratch), stream);
}

int mmq_max_tiles(int slots, int n_expert) {
    return (slots + mmq::kTileTokens - 1) / mmq::kTileTokens + n_expert;
}

void launch_mmq_tiles(const int32_t* ids, int slots, int n_expert, int32_t* tiles,
                      cudaStream_t stream) {
    make_tiles<<<1, kTileThreads, 0, stream>>>(ids, slots, n_expert, mmq_max_tiles(slots, n_expert),
                                               tiles);
    STRATA_CUDA_LAUNCHED();
}

void launch_mmq_grouped(const WeightRows& w, size_t expert_stride, const int32_t* tiles, int slots,
                        int n_expert, float* y, const void* scratch, cudaStream_t stream) {
    mmq::Args a = args_for(w, slots, nullptr, y, scratch);
    a.tiles = tiles;
    a.tile_count = mmq_max_tiles(slots, n_expert);
    a.expert_stride = expert_stride;
    launch_args(w.type, a, stream);
}

}  // namespace strata::cuda
