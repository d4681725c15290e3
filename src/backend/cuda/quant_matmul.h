// Products of quantized weights in GPU memory with float activations in GPU memory, for every
// weight type the CPU backend computes with (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4):
//   - decode (a few tokens): a fused dequantize-matvec that reads each weight byte once,
//     coalesced, with enough bytes in flight per SM to saturate HBM (matvec_kernels.cuh);
//   - prompt batches: cuBLAS GEMM (block-format weights dequantized to fp16 tiles, float weights
//     read in place); the int8 tensor-core GEMM (mmq.h) for routed experts grouped by expert,
//     and for Q4_0..Q8_0 / Q2_K..Q6_K where cuBLAS cannot be loaded (the matvec kernels for the
//     other types then);
//   - embedding rows: rows of a table of any of these types, dequantized to float.
// Results are checked against the quant module's reference dequantizer (tests/cuda/).
//
// Numerics: every product sees the activations the CPU backend sees (the reference the golden
// tests were made with): x is first rounded as quant::quantize_row_activations rounds it for the
// weight's quant::vec_dot_type (Q8_0 / Q8_1 / Q8_K codes and scales bit for bit; fp16 for F16,
// bf16 for BF16 weights; F32 weights take x as it is). Against the exact sum over the reference
// dequantizer's floats and those activations:
//   - decode: integer dot products of the weight codes with the CPU's int8 activation codes,
//     scaled and summed in fp32 (Q4_1 / Q5_1 take the CPU's fp16 Q8_1 sums for their minimum
//     term); float weights fp32 products (exact for F16 / BF16) and sums;
//   - prompt GEMM: F32 an fp32 GEMM (no TF32); F16 / BF16 exact products of the weights and the
//     rounded x, fp32 accumulation; block formats the dequantized weights and the rounded
//     activations each rounded to fp16 (2^-11 relative), fp32 accumulation, and the minimum
//     term of Q4_1 / Q5_1 with exact (not fp16) Q8_1 sums; activations beyond fp16's range, or
//     block-format weights beyond it, would overflow there;
//   - embed_rows: exactly quant::dequantize_row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "backend/cuda/matmul_kernels.h"
#include "backend/tuning.h"
#include "gguf/tensor_type.h"
#include "model/tensor_view.h"
#include "util/result.h"

namespace strata::cuda {

// True for the weight types linear() and embed_rows() accept (FormatTraits::kDequant).
bool linear_supports(TensorType t);

// State and scratch of the matrix products on one stream: the cuBLAS handle (bound to that
// stream) when the library could be loaded, fp16 staging for a dequantized weight and a batch of
// activations, and the decode matvec's quantized activations. Sized once; linear() never
// allocates. max_weight_elements sizes the fp16 staging (capped at 64 Mi elements): a larger
// weight is multiplied in tiles of rows. `tuning` (the backend's) says which GEMM prompt products
// take (prompt_cublas, prompt_mmq) and how the decode kernels launch (pdl, qkv_parts,
// q8_rows_per_warp).
class Matmul {
  public:
    static Result<std::unique_ptr<Matmul>> create(int64_t max_weight_elements, int64_t max_batch,
                                                  int64_t max_cols, cudaStream_t stream,
                                                  const Tuning& tuning);
    virtual ~Matmul() = default;

