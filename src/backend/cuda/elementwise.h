// The element-wise blocks of a layer on the GPU: RMS norm, residual add, the SwiGLU activation,
// the shared expert's sigmoid gate, and the gathers and weighted scatters that route a batch's
// rows to experts and back. Each is one pass over its rows; all are enqueued on a stream.
// Numerics follow backend/cpu/ops.h (RMS norm: x / sqrt(mean(x^2) + eps) * w; SiLU x/(1+e^-x)),
// with sums in float: results agree with the CPU to float rounding, not bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/matmul_kernels.h"
#include "backend/tuning.h"
#include "gguf/tensor_type.h"

namespace strata::cuda {

// Rows a kernel also writes quantized for the int8 matvec, as its quantizer would
// (matvec_q8.h: launch_quantize_for), so that the matvec behind needs no quantizer launch:
// act_type Q8_0, Q8_1 or Q8_K into the quantized-activation scratch; F32: not at all.
struct Q8Rows {
    TensorType act_type = TensorType::F32;
    void* scratch = nullptr;
};

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows of d floats; w may be null (no weight).
// x and y may be the same. With q, y is also quantized into q.scratch (d a multiple of its
// block: 256 for Q8_K, 32 otherwise; rows within the scratch's size). Launched as `pdl` says
// (the backend's Tuning::pdl; pdl.cuh).
void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t d, float eps,
              cudaStream_t s, Pdl pdl, Q8Rows q = {});
// h[r] += x[r], then y[r] = rms_norm(h[r]) as above, in one pass (the residual add and the next
// block's norm). y differs from h and x.
void add_rms_norm(float* h, const float* x, const float* w, float* y, int64_t rows, int64_t d,
                  float eps, cudaStream_t s, Pdl pdl, Q8Rows q = {});
// y[i] += x[i], i < count.
void add(float* y, const float* x, int64_t count, cudaStream_t s);
// out[i] = silu(gate[i]) * up[i], i < count; out may be gate.
void swiglu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t s);
// h[s][r] = glu(h[s][r] + gb_e[r], u[s][r] + ub_e[r]) for s < slots, r < rows, with e =
// b.ids[s], else ids[s] (both null: e = 0 for every slot) and the gate and up biases of `b`
// (null: none): the FFN's
// activation after its gate and up products, for GEMMs that write them apart (matmul_kernels.h:
// Glu, ExpertBiases).
void expert_glu(float* h, const float* u, int64_t rows, int64_t slots, const int32_t* ids,
                const ExpertBiases& b, Glu glu, cudaStream_t s);
// y[s][r] += bias[ids[s] * stride + r] for s < slots, r < rows (ids null: bias[r]): the down
// projection's bias of each slot's expert.
void add_expert_bias(float* y, int64_t rows, int64_t slots, const int32_t* ids, const float* bias,
                     int64_t stride, cudaStream_t s);
// rows[t][i] *= sigmoid(g[t]) for t < n, i < d.
void sigmoid_scale(float* rows, const float* g, int64_t n, int64_t d, cudaStream_t s);
// out[u] = x[slots[u] / k] for u < m: the input rows of the (token, choice) slots that chose an
// expert, rows of d floats.
void gather_rows(const float* x, const int64_t* slots, int k, int64_t m, int64_t d, float* out,
                 cudaStream_t s);
// slot_out[slots[u]] = y[u] * w[u] for u < m, rows of d floats.
void scatter_weighted(const float* y, const int64_t* slots, const float* w, int64_t m, int64_t d,
                      float* slot_out, cudaStream_t s);
// out[t] = sum over s < k of slot_out[t * k + s], summed in choice order, for t < n.
void sum_slots(const float* slot_out, int k, int64_t n, int64_t d, float* out, cudaStream_t s);
// *dst = value, as a kernel (so the value is taken when the launch is made, and a captured
// graph can replace it).
void set_int(int32_t* dst, int32_t value, cudaStream_t s);

}  // namespace strata::cuda
