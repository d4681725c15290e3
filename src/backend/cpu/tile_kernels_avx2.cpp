// AVX2 + FMA + F16C tile kernels: the shared x86 kernels (x86_tile_kernels.inc) with int8 dot
// products built from maddubs (u8 x s8 -> pairs of int16) and madd (int16 pairs -> int32).
// 16 vector registers: tiles of 4 weight rows x 2 activation columns keep the 8 accumulators
// and the unpacked weight codes in registers for the 32-element formats.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/tile_kernel.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace strata::cpu::detail {

#if defined(__x86_64__) || defined(__i386__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

constexpr int kTileRows = 4;
constexpr int kTileCols = 2;
constexpr bool kFullRangeU8 = false;  // x86_tile_kernels.inc says why

inline __m256i dot_u8_s8(__m256i acc, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}
inline __m256i dot_s16(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}

#include "backend/cpu/x86_tile_kernels.inc"
// After the tile kernels, whose block types it uses (a blank line keeps the order).

#include "backend/cpu/x86_activation_quantizers.inc"

}  // namespace

#pragma GCC pop_options

TileKernel avx2_tile_kernel(TensorType weight) {
    return x86_tile_kernel(weight);
}

QuantizeActivationsFn avx2_activation_quantizer(TensorType act) {
    return x86_activation_quantizer(act);
}

#else

TileKernel avx2_tile_kernel(TensorType) {
    return {};
}

QuantizeActivationsFn avx2_activation_quantizer(TensorType) {
    return nullptr;
}

#endif

}  // namespace strata::cpu::detail
