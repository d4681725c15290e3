// Matrix products of quantized weights with float activations, the two shapes inference needs:
//   matvec: y = W x           (decode: one token)
//   matmul: Y = X W^T         (prompt batches: n tokens at once)
//
// Numerics follow the reference engine's CPU backend: the activations are converted once per
// call to the weight's vec_dot_type (quant::quantize_row_activations: Q8_0, Q8_1, Q8_K, or
// F16 / BF16 / F32 for float weights), and each weight block is dotted with its activation
// block in integers (float for float weights), scaled, and summed in float. The result differs
// from an exact sum over the reference dequantizer's floats times the quantized activations only
// by float summation order: |error| <= n_terms * eps * sum |w_i x_i| (see cpu_matmul_test.cpp).
// Against unquantized activations the difference is the activation rounding: half a step of
// the block's int8 grid (|x|max / 254 per element) for Q8 types, 2^-11 |x| for F16, 2^-8 |x|
// for BF16.
//
// Every path (scalar, AVX2, AVX-512; cpu_path.h) computes the same thing. Each call takes the
// path the kernel table gives its weights' type and number of columns (kernel_table.h: a forced
// path, else the measured table, else the best the CPU runs); types without a fast kernel on that
// path take the scalar one. Work is split across the pool's threads by blocks of rows handed out
// dynamically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "backend/cpu/cpu_path.h"
#include "gguf/tensor_type.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace strata::cpu {

// A read-only view of a row-major weight matrix in a GGUF type: rows x cols elements, row r at
// data + r * row_stride. (GGUF's ne0 is cols, ne1 is rows.)
struct QuantMatrix {
    TensorType type = TensorType::F32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;       // a multiple of the type's block size
    size_t row_stride = 0;  // bytes, at least the bytes of one row
};

// Checks a view (type supported, cols whole blocks, stride large enough and keeping rows aligned
// for the block type) and fills row_stride when 0 is given (contiguous rows).
Result<QuantMatrix> make_quant_matrix(TensorType type, const void* data, int64_t rows, int64_t cols,
                                      size_t row_stride = 0);

// True for the types matvec / matmul accept: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4.
bool matmul_supports(TensorType t);

// y[r] = dot(W[r], x) for r < W.rows. x: W.cols floats, y: W.rows floats.
// PRECONDITION: W valid (make_quant_matrix), buffers not overlapping.
void matvec(const QuantMatrix& W, const float* x, float* y, ThreadPool& pool);

// Y[c * W.rows + r] = dot(W[r], X[c * W.cols ...]) for c < n. X: n x W.cols, Y: n x W.rows.
// PRECONDITION: as matvec, n >= 0.
void matmul(const QuantMatrix& W, const float* X, float* Y, int64_t n, ThreadPool& pool);

// matmul of several matrices with the same activations (q, k and v; gate and up) as one parallel
// job: Ys[i] = X Ws[i]^T. The activations are converted once per activation type and the rows of
// all matrices are shared out together, so small matrices neither pay a dispatch each nor leave
// cores idle at their ends. Results are those of matmul on each matrix.
// PRECONDITION: as matmul for each pair; all Ws have the same cols; Ws.size() == Ys.size();
// at most 4 distinct activation types among the Ws.
void matmul_multi(std::span<const QuantMatrix> Ws, const float* X, std::span<float* const> Ys,
                  int64_t n, ThreadPool& pool);

// One product of matmul_segments: rows first .. first+count-1 of Y (W.rows floats each) are those
// rows of X times W^T.
struct MatmulSegment {
    QuantMatrix W;
    int64_t first = 0, count = 0;
    float* Y = nullptr;
};

// matmul_multi for matrices that each take their own rows of X (the routed experts of a batch,
// each with the tokens that chose it) as one parallel job: X (rows x cols) is converted once per
// activation type, the rows of every matrix shared out together. Results are those of matmul of
// each matrix on its rows.
// PRECONDITION: as matmul for each; all Ws have the same cols; segments lie within X's rows;
// at most 4 distinct activation types.
void matmul_segments(std::span<const MatmulSegment> segs, const float* X, int64_t rows,
                     ThreadPool& pool);

// Gives the calling thread's buffer of converted activations (the weight's dot-product type) room
// for `bytes`, so that no later matmul of up to that size on this thread allocates.
void reserve_converted_activations(size_t bytes);

// matmul on a given path, whatever the kernel table says: for tests, benchmarks and the profile's
// timing of the paths (profile/cpu_kernel_timing.h). PRECONDITION: the CPU can run `path`.
void matmul_on_path(CpuPath path, const QuantMatrix& W, const float* X, float* Y, int64_t n,
                    ThreadPool& pool);

// quant::quantize_row_activations(act, x, out, n) on a given path: the same bytes, computed with
// the path's instructions where it has a quantizer for act (Q8_0, Q8_1, Q8_K on AVX2 / AVX-512).
// PRECONDITION: as quantize_row_activations; the CPU can run `path`.
void quantize_activations_on_path(CpuPath path, TensorType act, const float* x, void* out,
                                  int64_t n);

// "avx2", "avx512" or "scalar": the kernel `path` actually runs for weights of type t.
std::string_view matmul_kernel_name(CpuPath path, TensorType t);

}  // namespace strata::cpu