    // y[t][r] = sum_c W[r][c] x[t][c] (+ bias[r]) for t < n, r < w.rows(); x: n x w.ne[0]
    // floats, y: n x w.rows() floats, bias: w.rows() floats or null; all in device memory, the
    // weight too. Rows of y are w.rows() apart. Enqueued on the stream; returns at once (it can
    // be captured into a CUDA graph for n <= 8).
    // PRECONDITION (checked; the process stops when broken): linear_supports(w.type), n <=
    // max_batch, w.ne[0] <= max_cols and a whole number of blocks, rows w.row_bytes apart
    // (at least a row's bytes: rows may be padded), w.data and w.row_bytes multiples of the
    // block struct's alignment (2 bytes; 1 for MXFP4; 4 for F32); y overlaps neither x nor the
    // bias.
    virtual void linear(const TensorView& w, const float* bias, const float* x, float* y,
                        int64_t n) = 0;
    // Several products of the same input, as linear() each (same preconditions): a decode
    // batch quantizes x once for all weights that take the same activation type.
    struct Product {
        const TensorView* weight;
        const float* bias;  // may be null
        float* y;
    };
    // With `quantized` (not F32), the kernel ahead has already put x, quantized as that type,
    // into q8_scratch() (the norm does, elementwise.h Q8Rows): products that read that type
    // take it from there instead of quantizing x again.
    virtual void linear_many(std::span<const Product> products, const float* x, int64_t n,
                             TensorType quantized = TensorType::F32) = 0;
    // g = glu(x gate^T + gate_bias, x up^T + up_bias): n x gate.rows() floats (silu(g) * u
    // unless `glu` says otherwise; null biases add nothing); u (as large) is scratch. One token
    // with gate and up of one type reads both matrices in one pass and writes g directly.
    // `quantized` as for linear_many.
    // PRECONDITION: as linear()'s for each, gate and up of the same shape.
    virtual void swiglu(const TensorView& gate, const TensorView& up, const float* x, float* g,
                        float* u, int64_t n, TensorType quantized = TensorType::F32,
                        const float* gate_bias = nullptr, const float* up_bias = nullptr,
                        Glu glu = {}) = 0;
    // The activation type the int8 matvec quantizes x to for a product of w at n tokens (Q8_0,
    // Q8_1 or Q8_K), or F32 where another kernel takes the product; and the scratch it
    // quantizes into. A kernel that produces x can quantize it there itself.
    virtual TensorType q8_input_type(const TensorView& w, int64_t n) const = 0;
    virtual void* q8_scratch() = 0;
    // Routed experts chosen on the device, slot by slot (matvec_q8.h, launch_expert_ffn_q8):
    // for slot s < slots, e = ids[s], h[s] = glu(gate_e x_s + gb_e, up_e x_s + ub_e) and
    // y[s] = down_e h[s] + db_e (expert e's biases of `biases`, none where null; silu(g) * u
    // unless `glu` says otherwise); x_s is row s of x with x_per_slot, else row 0. The
    // activations' quantization goes to `scratch` (null: this object's, for up to
    // kMaxExpertsUsed slots). Returns false, having launched nothing, where the int8 matvec does
    // not take the experts' types (expert_ffn_supports).
    virtual bool expert_ffn(const ExpertStack& experts, const int32_t* ids, int slots,
                            const float* x, bool x_per_slot, float* h, float* y, void* scratch,
                            const ExpertBiases& biases = {}, Glu glu = {}) = 0;
    // The routed experts of a prompt on int8 tensor cores (mmq.h): slot u < slots (x's row u)
    // goes to expert ids[u], the ids ascending (group_slots_by_expert's order), each expert's
    // slots multiplied as one GEMM per matrix. h[u] = glu(gate_e x_u + gb_e, up_e x_u + ub_e)
    // (u: as large, scratch), y[u] = down_e h[u] + db_e, biases and glu as expert_ffn's; q8:
    // matvec_q8_scratch_bytes(max(gate.cols, down.cols), slots) bytes; tiles: 3 *
    // mmq_max_tiles(slots, n_expert) ints. Returns false, having launched nothing, where the GEMM
    // does not take the experts' types or shapes.
    virtual bool expert_ffn_grouped(const ExpertStack& experts, const int32_t* ids, int slots,
                                    const float* x, float* h, float* u, float* y, void* q8,
                                    int32_t* tiles, const ExpertBiases& biases = {},
                                    Glu glu = {}) = 0;
    // What prompt batches multiply with: "cublas" or "matvec" (cuBLAS could not be loaded, or
    // Tuning::prompt_cublas is false).
    virtual std::string_view gemm_engine() const = 0;
    // Device bytes this object holds (the plan counts them).
    virtual uint64_t scratch_bytes() const = 0;
};

// True when Matmul::expert_ffn takes these experts (checked before recording it).
bool expert_ffn_supports(const ExpertStack& experts);

// out[t] = the row ids[t] of `table`, dequantized to float (n rows of table.ne[0]); ids in
// device memory; an id outside [0, table.rows()) gives a row of zeros. The floats are exactly
// quant::dequantize_row's. PRECONDITION: as linear()'s for the table.
void embed_rows(const TensorView& table, const int32_t* ids, int64_t n, float* out,
                cudaStream_t stream);

}  // namespace strata::cuda
