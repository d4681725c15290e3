// The lane-parallel encoders (lane_kernels.inc) compiled for AVX2: the eight lanes' doubles take
// two 256-bit registers, the floats one.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/k_quant_parts.h"
#include "quant/lane_kernels.h"
#include "quant/reference.h"
#include "quant/scale_search.h"

#include "quant/strict_fp.h"

namespace strata::quant::lanes {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)

// 64-byte vectors (eight doubles) are passed differently with and without AVX-512; these
// functions are internal to this file, so GCC's warning about it (given at the end of the file,
// hence not popped) does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC push_options
#pragma GCC target("avx2")

namespace avx2 {
namespace {

// Entry idx & 15 of lo (0-7) and hi (8-15): both permuted, bit 3 of idx picks one.
inline __m256 lookup16(__m256 lo, __m256 hi, __m256i idx) {
    const __m256 from_lo = _mm256_permutevar8x32_ps(lo, idx);
    const __m256 from_hi = _mm256_permutevar8x32_ps(hi, idx);
    return _mm256_blendv_ps(from_lo, from_hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

#define STRATA_LANES_AVX512 0
#include "quant/lane_kernels.inc"
#undef STRATA_LANES_AVX512

}  // namespace
}  // namespace avx2

BlockQuantizer avx2_quantizer(TensorType t) {
    return avx2::lane_quantizer(t);
}

#pragma GCC pop_options

#else

BlockQuantizer avx2_quantizer(TensorType) {
    return nullptr;
}

#endif

}  // namespace strata::quant::lanes
