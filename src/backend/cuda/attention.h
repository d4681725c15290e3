// Causal grouped-query attention over the GPU KV cache (kv_cache_gpu.h), for decode and prompt
// batches alike.
//
// One kernel design does both: a block takes a "row group" (R query rows that share one KV head: up
// to R/hb tokens times hb of the heads that share that KV head) and a range of cached positions,
// streams the range's keys and values through shared memory in tiles (cp.async, two stages, so
// the next tile loads while this one is used), and keeps an online softmax per row. Every key
// and value a block loads serves all R rows, which is how the query heads of a GQA group share
// their KV reads.
//   - Decode (n = 1, R = the group's head count rounded up to a power of two): there are only
//     n_head_kv row groups, so the positions are split over blocks (flash-decoding) until the
//     grid fills the GPU; each block writes a partial max, sum and accumulator, and a second
//     kernel combines them. The split count comes from the host-known bound on the context,
//     the split ranges from the true length read on the device (*pos0), so a captured graph
//     replays at any position and surplus blocks exit at once.
//   - Prompt batches (R = 32: several tokens per block): enough row groups to fill the GPU,
//     usually no split, and each block writes its normalised rows directly.
// Arithmetic (fp32 CUDA cores): F16 caches take the query rounded to fp16, as the reference
// engine does, and dot it with fp16 keys in fp32; Q8_0 caches quantize the query to Q8_0 as the
// reference's CPU matmul does (127/amax, round half to even) and take integer dot products
// (dp4a) scaled by the two block scales. Softmax and the value sum are fp32.
// Prompt batches over an F16 cache with head size 64 or 128 take a tensor-core kernel instead
// (attention_mma.cuh: 64 rows per block, mma.sync for both products, weights rounded to fp16 as
// the reference's CPU path rounds them).
#pragma once

#include <array>
#include <cstdint>

#include "backend/cuda/kv_cache_gpu.h"
#include "backend/tuning.h"
#include "gpu/gpu.h"
#include "model/hparams.h"
#include "util/result.h"

// cudaStream_t as the CUDA runtime declares it (driver_types.h), so code built without the CUDA
// include path (the tests) can include this header.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace strata::cuda {

class GpuAttention {
  public:
    // Sizes the split partials for every batch up to max_batch and context up to n_ctx, for both
    // cache types. Errors: head sizes the kernels do not take (multiples of 8 up to 256), query
    // heads that are not a multiple of the KV heads, a GPU that cannot be queried, too little
    // GPU memory.
    // run() launches as `pdl` says (the backend's Tuning::pdl; pdl.cuh).
    static Result<GpuAttention> create(const ModelHparams& hp, uint32_t n_ctx, uint32_t max_batch,
                                       Pdl pdl);

    // Device bytes held (the split partials).
    uint64_t scratch_bytes() const { return scratch_.size(); }

    // out = causal attention of the n query rows q (n_head * head_dim_k floats each, token t at
    // position *pos0 + t, already rotated, keys and values already stored) over the layer's
    // cached positions 0 .. *pos0 + t (a sliding-window layer: the last `window` of them,
    // GpuKvLayer), with `scale` applied to q.k; n rows of n_head * head_dim_v floats. With
    // `sinks` (n_head floats), head h's softmax has one more term in its sum, exp(sinks[h]),
    // that weighs no value (gpt-oss' attention sinks). q, out, pos0, sinks: device memory.
    // kv_bound: a host-known bound on *pos0 + n (n_ctx in a captured decode graph), used only
    // to size the grid.
    // PRECONDITION: the layer is held; head sizes as at create; n_head % n_head_kv == 0;
    //               n <= max_batch; *pos0 + n <= kv_bound <= kv.n_ctx(); a windowed layer's
    //               ring holds window + n - 1 positions or more.
    void run(const GpuKvCache& kv, int layer, int n_head, int n_head_kv, int head_dim_k,
             int head_dim_v, float scale, const float* q, int64_t n, const int32_t* pos0,
             int64_t kv_bound, float* out, cudaStream_t s, const float* sinks = nullptr);

    // How run() would launch (for tests and benchmarks): rows per block, tokens per block, the
    // tile of positions, and the most blocks one row group's positions are split over.
    struct LaunchShape {
        int rows = 0, heads_per_block = 0, tokens_per_block = 0, tile = 0, max_splits = 1;
        size_t smem = 0;
        bool tensor_cores = false;  // the mma.sync kernel (F16 prompt batches, head size 64/128)
    };
    // `tensor_cores`: whether the mma.sync kernel may be chosen (run() declines it for heads with
    // sinks, below).
    LaunchShape launch_shape(KvType type, int n_head, int n_head_kv, int head_dim_k, int head_dim_v,
                             int64_t n, int64_t kv_bound, bool tensor_cores = true) const;

  private:
    // Per (cache type, rows per block) at the model's head sizes: the position tile, shared
    // memory, and how many blocks fit on an SM.
    struct KernelFit {
        int tile = 0;
        size_t smem = 0;
        int blocks_per_sm = 0;
    };
    static constexpr int kRowChoices = 6;  // 1, 2, 4, 8, 16, 32 rows per block
    KernelFit fit(bool q8, int row_index, int head_dim_k, int head_dim_v) const;

    int sms_ = 1;
    size_t smem_optin_ = 48 << 10;
    int hd_k_ = 0, hd_v_ = 0;
    Pdl pdl_ = Pdl::AtEnd;
    std::array<std::array<KernelFit, kRowChoices>, 2> fits_{};  // at the model's head sizes
    std::array<KernelFit, 2> mma_fits_{};                       // head size 64, 128
    uint64_t scratch_floats_ = 0;
    gpu::DeviceBuffer scratch_;
};

}  // namespace strata::cuda
