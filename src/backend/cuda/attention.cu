// GpuAttention: choosing the launch (rows per block, position tile, splits) and sizing the
// split partials. The kernels are in attention_kernels.cuh.
#include "backend/cuda/attention.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "backend/cuda/attention_kernels.cuh"
#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/cuda_check.h"

namespace strata::cuda {

namespace {

using attn::Args;
using attn::kMaxSplits;
using attn::kThreads;
using attn::Smem;

using AttendKernel = void (*)(Args);

// [q8][log2(rows per block)]
constexpr AttendKernel kAttendKernels[2][6] = {
    {attn::attend_kernel<false, 1>, attn::attend_kernel<false, 2>, attn::attend_kernel<false, 4>,
     attn::attend_kernel<false, 8>, attn::attend_kernel<false, 16>, attn::attend_kernel<false, 32>},
    {attn::attend_kernel<true, 1>, attn::attend_kernel<true, 2>, attn::attend_kernel<true, 4>,
     attn::attend_kernel<true, 8>, attn::attend_kernel<true, 16>, attn::attend_kernel<true, 32>},
};

constexpr int kMaxRows = 32;

// [0]: head size 64, [1]: 128
constexpr AttendKernel kMmaKernels[2] = {attn::attend_mma_kernel<64>, attn::attend_mma_kernel<128>};

// The tensor-core kernel's head sizes; -1 when it does not take these.
int mma_index(int head_dim_k, int head_dim_v) {
    if (head_dim_k != head_dim_v) return -1;
    return head_dim_k == 64 ? 0 : head_dim_k == 128 ? 1 : -1;
}

Result<void> check_head_dim(const char* what, uint32_t d) {
    if (d == 0 || d % 8 != 0 || d > uint32_t(kGpuMaxHeadDim)) {
        return err("GPU attention needs ", what, " sizes that are multiples of 8 up to ",
                   std::to_string(kGpuMaxHeadDim), "; this model's is ", std::to_string(d));
    }
    return {};
}

int log2_rows(int rows) {
    int i = 0;
    while ((1 << i) < rows) ++i;
    return i;
}

}  // namespace

GpuAttention::KernelFit GpuAttention::fit(bool q8, int row_index, int head_dim_k,
                                          int head_dim_v) const {
    const int rows = 1 << row_index;
    KernelFit f;
    // The largest tile that leaves room for two blocks per SM; else the largest that fits.
    for (int tile : {64, 32, 16}) {
        const size_t smem = size_t(Smem(q8, rows, tile, head_dim_k, head_dim_v).total);
        if (smem <= smem_optin_ && f.tile == 0) {
            f.tile = tile;
            f.smem = smem;
        }
        if (smem <= smem_optin_ / 2) {
            f.tile = tile;
            f.smem = smem;
            break;
        }
    }
    if (f.tile == 0) {
        // create() checked that every kernel fits at the model's head sizes.
        std::fprintf(stderr, "strata: GPU attention: no tile fits head sizes %d/%d\n", head_dim_k,
                     head_dim_v);
        std::abort();
    }
    int blocks = 0;
    STRATA_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, kAttendKernels[q8 ? 1 : 0][row_index], kThreads, f.smem));
    f.blocks_per_sm = std::max(1, blocks);
    return f;
}

