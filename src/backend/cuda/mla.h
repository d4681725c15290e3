// Multi-head latent attention (deepseek2) on the GPU: the arithmetic of cpu/mla_attention.h and
// the CPU backend's mla_latent_norms / mla_attention, in its absorbed form for prompts and decode
// alike. A layer's cache holds one row per position, [latent | rotary key] (GpuKvLayer::k, one
// "head" of rank + n_rot values, no value plane); every query head attends over those rows as
// multi-query attention whose values are the rows' latent parts.
//
// Rows of the query and output buffers are token-major (row t * n_head + h is head h of token
// t), as the backend's activations are; the per-head products take strides, so nothing is
// copied between layouts.
#pragma once

#include <cstdint>

#include "backend/cuda/kv_cache_gpu.h"
#include "model/tensor_view.h"

// cudaStream_t as the CUDA runtime declares it (driver_types.h), so code built without the CUDA
// include path (the tests) can include this header.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace strata::cuda {

// In place, each of n rows (`stride` floats apart): its first `cols` values RMS-normed with
// `weight` (cols floats) and eps, as cpu::rms_norm_row (squares summed in double).
void rms_norm_strided(float* rows, int64_t n, int64_t cols, int64_t stride, const float* weight,
                      float eps, cudaStream_t s);

// Strides of one side of a per-head product: head h of token t at base + t * token + h * head.
struct HeadRows {
    float* base = nullptr;
    int64_t token = 0, head = 0;
};

// Per head h < n_head and token t < n: y(h, t)[r] = sum_c W_h[r][c] x(h, t)[c] for r < rows,
// where W_h is rows [first + h * head_stride, ... + rows) of w (w.ne[0] columns = x's values).
// Any weight type linear() takes; weights dequantized exactly (quant::dequantize_row's floats),
// x as it is, fp32 sums.
void head_products(const TensorView& w, int64_t first, int64_t head_stride, int64_t rows,
                   int n_head, HeadRows x, HeadRows y, int64_t n, cudaStream_t s);

// The transposed product of attn_kv_b's key rows (the earlier files): per head and token,
// y(h, t)[c] = sum_{r < nope} W_h[r][c] x(h, t)[r] for c < w.ne[0], W_h the rows
// [h * head_stride, + nope) of w.
void head_products_transposed(const TensorView& w, int64_t head_stride, int nope, int n_head,
                              HeadRows x, HeadRows y, int64_t n, cudaStream_t s);

// The latent sizes the attention kernel takes: rank a multiple of 32 up to kMlaMaxRank, n_rot
// even.
inline constexpr int kMlaMaxRank = 512;
bool mla_shape_supported(int rank, int n_rot);

struct MlaAttentionShape {
    int n_head = 0;
    int rank = 0;   // the latent's values (the rows' first), also each output row's
    int n_rot = 0;  // the rotary key's values after them
    float scale = 1.0f;
};

// Split partials: the most position ranges one row's attention is split over, and the scratch
// they take (splits are made only while splits x query rows stay within twice the GPU's
// multiprocessors times a block's rows, so the scratch does not grow with the batch).
inline constexpr int kMlaMaxSplits = 32;
int64_t mla_scratch_floats(int rank);

// out(h, t) = sum_p softmax_p(scale * q'(h, t) . row_p) latent_p over the layer's rows at
// positions 0 .. *pos0 + t, for n tokens, with q'(h, t) = [q_latent(h, t) | q_rope(h, t)]
// (rank and n_rot floats at their HeadRows). With the F16 cache: the query rounded to fp16 for
// the scores, the weights rounded to fp16 for the sum, as the CPU; the Q8_0 cache is not taken
// (GpuKvCache refuses it). scratch: mla_scratch_floats(rank) floats. kv_bound: a
// host-known bound on *pos0 + n, which sizes the grid.
void mla_attention(const GpuKvCache& kv, int layer, const MlaAttentionShape& shape,
                   HeadRows q_latent, HeadRows q_rope, HeadRows out, int64_t n, const int32_t* pos0,
                   int64_t kv_bound, float* scratch, cudaStream_t s);

}  // namespace strata::cuda
