// The activation quantizer of matvec_q8 as warp-level pieces: one warp quantizes one block, the
// codes and scales exactly as quant::quantize_row_activations makes them (matvec_q8_act.h has
// the per-element arithmetic). The quantizer kernel (matvec_q8.cu) runs one warp per block; a
// kernel that produces a row can quantize it itself (the RMS norm does, elementwise.cu), which
// saves the decode step a launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/matvec_q8_act.h"
#include "gguf/tensor_type.h"

namespace strata::cuda::q8warp {

// The quantized form of a row: Q8_0 and Q8_1 (blocks of 32, a float2 of scale and sum per
// block, see q8detail::ScratchLayout) or Q8_K (blocks of 256, a float scale and 16 int16 sums).
enum class Kind : int { Q8_0, Q8_1, Q8_K };
// The kind of an activation type (Q8_0, Q8_1 or Q8_K).
inline Kind kind_of(TensorType act_type) {
    if (act_type == TensorType::Q8_K) return Kind::Q8_K;
    return act_type == TensorType::Q8_1 ? Kind::Q8_1 : Kind::Q8_0;
}

// Where one row's quantized form goes: codes[cols], and per block ds (Q8_0 / Q8_1) or d and
// bsums (Q8_K).
struct RowOut {
    int8_t* codes;
    float2* ds;
    float* d;
    int16_t* bsums;
};

// Block b of 32 at x (x[lane] is this lane's element), Q8_1 with q1 else Q8_0.
// PRECONDITION: all 32 lanes of the warp call it together.
__device__ __forceinline__ void block_q8_32(const float* x, int lane, bool q1, int8_t* codes,
                                            float2* ds) {
    const float v = x[lane];
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const q8act::Q8Scale sc = q8act::q8_scale(amax);
    const int q = q8act::q8_code(sc, v);
    codes[lane] = int8_t(q);
    int sum = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
        const float d = __half2float(__float2half_rn(sc.d));
        const float s = q1 ? __half2float(__float2half_rn(q8act::q8_1_sum(sc.d, sum))) : float(sum);
        *ds = make_float2(d, s);
    }
}

// A block of 256 at x (lane l quantizes x[8l .. 8l + 7]) into codes[256], *d and bsums[16].
// PRECONDITION: all 32 lanes call it together; x and codes 16-byte / 8-byte aligned.
__device__ __forceinline__ void block_q8_k(const float* x, int lane, int8_t* codes, float* d,
                                           int16_t* bsums) {
    const float4 v0 = *reinterpret_cast<const float4*>(x + 8 * lane);
    const float4 v1 = *reinterpret_cast<const float4*>(x + 8 * lane + 4);
    const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    // The first value of largest magnitude: the lane's first, then across lanes the larger
    // magnitude, the lower index on ties.
    float mag = 0, val = 0;
    int idx = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if (fabsf(v[k]) > mag) {
            mag = fabsf(v[k]);
            val = v[k];
            idx = 8 * lane + k;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float omag = __shfl_xor_sync(0xffffffffu, mag, o);
        const float oval = __shfl_xor_sync(0xffffffffu, val, o);
        const int oidx = __shfl_xor_sync(0xffffffffu, idx, o);
        if (omag > mag || (omag == mag && oidx < idx)) {
            mag = omag;
            val = oval;
            idx = oidx;
        }
    }
    const float iscale = mag != 0 ? q8act::q8k_iscale(val) : 0.0f;
    uint32_t w[2] = {0, 0};
    int sum = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const int q = mag != 0 ? q8act::q8k_code(iscale, v[k]) : 0;
        sum += q;
        w[k / 4] |= uint32_t(uint8_t(int8_t(q))) << (8 * (k % 4));
    }
    *reinterpret_cast<uint2*>(codes + 8 * lane) = make_uint2(w[0], w[1]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // lanes 2j, 2j + 1: the 16 codes of group j
    if ((lane & 1) == 0) bsums[lane / 2] = int16_t(sum);
    if (lane == 0) *d = mag != 0 ? q8act::q8k_d(iscale) : 0.0f;
}

// Block b of a row of x (its first element at x) into the row's quantized form.
// PRECONDITION: as block_q8_32 / block_q8_k; b below the row's block count.
__device__ __forceinline__ void row_block(Kind kind, const float* x, int64_t b, int lane,
                                          const RowOut& out) {
    if (kind == Kind::Q8_K) {
        block_q8_k(x + b * 256, lane, out.codes + b * 256, out.d + b, out.bsums + b * 16);
    } else {
        block_q8_32(x + b * 32, lane, kind == Kind::Q8_1, out.codes + b * 32, out.ds + b);
    }
}

}  // namespace strata::cuda::q8warp
