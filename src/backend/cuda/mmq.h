// Prompt products on int8 tensor cores (mma.sync s8 x s8 -> s32): the weight's codes times the
// activations quantized exactly as the CPU backend quantizes them (matvec_q8.h's quantizer:
// Q8_0 / Q8_1 / Q8_K codes for the weight's quant::vec_dot_type), in integers, with the block
// and sub-block scales applied as ggml's vec_dot_<type>_q8_<x> functions apply them. So a batch
// of tokens gets the CPU backend's result up to the fp32 summation order, as the decode matvec
// does, and no weight is ever widened to fp16.
//
// Layout of the work: a thread block computes a tile of 64 weight rows x 64 tokens, stepping
// over the columns 256 at a time (a row's last step may hold fewer 32-element blocks: gpt-oss's
// 2880 columns are 11 steps and a quarter). Each step's raw weight blocks come into shared memory
// with cp.async (overlapping the previous step's products), are unpacked there into signed int8
// codes and integer sub-block scales (mmq_formats.cuh), and four warps multiply 32 x 32 sub-tiles.
// K-quants multiply each sub-block separately and weight it by its integer scale, summing a
// 256-column block in int32 exactly as the CPU does; their minimum terms (Q2_K, Q4_K, Q5_K) are
// one more small integer product of the sub-block minimums with the activations' block sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_kernels.h"
#include "gguf/tensor_type.h"

namespace strata::cuda {

// True when launch_mmq takes weights of type t with `cols` columns (FormatTraits::kMmq:
// Q4_0..Q8_0, IQ4_NL, MXFP4 and Q2_K..Q6_K; cols whole blocks of the type).
bool mmq_supports(TensorType t, int64_t cols);

// y[t * w.rows + r] = W[r] . x[t] (+ bias[r] when bias is not null) for t < n, r < w.rows, where
// the scratch holds x (n tokens) quantized for w.type by launch_quantize_for (matvec_q8.h).
// Enqueued on `stream`; returns at once.
// PRECONDITION: mmq_supports(w.type, w.cols), n >= 1, w as WeightRows says (data and row_stride
// even), the scratch laid out for n tokens of w.cols columns (matvec_q8_scratch_bytes(cols, n)
// bytes), y not overlapping the scratch.
void launch_mmq(const WeightRows& w, int n, const float* bias, float* y, const void* scratch,
                cudaStream_t stream);

// Routed experts of a prompt, grouped (moe_route.h, group_slots_by_expert): row u of the
// activations (quantized into the scratch, `slots` rows) belongs to expert ids[u], the ids
// ascending. launch_mmq_tiles cuts each expert's rows into tiles of at most 64 (at most
// mmq_max_tiles entries of 3 ints, unused ones marked); launch_mmq_grouped then computes
// y[u * w.rows + r] = W_ids[u][r] . x[u] for every u < slots, where expert e's matrix lies
// e * expert_stride bytes after w's. Both enqueued on `stream`.
// PRECONDITION: ids device memory, 0 <= ids[u] < n_expert <= 1024, ascending; tiles holds
// 3 * mmq_max_tiles(slots, n_expert) ints; as launch_mmq for each expert's matrix.
int mmq_max_tiles(int slots, int n_expert);
void launch_mmq_tiles(const int32_t* ids, int slots, int n_expert, int32_t* tiles,
                      cudaStream_t stream);
void launch_mmq_grouped(const WeightRows& w, size_t expert_stride, const int32_t* tiles, int slots,
                        int n_expert, float* y, const void* scratch, cudaStream_t stream);

}  // namespace strata::cuda
