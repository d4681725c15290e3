// AVX-512 tile kernels: the shared x86 kernels (x86_tile_kernels.inc) with the VNNI dot products
// (vpdpbusd: u8 x s8 summed by 4 into int32; vpdpwssd: int16 pairs into int32), one instruction
// where AVX2 needs two or three. The data comes in 32-byte blocks, so the kernels work on 256-bit
// registers (AVX-512VL), which also avoids the frequency drop of 512-bit arithmetic on many
// cores; the 32 registers allow tiles of 4 weight rows x 4 activation columns.
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
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

namespace {

constexpr int kTileRows = 4;
constexpr int kTileCols = 4;

inline __m256i dot_u8_s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}
inline __m256i dot_s16(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, a, b);
}

#include "backend/cpu/x86_tile_kernels.inc"
#include "backend/cpu/x86_activation_quantizers.inc"

}  // namespace

#pragma GCC pop_options

TileKernel avx512_tile_kernel(TensorType weight) {
    return x86_tile_kernel(weight);
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
