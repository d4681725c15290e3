// AVX-512 tile kernels: the shared x86 kernels (x86_tile_kernels.inc) with the VNNI dot products
// (vpdpbusd: u8 x s8 summed by 4 into int32; vpdpwssd: int16 pairs into int32), one instruction
// where AVX2 needs two or three. The data comes in 32-byte blocks, so the kernels work on 256-bit
// registers (AVX-512VL), which also avoids the frequency drop of 512-bit arithmetic on many
// cores; the 32 registers allow tiles of 4 weight rows x 4 activation columns.
// The exceptions use 512-bit registers:
// - Prompt batches (2+ columns) of the other formats (the float ones too, which attention's
//   products use), two columns per register, each half doing the 256-bit kernel's arithmetic,
//   so that a column's bits do not depend on the batch; decode (one column) runs the 256-bit
//   kernel. 1.15x (Q5_K) to 1.6x (Q2_K) the 256-bit kernels' prompt speed on Zen 5.
// - Q8_0, Q4_K and Q5_K, with 16 weight rows in the lanes of a register (Q8_0Lanes, K4Lanes):
//   a block's integer dot product per row with no horizontal sums, the transposed rows shared by
//   a prompt tile's columns. On 2 cores of an AVX-512 Xeon (4096 x 4096, batch 128): Q8_0 815
//   GFLOP/s against 372 in column pairs, Q4_K 835 against 410 for the 4-row 512-bit kernel it
//   replaced, Q5_K 745 against 367 in column pairs; decode: Q4_K 0-15% and Q5_K 0-45% faster,
//   Q8_0 up to ~10% slower on rows of 2048.
// On CPUs that lower their clock for 512-bit integer work (Intel before Ice Lake) the margins
// are smaller; they have not been measured there.
// The 512-bit kernels are in the files this one includes, by weight format family: the
// 32-element formats (tile_kernels_avx512_32_element.inc), the K-quants and IQ4_XS
// (tile_kernels_avx512_k_quants.inc) and the floats (tile_kernels_avx512_floats.inc), with the
// helpers they share (tile_kernels_avx512_helpers.inc); they are one translation unit, compiled
// under this file's target pragma.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/tile_kernel.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace strata::cpu::detail {

#if defined(__x86_64__) || defined(__i386__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's 512-bit intrinsics start from _mm512_undefined_*(), a self-initialised variable that
// -Wuninitialized reports wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

constexpr int kTileRows = 4;
constexpr int kTileCols = 4;
constexpr bool kFullRangeU8 = true;  // x86_tile_kernels.inc says why

inline __m256i dot_u8_s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}
inline __m256i dot_s16(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, a, b);
}

#include "backend/cpu/x86_tile_kernels.inc"
// After the tile kernels, whose block types it uses (a blank line keeps the order).

#include "backend/cpu/x86_activation_quantizers.inc"

// The 512-bit kernels by weight format family, after the helpers they share (blank lines keep
// the order).
#include "backend/cpu/tile_kernels_avx512_helpers.inc"

#include "backend/cpu/tile_kernels_avx512_32_element.inc"

#include "backend/cpu/tile_kernels_avx512_k_quants.inc"

#include "backend/cpu/tile_kernels_avx512_floats.inc"

template <class Codes>
constexpr TileKernel column_pair_kernel() {
    return tile_kernel<SignedTimesQ8_0ColumnPairs<Codes>, kTileRows, kPairTileCols>();
}

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

TileKernel avx512_tile_kernel(TensorType weight) {
    switch (weight) {
        case TensorType::Q4_K:
            return {&Q4_KLanes::tile, kLaneRows, kLaneTileColumns};
        case TensorType::Q6_K:
            return tile_kernel<Q6_KTimesQ8_KColumnPairs, kTileRows, kPairTileCols>();
        case TensorType::Q5_K:
            return {&Q5_KLanes::tile, kLaneRows, kLaneTileColumns};
        case TensorType::F32:
            return {&FloatLanes<F32Elements>::tile, kLaneRows, kLaneTileColumns};
        case TensorType::F16:
            return {&FloatLanes<F16Elements>::tile, kLaneRows, kLaneTileColumns};
        case TensorType::BF16:
            return {&FloatLanes<BF16Elements>::tile, kLaneRows, kLaneTileColumns};
        case TensorType::Q2_K:
            return tile_kernel<K2TimesQ8_KColumnPairs<false>, kTileRows, kPairTileCols>();
        case TensorType::Q3_K:
            return tile_kernel<K2TimesQ8_KColumnPairs<true>, kTileRows, kPairTileCols>();
        case TensorType::IQ4_XS:
            return tile_kernel<IQ4_XSTimesQ8_KColumnPairs, kTileRows, kPairTileCols>();
        case TensorType::Q4_1:
            return tile_kernel<AffineTimesQ8_1ColumnPairs<Q4_1Codes>, kTileRows, kPairTileCols>();
        case TensorType::Q5_1:
            return tile_kernel<AffineTimesQ8_1ColumnPairs<Q5_1Codes>, kTileRows, kPairTileCols>();
        case TensorType::Q8_0:
            return {&Q8_0Lanes::tile, kLaneRows, kLaneTileColumns, true};
        case TensorType::Q4_0:
            return column_pair_kernel<Q4_0Codes>();
        case TensorType::Q5_0:
            return column_pair_kernel<Q5_0Codes>();
        case TensorType::IQ4_NL:
            return column_pair_kernel<IQ4_NLCodes>();
        case TensorType::MXFP4:
            return column_pair_kernel<MXFP4Codes>();
        default:
            return x86_tile_kernel(weight);
    }
}

QuantizeActivationsFn avx512_activation_quantizer(TensorType act) {
    return x86_activation_quantizer(act);
}

#else

TileKernel avx512_tile_kernel(TensorType) {
    return {};
}

QuantizeActivationsFn avx512_activation_quantizer(TensorType) {
    return nullptr;
}

#endif

}  // namespace strata::cpu::detail
