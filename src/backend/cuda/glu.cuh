// The gate-and-up activations of an FFN (matmul_kernels.h, Glu) as device functions, for the
// kernels that apply them: the fused SwiGLU matvec and the element-wise pass after a GEMM.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/matmul_kernels.h"

namespace strata::cuda {

// silu(g) * u, as the CPU backend and elementwise.cu compute it.
__device__ __forceinline__ float swiglu_value(float g, float u) {
    return g / (1.0f + expf(-g)) * u;
}

// gpt-oss' clamped SwiGLU, operation for operation as cpu::swiglu_oai (the sigmoid through
// e^-|alpha g|, so the exponential never overflows).
__device__ __forceinline__ float swiglu_oai_value(float g, float u, float alpha, float limit) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    const float ag = __fmul_rn(alpha, g);
    const float e = expf(-fabsf(ag));
    const float sig =
        ag >= 0.0f ? __fdiv_rn(1.0f, __fadd_rn(1.0f, e)) : __fdiv_rn(e, __fadd_rn(1.0f, e));
    return __fmul_rn(__fmul_rn(g, sig), __fadd_rn(u, 1.0f));
}

__device__ __forceinline__ float glu_value(const Glu& glu, float g, float u) {
    return glu.oai ? swiglu_oai_value(g, u, glu.alpha, glu.limit) : swiglu_value(g, u);
}

}  // namespace strata::cuda
