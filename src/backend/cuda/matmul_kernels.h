// Launchers of the quantized-matrix kernels (matvec.cpp, dequant.cu), for quant_matmul.cpp. Every
// pointer is device memory; every launch is enqueued on `stream` and returns at once (so they
// can be captured into a CUDA graph). The callers check shapes and types first: a launcher's
// preconditions are programmer errors, not user errors.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace strata::cuda {

// The decode matvec takes at most this many tokens per launch.
inline constexpr int kMaxMatvecTokens = 8;

// A weight matrix: `rows` rows of `cols` elements of `type`, row r at data + r * row_stride.
// PRECONDITION (all launchers): cols a whole number of blocks, row_stride at least the bytes of
// a row, data and row_stride multiples of the type's block alignment (2 bytes; 1 for MXFP4; the
// element size for F32 / F16 / BF16), cols < 2^31 / 8.
struct WeightRows {
    TensorType type = TensorType::F32;
    const uint8_t* data = nullptr;
    size_t row_stride = 0;
    int64_t rows = 0;
    int64_t cols = 0;
};

// The activation joining an FFN's gate and up products g and u (per element): silu(g) * u, or
// gpt-oss' clamped SwiGLU: g' = min(g, limit), u' = clamp(u, -limit, limit),
// g' * sigmoid(alpha g') * (u' + 1), as cpu::swiglu_oai computes it.
struct Glu {
    bool oai = false;
    float alpha = 0.0f, limit = 0.0f;
};

// Biases of routed experts (gpt-oss), per matrix: expert 0's row of floats (the matrix's output
// width), expert e's `stride` floats further; a null pointer: no bias on that matrix. Slot s
// takes expert ids[s]'s rows where `ids` is given (device memory: the expert entries, whose
// matrices are numbered by entry, not by expert), else those of the expert whose matrices it
// takes; with no expert ids at all (a single expert's product), expert 0's.
struct ExpertBiases {
    const float* gate = nullptr;
    const float* up = nullptr;
    const float* down = nullptr;
    int64_t gate_stride = 0, up_stride = 0, down_stride = 0;
    const int32_t* ids = nullptr;
};

// Device scratch for the activations of one matvec launch as the CPU rounds them for the weight
// type (matvec_chunk.cuh, QuantizedActivations): kMaxMatvecTokens tokens of at most max_cols
// elements (int8 codes, a step per 32 elements, sums per 16 and per 32; or rounded floats).
struct MatvecScratch {
    void* base = nullptr;
    int64_t max_cols = 0;
    static size_t bytes(int64_t max_cols);
};

// y[t * w.rows + r] = W[r] . x[t] (+ bias[r]) for t < n, r < w.rows; x: n x w.cols floats.
// PRECONDITION: 1 <= n <= kMaxMatvecTokens, w.cols <= scratch.max_cols.
void launch_matvec(const WeightRows& w, const float* x, int n, const float* bias, float* y,
                   const MatvecScratch& scratch, cudaStream_t stream);

// out[i * w.cols + c] = fp16 of W[row0 + i][c] for i < nrows (the dequantized floats rounded to
// nearest): the staging of the prompt GEMM for block formats. out: nrows x w.cols halves.
void launch_dequant_f16(const WeightRows& w, int64_t row0, int64_t nrows, void* out,
                        cudaStream_t stream);

// out[t * w.cols + c] = W[ids[t]][c] exactly as quant::dequantize_row gives it, for t < n; ids in
// device memory; an id outside [0, w.rows) gives a row of zeros.
void launch_gather_rows(const WeightRows& w, const int32_t* ids, int64_t n, float* out,
                        cudaStream_t stream);

// The prompt GEMM's activations: n tokens of `cols` floats as the CPU rounds them for weights of
// type `weight` (formats_activations.cuh), in the GEMM's 16-bit input type: bf16 for BF16 weights
// (x rounded to bf16), fp16 otherwise (F16: x rounded to fp16; block formats: code * step of the
// CPU's Q8_0 / Q8_1 / Q8_K activations, rounded to fp16). out: n x cols 16-bit values.
// PRECONDITION: weight is not F32; cols a whole number of the weight's blocks.
void launch_gemm_activations(TensorType weight, const float* x, int64_t n, int64_t cols, void* out,
                             cudaStream_t stream);

// y[t * rows + r] += bias[r] for t < n.
void launch_add_bias(float* y, const float* bias, int64_t rows, int64_t n, cudaStream_t stream);

}  // namespace strata::cuda
