// How the CPU rounds the activations before it multiplies them with weights of a given format,
// for the GPU kernels (and, through device_common.cuh's host versions, for the host tests).
//
// The CPU backend (llama.cpp's, which strata's reproduces) converts x to the weight's vec_dot
// type first (quant::vec_dot_type, quant::quantize_row_activations) and multiplies the weights
// with that: for quantized weights int8 codes q with a scale d per block (x ~= q * d), for F16 /
// BF16 weights x rounded to fp16 / bf16. A GPU product that used more precise activations would
// differ from the reference by the activation rounding (up to half a code step), enough to flip
// near-ties of a MoE router or a greedy choice; so every GPU product takes the CPU's codes:
//   Q8_0 / Q8_1 (blocks of 32): amax = max |x|, d = amax / 127 (stored as fp16), codes
//     round_half_even(x * (127 / amax)) (x / d when 127 / amax overflows); Q8_1 also keeps
//     s = fp16(d * sum of the codes), with d before its fp16 rounding, which the CPU multiplies
//     with the minimum of Q4_1 / Q5_1 blocks;
//   Q8_K (blocks of 256): max = the first x of largest magnitude (with its sign), iscale =
//     -127 / max, codes min(127, round_half_even(iscale * x)), d = 1 / iscale kept in fp32;
//   F16 / BF16: x rounded to nearest even; F32: x as it is.
// Every operation is the CPU's, rounded the same way (IEEE division, products never fused), so
// codes and scales are the CPU's bit for bit (tests/cuda/cuda_matmul_test.cpp checks them on the
// host against quantize_row_activations, and the kernels' block reductions on the GPU).
#pragma once

#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/format_traits.h"
#include "gguf/tensor_type.h"

namespace strata::cuda {

// quant::vec_dot_type, usable in device code and constant expressions: the activation type of
// weights of type t (FormatTraits::kActivation; t itself for the float types and for a type the
// kernels do not take).
constexpr TensorType activation_type(TensorType t) {
    const FormatInfo f = format_info(t);
    return f.known ? f.activation : t;
}

// Elements of one block of codes of activation type a (Q8_0 / Q8_1: 32, Q8_K: 256).
constexpr int activation_block_elems(TensorType a) {
    return a == TensorType::Q8_K ? 256 : 32;
}

// ---- Q8_0 / Q8_1 -----------------------------------------------------------------------------

// The scale of a block whose largest |x| is amax.
struct Q8Scale {
    float id;     // 127 / amax (0 for amax = 0)
    float d;      // amax / 127, before its fp16 rounding
    bool divide;  // id overflowed (amax < 127 / FLT_MAX): the CPU divides by d instead
};
STRATA_HD Q8Scale q8_scale(float amax) {
    const float id = amax != 0.0f ? div_rn(127.0f, amax) : 0.0f;
    return {id, div_rn(amax, 127.0f), !is_finite(id)};
}
STRATA_HD int q8_code(float x, const Q8Scale& s) {
    return round_half_even(s.divide ? div_rn(x, s.d) : mul_rn(x, s.id));
}
// d as the CPU stores it (fp16) and multiplies with: x is taken as q8_code * q8_step.
STRATA_HD float q8_step(const Q8Scale& s) {
    return round_to_half(s.d);
}
// Q8_1's s for a block whose codes sum to `sum`.
STRATA_HD float q8_1_sum(const Q8Scale& s, int sum) {
    return round_to_half(mul_rn(s.d, float(sum)));
}

// ---- Q8_K -------------------------------------------------------------------------------------

// The scale of a block whose first element of largest magnitude is `max` (signed). A block of
// zeros has iscale = d = 0 (every code 0). Where iscale overflows (|max| < 127 / FLT_MAX) the
// CPU's codes are undefined, but d = 0 there, as here: every value is 0 all the same.
struct Q8KScale {
    float iscale;  // -127 / max
    float d;       // 1 / iscale, kept in fp32
};
STRATA_HD Q8KScale q8k_scale(float max) {
    if (max == 0.0f) return {0.0f, 0.0f};
    const float iscale = div_rn(-127.0f, max);
    return {iscale, div_rn(1.0f, iscale)};
}
STRATA_HD int q8k_code(float x, const Q8KScale& s) {
    const int q = round_half_even(mul_rn(s.iscale, x));
    return q < 127 ? q : 127;
}

// ---- float activations --------------------------------------------------------------------

// x as the CPU multiplies it with weights whose activation type is a (F32, F16 or BF16).
template <TensorType A>
STRATA_HD float round_float_activation(float x) {
    static_assert(A == TensorType::F32 || A == TensorType::F16 || A == TensorType::BF16);
    if constexpr (A == TensorType::F16) {
        return round_to_half(x);
    } else if constexpr (A == TensorType::BF16) {
        return bf16_bits_to_float(float_to_bf16_bits(x));
    } else {
        return x;
    }
}

// ---- one block per group of threads (GPU) -----------------------------------------------------
#if defined(__CUDACC__)

// An activation as the CPU rounds it: code * step is the value the CPU multiplies with.
struct RoundedActivation {
    int code;
    float step;      // the block's d as the CPU uses it
    float q8_1_sum;  // Q8_1: the block's s; 0 for the other types
    __device__ float value() const { return __fmul_rn(float(code), step); }
};

// Shared memory for round_in_block, for thread blocks of up to 16 warps.
struct BlockRoundingScratch {
    float warp_amax[16];
    float warp_first[16];  // the warp's first x of largest magnitude, when it has one
    bool warp_hit[16];
};

// The CPU's rounding of this thread's x, for a thread block in which every run of
// activation_block_elems(A) consecutive threads (aligned to it) holds one block of a row of
// activations, one element per thread (0 for threads past the row). Every thread of the thread
// block must call it (it synchronizes the block for Q8_K).
template <TensorType A>
__device__ __forceinline__ RoundedActivation round_in_block(float x, BlockRoundingScratch& s) {
    static_assert(A == TensorType::Q8_0 || A == TensorType::Q8_1 || A == TensorType::Q8_K);
    float amax = fabsf(x);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if constexpr (A != TensorType::Q8_K) {
        const Q8Scale scale = q8_scale(amax);
        RoundedActivation r{q8_code(x, scale), q8_step(scale), 0.0f};
        if constexpr (A == TensorType::Q8_1) {
            int sum = r.code;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            r.q8_1_sum = q8_1_sum(scale, sum);
        }
        return r;
    } else {
        // 8 warps per block: their maxima through shared memory, then the first element of
        // that magnitude (its sign sets the sign of d and of the codes, as on the CPU).
        const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
        const int w0 = warp & ~7;  // the first warp of this thread's block
        if (lane == 0) s.warp_amax[warp] = amax;
        __syncthreads();
#pragma unroll
        for (int w = 0; w < 8; ++w) amax = fmaxf(amax, s.warp_amax[w0 + w]);
        const unsigned hits = __ballot_sync(0xffffffffu, fabsf(x) == amax);
        const float first = __shfl_sync(0xffffffffu, x, hits ? __ffs(int(hits)) - 1 : 0);
        if (lane == 0) {
            s.warp_first[warp] = first;
            s.warp_hit[warp] = hits != 0;
        }
        __syncthreads();
        float max = 0.0f;
        for (int w = w0 + 7; w >= w0; --w) {
            if (s.warp_hit[w]) max = s.warp_first[w];  // the lowest warp with a hit wins
        }
        const Q8KScale scale = q8k_scale(max);
        return {q8k_code(x, scale), scale.d, 0.0f};
    }
}

#endif  // __CUDACC__

}  // namespace strata::cuda
