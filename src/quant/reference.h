// Scalar reference kernels, one pair per format, behind the dispatch in quant.h. They work on
// whole blocks: nb blocks <-> nb * (elements per block) floats. Fast kernels added later sit
// beside these (own namespace, same signatures) and are tested against them.
#pragma once

#include <bit>
#include <cstdint>

#include "quant/blocks.h"

namespace strata::quant::ref {

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 moves the integer part into
// the low mantissa bits, where the float addition rounds (in the default rounding mode, which all
// float code here assumes). The rounding ggml's K-quant and IQ quantizers use.
inline int round_nearest_even(float v) {
    const float shifted = v + 12582912.0f;
    return int(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

// legacy_quants.cpp
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb);
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb);
// The x86 CPU backend's activation rounding (see quant.h).
void quantize_q8_0_activations(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1_activations(const float* x, BlockQ8_1* y, int64_t nb);

// k_quants.cpp
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb);
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb);

// nonlinear_quants.cpp
// Below this block maximum an IQ4_NL / IQ4_XS sub-block is treated as all zero (scale 0).
inline constexpr float kIq4ZeroBlockMax = 1e-15f;
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb);
void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb);
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);

}  // namespace strata::quant::ref
