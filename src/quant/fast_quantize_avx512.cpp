// The lane-parallel encoders (lane_kernels.inc) compiled for AVX-512: the eight lanes' doubles
// fill one 512-bit register, their floats a 256-bit one (AVX-512VL gives those masks and the
// two-table permute that looks up the IQ4 grid in one instruction), and a pair of candidates'
// floats a 512-bit one.
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

#pragma GCC push_options
#pragma GCC target("avx2,avx512f,avx512vl,avx512dq,avx512bw")
// GCC 12's 512-bit intrinsics start from _mm512_undefined_*(), a self-initialised variable that
// -Wuninitialized reports wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace avx512 {
namespace {

inline __m256 lookup16(__m256 lo, __m256 hi, __m256i idx) {
    return _mm256_permutex2var_ps(lo, idx, hi);
}

#define STRATA_LANES_AVX512 1
#include "quant/lane_kernels.inc"
#undef STRATA_LANES_AVX512

}  // namespace
}  // namespace avx512

BlockQuantizer avx512_quantizer(TensorType t) {
    return avx512::lane_quantizer(t);
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

#else

BlockQuantizer avx512_quantizer(TensorType) {
    return nullptr;
}

#endif

}  // namespace strata::quant::lanes
