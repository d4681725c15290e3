// quantize_row's bytes, faster: the writer of large quantized files (strata synth) goes
// through here.
//
// The scalar reference quantizers of quant.h search scales one sub-block at a time. The fast
// path (lane_kernels.inc) runs the same search on eight sub-blocks at once, one per SIMD lane,
// with every lane doing the reference's float and double operations in the reference's order,
// so its output is the reference's, bit for bit, on every path (tests compare them on random
// data with zeros, outliers, constant rows and exact rounding ties). Types: Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_NL, IQ4_XS and Q8_0; every other type goes to quantize_row on every path.
//
// The path is chosen once from the CPU's features (AVX-512 F/VL/DQ/BW, else AVX2, else the
// scalar reference); quantize_row_on runs a given one, for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string_view>

#include "gguf/tensor_type.h"

namespace strata::quant {

enum class QuantizePath : uint8_t {
    scalar,  // quantize_row itself
    avx2,
    avx512,
};

inline constexpr QuantizePath kAllQuantizePaths[] = {QuantizePath::scalar, QuantizePath::avx2,
                                                     QuantizePath::avx512};

std::string_view quantize_path_name(QuantizePath p);
// Whether this build has the path and this CPU (and OS) can run it.
bool quantize_path_runs_here(QuantizePath p);
// The fastest path that runs here.
QuantizePath best_quantize_path();
// Whether p has its own encoder for t (false: quantize_row does the work).
bool has_fast_quantizer(QuantizePath p, TensorType t);

// quantize_row(t, src, dst, n) through path p, with quantize_row's preconditions; p must run
// here.
void quantize_row_on(QuantizePath p, TensorType t, const float* src, void* dst, int64_t n);
// quantize_row_on(best_quantize_path(), ...).
void quantize_row_fast(TensorType t, const float* src, void* dst, int64_t n);

}  // namespace strata::quant
