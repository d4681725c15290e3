// Decode matvec on int8 activations: x is quantized the way the reference engine's CPU backend
// quantizes it (quant::quantize_row_activations of quant::vec_dot_type(weight type)), and every
// weight block is dotted with those codes in integers (dp4a), the block scales applied in fp32
// as ggml's vec_dot_<type>_q8_<x> functions do. So the result differs from the CPU backend's
// only in the fp32 summation order.
//
// Built for batch-1 bandwidth: weights go straight from HBM into registers with 16-byte loads
// (no shared-memory staging), a warp per row (or two rows), several loads in flight per thread;
// the activation codes (reused by every row) come through L1. See matvec_q8_kernel.cuh.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cuda/matmul_kernels.h"
#include "backend/tuning.h"
#include "gguf/tensor_type.h"

namespace strata::cuda {

// The most tokens one launch_matvec_q8 takes.
inline constexpr int kMaxQ8Tokens = 4;

// True when launch_matvec_q8 handles weights of type t (FormatTraits::kQ8Matvec).
bool matvec_q8_supports(TensorType t);

// Device bytes of the quantized-activation scratch for rows of up to max_cols columns and up to
// max_tokens tokens (at least kMaxQ8Tokens).
size_t matvec_q8_scratch_bytes(int64_t max_cols, int max_tokens = kMaxQ8Tokens);

// y[t * w.rows + r] = W[r] . x[t] (+ bias[r] when bias is not null) for t < n, r < w.rows.
// x: n x w.cols floats; every pointer is device memory; enqueued on `stream`, returns at once.
// Every launcher here launches as `tuning` says (the backend's: its pdl and q8_rows_per_warp).
// PRECONDITION: matvec_q8_supports(w.type), 1 <= n <= kMaxQ8Tokens, w as WeightRows says
// (data and row_stride even), scratch holds matvec_q8_scratch_bytes(c) bytes for some
// c >= w.cols and is 16-byte aligned, x 16-byte aligned, y not overlapping x or scratch.
void launch_matvec_q8(const WeightRows& w, const float* x, int n, const float* bias, float* y,
                      void* scratch, cudaStream_t stream, const Tuning& tuning);

// The split form of launch_matvec_q8, so that products of one input share its quantization:
// launch_quantize_for puts x, quantized for weights of type `weight`, into the scratch; then any
// number of launch_matvec_q8_quantized / launch_swiglu_q8 calls on weights whose
// matvec_q8_act_type is the same read it, until the scratch is written again.
// The activation type weights of type t are dotted with (Q8_0, Q8_1 or Q8_K; F32 when
// unsupported).
TensorType matvec_q8_act_type(TensorType t);
// PRECONDITION: matvec_q8_supports(weight), 1 <= n <= kMaxQ8Tokens, cols a multiple of 256 for
// the K-quants (32 otherwise), x and scratch 16-byte aligned.
void launch_quantize_for(TensorType weight, const float* x, int n, int64_t cols, void* scratch,
                         cudaStream_t stream, Pdl pdl);
// launch_matvec_q8 without its first kernel: the scratch holds x quantized for w.type.
void launch_matvec_q8_quantized(const WeightRows& w, int n, const float* bias, float* y,
                                const void* scratch, cudaStream_t stream, const Tuning& tuning);
// launch_matvec_q8_quantized of up to kMaxQ8Parts matrices of one type and width (a layer's q,
// k and v) in one launch: part i writes ys[i] (bias biases[i], may be null), each row's result
// bit for bit what its own launch gives (Tuning::qkv_parts false: the caller launches each
// alone instead, for comparisons).
// PRECONDITION: as launch_matvec_q8_quantized's for each; spans of one size, 2..kMaxQ8Parts.
inline constexpr int kMaxQ8Parts = 3;
void launch_matvec_q8_parts(std::span<const WeightRows> w, int n,
                            std::span<const float* const> biases, std::span<float* const> ys,
                            const void* scratch, cudaStream_t stream, const Tuning& tuning);
// y[r] = glu(gate[r] . x + gate_bias[r], up[r] . x + up_bias[r]) for one token (silu(g) * u by
// default; a null bias adds nothing), in one pass over both matrices; the scratch holds x
// quantized for gate.type. PRECONDITION: gate and up of the same type and shape.
void launch_swiglu_q8(const WeightRows& gate, const WeightRows& up, float* y, const void* scratch,
                      cudaStream_t stream, const Tuning& tuning, const float* gate_bias = nullptr,
                      const float* up_bias = nullptr, Glu glu = {});

// Routed experts chosen on the device, slot by slot: for slot s < slots and e = ids[s] (device
// memory), h[s] = glu(gate_e . x_s + gb_e, up_e . x_s + ub_e) (h: slots rows of gate.rows
// floats), then y[s] = down_e . h[s] + db_e (y: slots rows of down.rows floats), with expert e's
// biases from `biases` (none where null) and silu(g) * u unless `glu` says otherwise. x_s is row s
// of x with x_per_slot, else row 0 (one token's k choices). gate, up and down are expert 0's
// matrices, expert e's lie e strides further. Four launches however many slots. PRECONDITION: gate
// and up of one type and shape, matvec_q8_supports of it and of down's type; scratch of
// matvec_q8_scratch_bytes(max(gate.cols, down.cols), slots) bytes at least; x, h and scratch
// 16-byte aligned; ids valid expert numbers; slots <= 65535.
void launch_expert_ffn_q8(const WeightRows& gate, size_t gate_stride, const WeightRows& up,
                          size_t up_stride, const WeightRows& down, size_t down_stride,
                          const int32_t* ids, int slots, const float* x, bool x_per_slot, float* h,
                          float* y, void* scratch, cudaStream_t stream, const Tuning& tuning,
                          const ExpertBiases& biases = {}, Glu glu = {});

namespace q8detail {

// Where the quantized activations of n tokens of `cols` columns lie in the scratch (byte
// offsets from its base). Codes: int8, token t at codes + t * cols. For Q8_0 / Q8_1 (blocks of
// 32): a float2 per block, token-major: .x = d as stored (the fp16 value), .y = the code sum
// (Q8_0, exact) or s as stored (Q8_1, the fp16 of d * sum). For Q8_K (blocks of 256): a float d
// per block and an int16 sum per 16 codes (bsums), token-major.
struct ScratchLayout {
    size_t codes = 0;
    size_t scales = 0;  // float2 (Q8_0, Q8_1) or float (Q8_K)
    size_t bsums = 0;   // int16, Q8_K only
    size_t end = 0;
};
ScratchLayout scratch_layout(TensorType act_type, int64_t cols, int n);
// The same places as typed pointers into a scratch at `scratch` (ds and d share one place: the
// activation type says which it is).
struct ScratchView {
    const int8_t* codes;
    const float2* ds;
    const float* d;
    const int16_t* bsums;
};
ScratchView scratch_view(TensorType act_type, int64_t cols, int n, const void* scratch);

// The first kernel of launch_matvec_q8 alone: quantizes n rows of x into the scratch as
// act_type (Q8_0, Q8_1 or Q8_K). For tests, which compare the result with the CPU's bytes.
void launch_quantize_activations(TensorType act_type, const float* x, int n, int64_t cols,
                                 void* scratch, cudaStream_t stream, Pdl pdl);

}  // namespace q8detail

}  // namespace strata::cuda