Result<GpuAttention> GpuAttention::create(const ModelHparams& hp, uint32_t n_ctx,
                                          uint32_t max_batch, Pdl pdl) {
    STRATA_TRY(check_head_dim("key head", hp.head_dim_k));
    STRATA_TRY(check_head_dim("value head", hp.head_dim_v));
    std::set<std::pair<int, int>> shapes;  // (n_head, n_head_kv) of the layers
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const uint32_t h = hp.n_head_at(l), kv = hp.n_head_kv_at(l);
        if (kv == 0 || h % kv != 0) {
            return err("GPU attention: layer ", std::to_string(l), " has ", std::to_string(h),
                       " query heads for ", std::to_string(kv), " KV heads (not a multiple)");
        }
        shapes.insert({int(h), int(kv)});
    }
    GpuAttention g;
    int device = 0, optin = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&g.sms_, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
        cudaGetLastError();
        return err("GPU attention: cannot query the GPU's multiprocessors");
    }
    g.smem_optin_ = size_t(optin);
    g.pdl_ = pdl;
    g.hd_k_ = int(hp.head_dim_k);
    g.hd_v_ = int(hp.head_dim_v);
    for (int q8 = 0; q8 < 2; ++q8) {
        for (int ri = 0; ri < kRowChoices; ++ri) {
            const size_t smallest = size_t(Smem(q8 != 0, 1 << ri, 16, g.hd_k_, g.hd_v_).total);
            if (smallest > g.smem_optin_) {
                return err("GPU attention: head sizes ", std::to_string(g.hd_k_), "/",
                           std::to_string(g.hd_v_), " need ", std::to_string(smallest),
                           " bytes of shared memory; this GPU has ", std::to_string(optin));
            }
            STRATA_CUDA(cudaFuncSetAttribute(kAttendKernels[q8][ri],
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
            g.fits_[size_t(q8)][size_t(ri)] = g.fit(q8 != 0, ri, g.hd_k_, g.hd_v_);
        }
    }
    for (int i = 0; i < 2; ++i) {
        const int hd = i == 0 ? 64 : 128;
        KernelFit& f = g.mma_fits_[size_t(i)];
        f.tile = attn::kMmaTile;
        f.smem = size_t(attn::mma_smem_bytes(hd));
        if (f.smem > g.smem_optin_) continue;  // (sm_80 and later have room: never)
        STRATA_CUDA(cudaFuncSetAttribute(kMmaKernels[i],
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
        int blocks = 0;
        STRATA_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kMmaKernels[i], kThreads,
                                                                  f.smem));
        f.blocks_per_sm = std::max(1, blocks);
    }
    // The partials of the largest split launch any batch up to max_batch can make.
    g.scratch_floats_ = ~uint64_t(0);
    uint64_t need = 0;
    for (const auto& [h, kv] : shapes) {
        for (KvType type : {KvType::F16, KvType::Q8_0}) {
            for (int64_t n = 1; n <= int64_t(max_batch); ++n) {
                for (bool tensor_cores : {true, false}) {
                    const LaunchShape ls =
                        g.launch_shape(type, h, kv, g.hd_k_, g.hd_v_, n, n_ctx, tensor_cores);
                    if (ls.max_splits > 1) {
                        need = std::max(need, uint64_t(n) * uint64_t(h) * uint64_t(ls.max_splits) *
                                                  uint64_t(g.hd_v_ + 2));
                    }
                }
            }
        }
    }
    g.scratch_floats_ = need;
    if (need > 0) {
        auto buf = gpu::DeviceBuffer::allocate(need * sizeof(float));
        if (!buf) return err("GPU attention scratch: ", buf.error().message);
        g.scratch_ = std::move(*buf);
    }
    // (nvcc's front end does not apply C++20's implicit move to a converting return)
    return Result<GpuAttention>(std::move(g));
}

GpuAttention::LaunchShape GpuAttention::launch_shape(KvType type, int n_head, int n_head_kv,
                                                     int head_dim_k, int head_dim_v, int64_t n,
                                                     int64_t kv_bound, bool tensor_cores) const {
    const bool q8 = type == KvType::Q8_0;
    const int group = n_head / n_head_kv;
    LaunchShape ls;
    // The tensor-core kernel for batches of several tokens that fill half its 64 rows or more.
    const int mi = mma_index(head_dim_k, head_dim_v);
    const int mma_heads = std::min(group, attn::kMmaRows);
    ls.tensor_cores = tensor_cores && !q8 && mi >= 0 && n > 1 &&
                      int64_t(mma_heads) * n >= attn::kMmaRows / 2 &&
                      mma_fits_[size_t(std::max(mi, 0))].blocks_per_sm > 0;
    KernelFit f;
    if (ls.tensor_cores) {
        ls.rows = attn::kMmaRows;
        ls.heads_per_block = mma_heads;
        ls.tokens_per_block = ls.rows / mma_heads;
        f = mma_fits_[size_t(mi)];
    } else {
        // Rows per block: the group's heads (at most 32) times as many tokens as fit in 32
        // rows, rounded up to a power of two (decode: just the group).
        ls.heads_per_block = std::min(group, kMaxRows);
        const int64_t want = std::min<int64_t>(int64_t(ls.heads_per_block) * n, kMaxRows);
        ls.rows = 1;
        while (ls.rows < want) ls.rows *= 2;
        ls.tokens_per_block = ls.rows / ls.heads_per_block;
        const int ri = log2_rows(ls.rows);
        f = head_dim_k == hd_k_ && head_dim_v == hd_v_ ? fits_[q8 ? 1 : 0][size_t(ri)]
                                                       : fit(q8, ri, head_dim_k, head_dim_v);
    }
    ls.tile = f.tile;
    ls.smem = f.smem;
    // Split the positions until the grid fills every SM once (a second, partial wave would
    // take as long as the first).
    const int64_t chunks = (group + ls.heads_per_block - 1) / ls.heads_per_block;
    const int64_t groups = (n + ls.tokens_per_block - 1) / ls.tokens_per_block;
    const int64_t base = groups * n_head_kv * chunks;
    const int64_t slots = int64_t(sms_) * f.blocks_per_sm;
    int64_t splits = base >= slots ? 1 : slots / base;
    splits = std::min<int64_t>(splits, kMaxSplits);
    splits = std::min<int64_t>(splits, (kv_bound + ls.tile - 1) / ls.tile);
    // Never more partials than the scratch holds (create sized it for every launch it allows).
    const uint64_t per_split = uint64_t(n) * uint64_t(n_head) * uint64_t(head_dim_v + 2);
    splits = std::min<int64_t>(splits, int64_t(scratch_floats_ / per_split));
    ls.max_splits = int(std::max<int64_t>(splits, 1));
    if (ls.max_splits < 2) ls.max_splits = 1;
    return ls;
}

void GpuAttention::run(const GpuKvCache& kv, int layer, int n_head, int n_head_kv, int head_dim_k,
                       int head_dim_v, float scale, const float* q, int64_t n, const int32_t* pos0,
                       int64_t kv_bound, float* out, cudaStream_t s, const float* sinks) {
    if (n <= 0) return;
    const GpuKvLayer& L = kv.layer(layer);
    const bool q8 = kv.type() == KvType::Q8_0;
    // A row group sees at most window + its tokens - 1 positions of a windowed layer.
    const int64_t span = L.window > 0 ? std::min<int64_t>(kv_bound, L.window + n - 1) : kv_bound;
    // Heads with sinks (gpt-oss) take the kernels that keep the query in fp32: on the tensor-core
    // kernel, whose query is rounded to fp16, tiny-gpt-oss's logits differed from the CPU's by up
    // to 7% (Q8_0 weights, F16 cache) where the fp32-query kernel's differed by 0.8% (Q8_0 cache).
    const LaunchShape ls = launch_shape(kv.type(), n_head, n_head_kv, head_dim_k, head_dim_v, n,
                                        span, sinks == nullptr);
    Args a{};
    a.k = L.k;
    a.v = L.v;
    a.slots = L.slots;
    a.window = L.window;
    a.sinks = sinks;
    a.n_head = n_head;
    a.group = n_head / n_head_kv;
    a.hd_k = head_dim_k;
    a.hd_v = head_dim_v;
    a.scale = scale;
    a.q = q;
    a.n = int(n);
    a.pos0 = pos0;
    a.hb = ls.heads_per_block;
    a.bq = ls.tokens_per_block;
    a.head_chunks = (a.group + a.hb - 1) / a.hb;
    a.tile = ls.tile;
    a.max_splits = ls.max_splits;
    a.out = out;
    if (ls.max_splits > 1) {
        a.part = reinterpret_cast<float*>(scratch_.data());
        a.ml = a.part + size_t(n) * size_t(n_head) * size_t(ls.max_splits) * size_t(head_dim_v);
    }
    const dim3 grid(unsigned(ls.max_splits), unsigned(n_head_kv * a.head_chunks),
                    unsigned((n + a.bq - 1) / a.bq));
    const AttendKernel kernel = ls.tensor_cores ? kMmaKernels[mma_index(head_dim_k, head_dim_v)]
                                                : kAttendKernels[q8 ? 1 : 0][log2_rows(ls.rows)];
    launch_pdl(pdl_, kernel, grid, dim3(kThreads), ls.smem, s, a);
    if (ls.max_splits > 1) {
        launch_pdl(pdl_, attn::combine_kernel, dim3(unsigned(n_head), unsigned(n)), dim3(kThreads),
                   0, s, a);
    }
}

}  // namespace strata::cuda
