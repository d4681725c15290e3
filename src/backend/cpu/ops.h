// The element-wise building blocks of a transformer layer, on rows of float activations.
//
// Numerics follow the reference engine's CPU backend where that decides results: RMSNorm sums
// squares in double and scales by 1/sqrtf(mean + eps) before the weight multiply, softmax
// subtracts the maximum and sums exponentials in double, SiLU is x / (1 + e^-x).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "backend/cpu/matmul.h"
#include "model/tensor_view.h"
#include "util/thread_pool.h"

namespace strata::cpu {

// y = x / sqrt(mean(x^2) + eps) * w for one row of n values (w may be null: no weight).
void rms_norm_row(const float* x, const float* w, float* y, int64_t n, float eps);
// The same for `rows` rows of n values, rows spread over the pool when there are many.
void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                   ThreadPool& pool);

// y[i] += x[i]
void add_into(float* y, const float* x, int64_t n);
// y[i] += a * x[i]
void axpy(float* y, float a, const float* x, int64_t n);
// out[i] = silu(gate[i]) * up[i]   (the SwiGLU activation of llama-style FFNs); out may be gate
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// The same shared out over the pool when n is large (a prompt's FFN rows), element for element
// the same arithmetic.
void swiglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);
float silu(float x);
float sigmoid(float x);
// In-place softmax of n values. A finite `sink` is one more logit in the denominator (its
// exponential joins the sum and the maximum) that has no output of its own: attention sinks.
void softmax(float* x, int64_t n, float sink = -std::numeric_limits<float>::infinity());
// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g * sigmoid(alpha * g) * (u + 1). out may be gate.
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit);
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit,
                ThreadPool& pool);

// A 2-D weight view as the matmul kernels take it.
cpu::QuantMatrix quant_matrix(const TensorView& W);

// Y = X W^T (+ bias) for n rows of X: a decode step (n == 1) takes the matrix-vector kernel.
// W is a 2-D weight view (rows = output features); bias (optional) is F32 of W's row count.
void linear(const TensorView& W, const TensorView* bias, const float* X, float* Y, int64_t n,
            ThreadPool& pool);

// Several linear maps of the same input (q, k and v; gate and up) as one parallel job.
struct LinearOut {
    const TensorView* W;
    const TensorView* bias;  // may be null or absent
    float* Y;
};
void linear_multi(std::span<const LinearOut> outs, const float* X, int64_t n, ThreadPool& pool);

// Scratch of swiglu_ffn: n rows of the FFN's hidden size each (the activation overwrites gate).
struct FfnBuffers {
    std::vector<float> gate, up;
    // Room for `rows` rows of `width`, so that no call up to that size reallocates.
    void reserve(int64_t rows, int64_t width);
};
// out = down(silu(gate x) * up x) for n rows of x.
void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                const float* x, int64_t n, float* out, FfnBuffers& buf, ThreadPool& pool);

// Row `token` of an embedding matrix, dequantized to floats.
void embedding_row(const TensorView& table, int32_t token, float* out);

}  // namespace strata::cpu
