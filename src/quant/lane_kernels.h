// The lane-parallel encoders (lane_kernels.inc), one copy per instruction set, behind the
// dispatch in fast_quantize.cpp. Each copy is compiled for its own target and must only be
// called on a CPU that has it.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace strata::quant::lanes {

// Quantizes nb blocks of t from nb * (block size) floats, giving quantize_row's bytes.
using BlockQuantizer = void (*)(const float* src, void* dst, int64_t nb);

// The encoder of t on each instruction set, or nullptr where that copy has none for t (or the
// build has no such copy: not x86-64, or a compiler without GCC's target pragmas).
BlockQuantizer avx512_quantizer(TensorType t);  // AVX-512 F, VL, DQ, BW
BlockQuantizer avx2_quantizer(TensorType t);    // AVX2

}  // namespace strata::quant::lanes
