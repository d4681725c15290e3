#include "quant/float_formats.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_HAVE_F16C_ROWS 1
#include <immintrin.h>
#endif

namespace strata::quant {

namespace detail {

void fp16_to_fp32_row_portable(const uint16_t* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32_portable(src[i]);
}

void fp32_to_fp16_row_portable(const float* src, uint16_t* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16_portable(src[i]);
}

}  // namespace detail

namespace {

// F16C row paths. Compiled for F16C even when the rest of the build targets plain x86-64, and
// only called after the CPU reported the feature. Tails shorter than 8 go through the scalar
// portable conversions, which give identical bits.
#if defined(STRATA_HAVE_F16C_ROWS)
__attribute__((target("avx,f16c"))) void fp16_to_fp32_row_f16c(const uint16_t* src, float* dst,
                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) dst[i] = detail::fp16_to_fp32_portable(src[i]);
}

__attribute__((target("avx,f16c"))) void fp32_to_fp16_row_f16c(const float* src, uint16_t* dst,
                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    for (; i < n; ++i) dst[i] = detail::fp32_to_fp16_portable(src[i]);
}

bool cpu_has_f16c() {
    static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    return has;
}
#endif

}  // namespace

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
#if defined(STRATA_HAVE_F16C_ROWS)
    if (cpu_has_f16c()) return fp16_to_fp32_row_f16c(src, dst, n);
#endif
    detail::fp16_to_fp32_row_portable(src, dst, n);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
#if defined(STRATA_HAVE_F16C_ROWS)
    if (cpu_has_f16c()) return fp32_to_fp16_row_f16c(src, dst, n);
#endif
    detail::fp32_to_fp16_row_portable(src, dst, n);
}

const char* fp16_row_path() {
#if defined(STRATA_HAVE_F16C_ROWS)
    if (cpu_has_f16c()) return "f16c";
#endif
    return "portable";
}

void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

namespace {

// fp32_to_bf16 without the early return for NaN (both results computed, one selected), so that
// the loop vectorises (inlined into each ISA's copy); same bits.
[[gnu::always_inline]] inline void fp32_to_bf16_loop(const float* __restrict src,
                                                     uint16_t* __restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t x = detail::float_bits(src[i]);
        const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        const uint32_t quiet_nan = (x >> 16) | 0x40u;
        dst[i] = uint16_t((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    }
}

#if defined(STRATA_HAVE_F16C_ROWS)
__attribute__((target("avx2"))) void fp32_to_bf16_row_avx2(const float* src, uint16_t* dst,
                                                           int64_t n) {
    fp32_to_bf16_loop(src, dst, n);
}

bool cpu_has_avx2() {
    static const bool has = __builtin_cpu_supports("avx2");
    return has;
}
#endif

}  // namespace

void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
#if defined(STRATA_HAVE_F16C_ROWS)
    if (cpu_has_avx2()) return fp32_to_bf16_row_avx2(src, dst, n);
#endif
    fp32_to_bf16_loop(src, dst, n);
}

}  // namespace strata::quant
