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

// ---- 512-bit helpers ---------------------------------------------------------------------------

// Two 8-float vectors as the halves of one register, and the high half back (AVX-512F forms).
inline __m512 float_halves(__m256 low, __m256 high) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(low)),
                                               _mm256_castps_pd(high), 1));
}
inline __m256 high_half(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Two 32-byte pieces of memory as the two halves of a register.
inline __m512i load_halves(const void* low, const void* high) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load32(low)), load32(high), 1);
}

// ---- 32-element formats times Q8_0, two activation columns per 512-bit register ------------
//
// A prompt tile of the formats of SignedTimesQ8_0 (x86_tile_kernels.inc) on 512-bit registers:
// the low half of a register does column c's arithmetic and the high half column c + 1's, with
// the weight block broadcast into both halves. Each half does exactly what the 256-bit kernel
// does for its column (the same integer sums, the same fp32 scale product, fused multiply-add and
// horizontal sum), so a column gets the same bits in a batch as alone (where the 256-bit kernel
// runs): half the vector instructions per product, and no shuffles in the inner loop.

template <class Codes>
constexpr bool kHasOffset = requires {
    Codes::kOffset;
};

// A weight block's codes (offset to unsigned where the format has an offset) in both halves.
template <class Codes>
inline __m512i codes_in_both_halves(const typename Codes::Block* b) {
    if constexpr (std::is_same_v<Codes, Q8_0OffsetCodes>) {
        // Broadcast straight from memory (a load, not a shuffle), then offset.
        return _mm512_xor_si512(_mm512_broadcast_i64x4(load32(b->qs)),
                                _mm512_set1_epi8(char(0x80)));
    } else if constexpr (kHasOffset<Codes>) {
        return _mm512_broadcast_i64x4(Codes::unsigned_codes(b));
    } else {
        return _mm512_broadcast_i64x4(Codes::codes(b));
    }
}

// dot_s8_s8 on 512-bit registers (AVX-512 has no vpsignb): |w| times x negated where w < 0.
// Where w = 0 the product is 0 either way, so the int32 sums are dot_s8_s8's.
inline __m512i dot_s8_s8_wide(__m512i w, __m512i x) {
    const __mmask64 negative = _mm512_movepi8_mask(w);
    const __m512i signed_x = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), signed_x);
}

constexpr int kPairTileCols = 8;  // 4 column pairs: 16 accumulators of the 32 registers

// The column of each half: column 2p in the low half of acc[r][p], 2p + 1 in the high half (an
// odd C's last high half is a copy of its last column, not stored). Summed as hsum sums a
// 256-bit accumulator.
template <int R, int C>
inline void store_pair_tile(__m512 (&acc)[R][(C + 1) / 2], float* out, size_t os) {
    for (int r = 0; r < R; ++r) {
        for (int p = 0; p < (C + 1) / 2; ++p) {
            out[size_t(2 * p) * os + size_t(r)] = hsum(_mm512_castps512_ps256(acc[r][p]));
            if (2 * p + 1 < C) out[size_t(2 * p + 1) * os + size_t(r)] = hsum(high_half(acc[r][p]));
        }
    }
}

// Activation block b of the columns of pair p: c0 = 2p and c1 = 2p + 1 (c0 again past C).
template <class Block, int C>
inline void pair_blocks(const uint8_t* a, size_t as, int p, int64_t b, const Block*& low,
                        const Block*& high) {
    low = block_at<Block>(a, as, 2 * p, b);
    high = block_at<Block>(a, as, std::min(2 * p + 1, C - 1), b);
}

template <class Codes>
struct SignedTimesQ8_0ColumnPairs {
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            SignedTimesQ8_0<Codes>::template tile<R, 1>(w, ws, a, as, nb, out, os);
        } else {
            // P pairs; an odd C's last pair holds its last column twice (the high half unused).
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            for (int64_t b = 0; b < nb; ++b) {
                __m512i x[P];
                __m512 xd[P];
                __m512i offset_sum[P];  // offset codes: -k Σ x per half, as the 256-bit kernel
                for (int p = 0; p < P; ++p) {
                    const BlockQ8_0 *low, *high;
                    pair_blocks<BlockQ8_0, C>(a, as, p, b, low, high);
                    x[p] = load_halves(low->qs, high->qs);
                    xd[p] = float_halves(_mm256_set1_ps(half_to_float(low->d)),
                                         _mm256_set1_ps(half_to_float(high->d)));
                    if constexpr (kHasOffset<Codes>) {
                        const __m512i k = _mm512_set1_epi8(char(Codes::kOffset));
                        offset_sum[p] =
                            _mm512_sub_epi32(_mm512_setzero_si512(),
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), k, x[p]));
                    }
                }
                for (int r = 0; r < R; ++r) {
                    const auto* wb = block_at<typename Codes::Block>(w, ws, r, b);
                    prefetch_next_tile(wb, R * ws);
                    const __m512i wq = codes_in_both_halves<Codes>(wb);
                    const __m512 wd = _mm512_set1_ps(Codes::scale(wb));
                    for (int p = 0; p < P; ++p) {
                        __m512i sum;
                        if constexpr (kHasOffset<Codes>) {
                            sum = _mm512_dpbusd_epi32(offset_sum[p], wq, x[p]);
                        } else {
                            sum = dot_s8_s8_wide(wq, x[p]);
                        }
                        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[p]),
                                                    _mm512_cvtepi32_ps(sum), acc[r][p]);
                    }
                }
            }
            store_pair_tile<R, C>(acc, out, os);
        }
    }
};

// The activations of a K-quant block for a column pair: the 8 groups of 32 codes, the 16 sums
// of 16 codes, and d, each column in its half.
template <int P, int C>
inline void q8k_pairs(const uint8_t* a, size_t as, int64_t b, __m512i (&x)[P][8],
                      __m512i (&bsums)[P], __m512 (&xd)[P]) {
    for (int p = 0; p < P; ++p) {
        const BlockQ8_K *low, *high;
        pair_blocks<BlockQ8_K, C>(a, as, p, b, low, high);
        for (int k = 0; k < 8; ++k) x[p][k] = load_halves(low->qs + 32 * k, high->qs + 32 * k);
        bsums[p] = load_halves(low->bsums, high->bsums);
        xd[p] = float_halves(_mm256_set1_ps(low->d), _mm256_set1_ps(high->d));
    }
}

// A shuffle_epi8 index that fills each 256-bit half with int16 element 2k of a 16-byte lane in
// its low 128 bits and element 2k + 1 in its high 128 bits (one sub-block's scale per 16 codes:
// Q6_K's and sub_block_pair_scales' layout, x86_tile_kernels.inc).
inline __m512i int16_pair_index(int k) {
    const char lo = char(4 * k), hi = char(4 * k + 2);
    const __m128i l =
        _mm_setr_epi8(lo, char(lo + 1), lo, char(lo + 1), lo, char(lo + 1), lo, char(lo + 1), lo,
                      char(lo + 1), lo, char(lo + 1), lo, char(lo + 1), lo, char(lo + 1));
    const __m128i h =
        _mm_setr_epi8(hi, char(hi + 1), hi, char(hi + 1), hi, char(hi + 1), hi, char(hi + 1), hi,
                      char(hi + 1), hi, char(hi + 1), hi, char(hi + 1), hi, char(hi + 1));
    return _mm512_broadcast_i64x4(_mm256_set_m128i(h, l));
}

// Q6_K in column pairs: Q6_KTimesQ8_K's arithmetic (x86_tile_kernels.inc), each half of a
// register one column's, the weight codes and scales unpacked once per row for both. The
// activation codes of a pair are interleaved once per block into a small buffer that the rows
// share.
struct Q6_KTimesQ8_KColumnPairs {
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            Q6_KTimesQ8_K::template tile<R, 1>(w, ws, a, as, nb, out, os);
        } else {
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            const __m512i low4 = _mm512_set1_epi8(0x0f);
            const __m512i bits45 = _mm512_set1_epi8(0x30);
            __m512i scale_index[4];
            for (int k = 0; k < 4; ++k) scale_index[k] = int16_pair_index(k);
            for (int64_t b = 0; b < nb; ++b) {
                __m512i x[P][8];
                __m512i bsums[P];
                __m512 xd[P];
                q8k_pairs<P, C>(a, as, b, x, bsums, xd);
                for (int r = 0; r < R; ++r) {
                    const BlockQ6_K* wb = block_at<BlockQ6_K>(w, ws, r, b);
                    prefetch_next_tile(wb, R * ws);
                    __m512i q[8];
                    __m512i scale[8];
                    for (int h = 0; h < 2; ++h) {
                        const __m512i ql0 = _mm512_broadcast_i64x4(load32(wb->ql + 64 * h));
                        const __m512i ql1 = _mm512_broadcast_i64x4(load32(wb->ql + 64 * h + 32));
                        const __m512i qh = _mm512_broadcast_i64x4(load32(wb->qh + 32 * h));
                        q[4 * h + 0] =
                            _mm512_or_si512(_mm512_and_si512(ql0, low4),
                                            _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45));
                        q[4 * h + 1] =
                            _mm512_or_si512(_mm512_and_si512(ql1, low4),
                                            _mm512_and_si512(_mm512_slli_epi16(qh, 2), bits45));
                        q[4 * h + 2] =
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), low4),
                                            _mm512_and_si512(qh, bits45));
                        q[4 * h + 3] =
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), low4),
                                            _mm512_and_si512(_mm512_srli_epi16(qh, 2), bits45));
                        const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb->scales + 8 * h))));
                        for (int k = 0; k < 4; ++k) {
                            scale[4 * h + k] = _mm512_shuffle_epi8(sc16, scale_index[k]);
                        }
                    }
                    const __m512i all_scales =  // sc0..sc15 as int16, in both halves
                        _mm512_broadcast_i64x4(_mm256_cvtepi8_epi16(load16(wb->scales)));
                    const __m512 wd = _mm512_set1_ps(half_to_float(wb->d));
                    for (int p = 0; p < P; ++p) {
                        __m512i sum = _mm512_setzero_si512();
                        for (int k = 0; k < 8; ++k) {
                            const __m512i prod = _mm512_maddubs_epi16(q[k], x[p][k]);
                            sum = _mm512_dpwssd_epi32(sum, prod, scale[k]);
                        }
                        const __m512i offset = _mm512_madd_epi16(bsums[p], all_scales);
                        sum = _mm512_sub_epi32(sum, _mm512_slli_epi32(offset, 5));
                        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[p]),
                                                    _mm512_cvtepi32_ps(sum), acc[r][p]);
                    }
                }
            }
            store_pair_tile<R, C>(acc, out, os);
        }
    }
};

// Q4_1 / Q5_1 in column pairs: AffineTimesQ8_1's arithmetic (x86_tile_kernels.inc) per half; the
// minimum terms stay per column in scalar code, as there.
template <class Codes>
struct AffineTimesQ8_1ColumnPairs {
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            AffineTimesQ8_1<Codes>::template tile<R, 1>(w, ws, a, as, nb, out, os);
        } else {
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            float min_sum[R][C] = {};
            for (int64_t b = 0; b < nb; ++b) {
                __m512i x[P];
                __m512 xd[P];
                float xs[C];
                for (int p = 0; p < P; ++p) {
                    const BlockQ8_1 *low, *high;
                    pair_blocks<BlockQ8_1, C>(a, as, p, b, low, high);
                    x[p] = load_halves(low->qs, high->qs);
                    xd[p] = float_halves(_mm256_set1_ps(half_to_float(low->d)),
                                         _mm256_set1_ps(half_to_float(high->d)));
                }
                for (int c = 0; c < C; ++c)
                    xs[c] = half_to_float(block_at<BlockQ8_1>(a, as, c, b)->s);
                for (int r = 0; r < R; ++r) {
                    const auto* wb = block_at<typename Codes::Block>(w, ws, r, b);
                    prefetch_next_tile(wb, R * ws);
                    const __m512i wq = _mm512_broadcast_i64x4(Codes::codes(wb));
                    const float wm = half_to_float(wb->m);
                    const __m512 wd = _mm512_set1_ps(half_to_float(wb->d));
                    for (int p = 0; p < P; ++p) {
                        const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, x[p]);
                        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[p]),
                                                    _mm512_cvtepi32_ps(sum), acc[r][p]);
                    }
                    for (int c = 0; c < C; ++c) min_sum[r][c] += wm * xs[c];
                }
            }
            store_pair_tile<R, C>(acc, out, os);
            for (int r = 0; r < R; ++r) {
                for (int c = 0; c < C; ++c) out[size_t(c) * os + size_t(r)] += min_sum[r][c];
            }
        }
    }
};

// Q2_K / Q3_K in column pairs: K2TimesQ8_K's arithmetic (x86_tile_kernels.inc) per half.
template <bool kThreeBit>
struct K2TimesQ8_KColumnPairs {
    using Block = std::conditional_t<kThreeBit, BlockQ3_K, BlockQ2_K>;

    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            K2TimesQ8_K<kThreeBit>::template tile<R, 1>(w, ws, a, as, nb, out, os);
        } else {
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            const __m512i three = _mm512_set1_epi8(3);
            __m512i scale_index[4];
            for (int k = 0; k < 4; ++k) scale_index[k] = int16_pair_index(k);
            for (int64_t b = 0; b < nb; ++b) {
                __m512i x[P][8];
                __m512i bsums[P];
                __m512 xd[P];
                q8k_pairs<P, C>(a, as, b, x, bsums, xd);
                for (int r = 0; r < R; ++r) {
                    const Block* wb = block_at<Block>(w, ws, r, b);
                    prefetch_next_tile(wb, R * ws);
                    __m512i q[8];
                    __m128i scales;   // 16 signed bytes: the sub-block multipliers
                    __m256i offsets;  // Q2_K: the 16 minima; Q3_K: the multipliers; int16
                    for (int k = 0; k < 8; ++k) {
                        const __m512i bytes = _mm512_broadcast_i64x4(load32(wb->qs + 32 * (k / 4)));
                        q[k] = _mm512_and_si512(_mm512_srli_epi16(bytes, 2 * (k % 4)), three);
                    }
                    if constexpr (kThreeBit) {
                        scales = q3k_scales_minus_32(wb->scales);
                        offsets = _mm256_cvtepi8_epi16(scales);
                        const __m512i hmask = _mm512_broadcast_i64x4(load32(wb->hmask));
                        const __m512i bit2 = _mm512_set1_epi8(4);
                        for (int k = 0; k < 8; ++k) {
                            const __m512i h = k >= 2 ? _mm512_srli_epi16(hmask, k - 2)
                                                     : _mm512_slli_epi16(hmask, 2 - k);
                            q[k] = _mm512_or_si512(q[k], _mm512_and_si512(h, bit2));
                        }
                    } else {
                        const __m128i packed = load16(wb->scales);
                        const __m128i low4 = _mm_set1_epi8(0x0f);
                        scales = _mm_and_si128(packed, low4);
                        offsets =
                            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
                    }
                    const __m512i lo = _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(scales));
                    const __m512i hi =
                        _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(_mm_srli_si128(scales, 8)));
                    __m512i scale[8];
                    for (int k = 0; k < 8; ++k) {
                        scale[k] = _mm512_shuffle_epi8(k < 4 ? lo : hi, scale_index[k % 4]);
                    }
                    const __m512i offsets2 = _mm512_broadcast_i64x4(offsets);
                    const __m512 wd = _mm512_set1_ps(half_to_float(wb->d));
                    __m512 wdmin = _mm512_setzero_ps();
                    if constexpr (!kThreeBit) wdmin = _mm512_set1_ps(half_to_float(wb->dmin));
                    for (int p = 0; p < P; ++p) {
                        __m512i sum = _mm512_setzero_si512();
                        for (int k = 0; k < 8; ++k) {
                            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(q[k], x[p][k]),
                                                      scale[k]);
                        }
                        const __m512i off = _mm512_madd_epi16(bsums[p], offsets2);
                        if constexpr (kThreeBit) {
                            sum = _mm512_sub_epi32(sum, _mm512_slli_epi32(off, 2));
                        } else {
                            acc[r][p] = _mm512_fnmadd_ps(_mm512_mul_ps(wdmin, xd[p]),
                                                         _mm512_cvtepi32_ps(off), acc[r][p]);
                        }
                        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[p]),
                                                    _mm512_cvtepi32_ps(sum), acc[r][p]);
                    }
                }
            }
            store_pair_tile<R, C>(acc, out, os);
        }
    }
};

// IQ4_XS in column pairs: IQ4_XSTimesQ8_K's arithmetic (x86_tile_kernels.inc) per half, its
// signed codes through |q| and x negated where q < 0 (no vpsignb in AVX-512; where q = 0 the
// product is 0 either way).
struct IQ4_XSTimesQ8_KColumnPairs {
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            IQ4_XSTimesQ8_K::template tile<R, 1>(w, ws, a, as, nb, out, os);
        } else {
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            for (int64_t b = 0; b < nb; ++b) {
                __m512i x[P][8];
                __m512i bsums[P];
                __m512 xd[P];
                q8k_pairs<P, C>(a, as, b, x, bsums, xd);
                for (int r = 0; r < R; ++r) {
                    const BlockIQ4_XS* wb = block_at<BlockIQ4_XS>(w, ws, r, b);
                    prefetch_next_tile(wb, R * ws);
                    __m512i q_abs[8];
                    __mmask64 negative[8];
                    __m512i scale[8];
                    for (int s = 0; s < 8; ++s) {
                        const __m512i q = _mm512_broadcast_i64x4(
                            lookup_16(quant::kIq4nlValues, nibbles_32(wb->qs + 16 * s)));
                        q_abs[s] = _mm512_abs_epi8(q);
                        negative[s] = _mm512_movepi8_mask(q);
                        const int ls = ((wb->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) |
                                       (((wb->scales_h >> (2 * s)) & 3) << 4);
                        scale[s] = _mm512_set1_epi16(int16_t(ls - 32));
                    }
                    const __m512 wd = _mm512_set1_ps(half_to_float(wb->d));
                    for (int p = 0; p < P; ++p) {
                        __m512i sum = _mm512_setzero_si512();
                        for (int s = 0; s < 8; ++s) {
                            const __m512i signed_x = _mm512_mask_sub_epi8(
                                x[p][s], negative[s], _mm512_setzero_si512(), x[p][s]);
                            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(q_abs[s], signed_x),
                                                      scale[s]);
                        }
                        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[p]),
                                                    _mm512_cvtepi32_ps(sum), acc[r][p]);
                    }
                }
            }
            store_pair_tile<R, C>(acc, out, os);
        }
    }
};

// ---- float weights in column pairs: F32, F16, BF16 -----------------------------------------
//
// FloatDot (x86_tile_kernels.inc) per half: element i of a column in lane i % 8 of its half, the
// same fused multiply-adds, the tail zero-padded into the same lanes, the same horizontal sums.

// 8 elements as floats in both halves of a register, and 8 of each of two rows in one half each.
inline __m512 float8_both(const float* p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}
inline __m512 float8_both(const uint16_t* p, F16Elements) {
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(load16(p)));
}
inline __m512 float8_pair(const uint16_t* a, const uint16_t* b, F16Elements) {
    return _mm512_cvtph_ps(_mm256_set_m128i(load16(b), load16(a)));
}
inline __m512 float8_both(const uint16_t* p, BF16Elements) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_broadcastsi128_si256(load16(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
inline __m512 float8_pair(const uint16_t* a, const uint16_t* b, BF16Elements) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_set_m128i(load16(b), load16(a)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
inline __m512 float8_both(const float* p, F32Elements) {
    return float8_both(p);
}
inline __m512 float8_pair(const float* a, const float* b, F32Elements) {
    return float_halves(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
}

template <class Elements>
struct FloatDotColumnPairs {
    using E = typename Elements::Element;
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t n,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            FloatDot<Elements>::template tile<R, 1>(w, ws, a, as, n, out, os);
        } else {
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            auto wrow = [&](int r) { return reinterpret_cast<const E*>(w + size_t(r) * ws); };
            auto arow = [&](int c) {
                return reinterpret_cast<const E*>(a + size_t(std::min(c, C - 1)) * as);
            };
            const int64_t n8 = n / 8 * 8;
            for (int64_t i = 0; i < n8; i += 8) {
                __m512 x[P];
                for (int p = 0; p < P; ++p) {
                    x[p] = float8_pair(arow(2 * p) + i, arow(2 * p + 1) + i, Elements{});
                }
                for (int r = 0; r < R; ++r) {
                    const __m512 wv = float8_both(wrow(r) + i, Elements{});
                    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(wv, x[p], acc[r][p]);
                }
            }
            if (n8 < n) {
                alignas(32) float tail[2][8] = {};
                __m512 x[P];
                for (int p = 0; p < P; ++p) {
                    for (int h = 0; h < 2; ++h) {
                        for (int64_t i = n8; i < n; ++i) {
                            tail[h][i - n8] = Elements::load1(arow(2 * p + h) + i);
                        }
                    }
                    x[p] = float_halves(_mm256_load_ps(tail[0]), _mm256_load_ps(tail[1]));
                }
                for (int r = 0; r < R; ++r) {
                    for (int64_t i = n8; i < n; ++i) tail[0][i - n8] = Elements::load1(wrow(r) + i);
                    const __m512 wv = float8_both(tail[0]);
                    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(wv, x[p], acc[r][p]);
                }
            }
            store_pair_tile<R, C>(acc, out, os);
        }
    }
};

// ---- Q8_0 with weight rows in lanes -----------------------------------------------------------
//
// Sixteen weight rows at a time, one per 32-bit lane: a block of the 16 rows is transposed into 8
// registers, register k holding codes 4k..4k+3 of every row, made unsigned (u = w + 128). One
// vpdpbusd with 4 activation codes broadcast from memory then adds 4 products to each row, and 8
// of them give every row's whole integer dot product of the block, with no horizontal sum: per
// block and column 8 dot instructions and 3 for the scale, for 512 products (the column-pair
// kernel spends 4 on 64). The offset's correction (Σ u x = Σ w x + 128 Σ x) and the float scale
// of each activation block come with the activation row (Q8_0Side), computed once per row.
//
// A (row, column) sees the same operations in the same order in every tile: acc = fma(float(Σ w
// x), dw * dx, acc), block after block; so a column gets the same bits alone as in a batch. Up to
// 8 columns use the transposed block straight from registers; more go 8 at a time over the 16
// rows' transposed blocks, kept for the tile in a per-thread buffer.

// Lane j holds row kLaneRow[j] (the order the transposition leaves).
constexpr int kLaneRows = 16;
constexpr int kLaneRow[kLaneRows] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
constexpr int kLaneColumns = 8;       // columns whose accumulators stay in registers
constexpr int kLaneTileColumns = 64;  // columns per tile: the transposition shared by them

// The 32 bytes at rows[i] + offset of 16 rows, transposed: register k holds bytes 4k..4k+3 of
// every row, lane j those of row kLaneRow[j].
inline void transpose_32_bytes(const uint8_t* const (&rows)[kLaneRows], size_t offset,
                               __m512i (&z)[8]) {
    __m512i a[8];
    for (int i = 0; i < 8; ++i) a[i] = load_halves(rows[i] + offset, rows[i + 8] + offset);
    // 128-bit lanes of a[i]: dwords e0-e3 and e4-e7 of row i, then of row i + 8. Two unpack
    // steps gather one dword of 4 rows per 128-bit lane...
    __m512i u[2][4];
    for (int g = 0; g < 2; ++g) {
        const __m512i* q = a + 4 * g;
        const __m512i lo01 = _mm512_unpacklo_epi32(q[0], q[1]);
        const __m512i hi01 = _mm512_unpackhi_epi32(q[0], q[1]);
        const __m512i lo23 = _mm512_unpacklo_epi32(q[2], q[3]);
        const __m512i hi23 = _mm512_unpackhi_epi32(q[2], q[3]);
        u[g][0] = _mm512_unpacklo_epi64(lo01, lo23);  // e0 | e4 of rows 4g.. (and + 8)
        u[g][1] = _mm512_unpackhi_epi64(lo01, lo23);  // e1 | e5
        u[g][2] = _mm512_unpacklo_epi64(hi01, hi23);  // e2 | e6
        u[g][3] = _mm512_unpackhi_epi64(hi01, hi23);  // e3 | e7
    }
    // ... and one 128-bit shuffle puts each dword's 16 rows together (in kLaneRow order).
    for (int k = 0; k < 4; ++k) {
        z[k] = _mm512_shuffle_i32x4(u[0][k], u[1][k], _MM_SHUFFLE(2, 0, 2, 0));
        z[k + 4] = _mm512_shuffle_i32x4(u[0][k], u[1][k], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

// 16 row streams, too many for the hardware prefetchers: `bytes` of each row from byte `at` on
// (past the row's end, from the same row of the next tile).
inline void prefetch_rows(const uint8_t* const (&rows)[kLaneRows], size_t ws, size_t row_bytes,
                          size_t at, size_t bytes) {
    const size_t from = at < row_bytes ? at : kLaneRows * ws + (at - row_bytes);
    for (int i = 0; i < kLaneRows; ++i) {
        for (size_t line = 0; line < bytes; line += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(rows[i]) + from + line, _MM_HINT_T0);
        }
    }
}

// Columns [0, C) of a tile's accumulators (lane j: row kLaneRow[j]) into out (column c at
// out + c os), rows below n_rows.
template <int C, int N>
inline void store_lanes(const __m512 (&acc)[N], int n_rows, float* out, size_t os) {
    for (int c = 0; c < C; ++c) {
        alignas(64) float lanes[kLaneRows];
        _mm512_store_ps(lanes, acc[c]);
        for (int j = 0; j < kLaneRows; ++j) {
            if (kLaneRow[j] < n_rows) out[size_t(c) * os + size_t(kLaneRow[j])] = lanes[j];
        }
    }
}

// The fp16 at rows[kLaneRow[j]] + offset in lane j, as floats. (Sixteen scalar loads through
// memory: a vpgatherdd of the same words took 40% of a Q8_0 decode tile's time.)
inline __m512 fp16_lanes(const uint8_t* const (&rows)[kLaneRows], size_t offset) {
    alignas(32) uint16_t h[kLaneRows];
    for (int j = 0; j < kLaneRows; ++j) std::memcpy(&h[j], rows[kLaneRow[j]] + offset, 2);
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// The 16 bytes at rows[i] + offset of 16 rows as dwords in lanes: register q holds bytes
// 4q..4q+3 of every row (lane j: row kLaneRow[j]).
inline void transpose_16_bytes(const uint8_t* const (&rows)[kLaneRows], size_t offset,
                               __m512i (&out)[4]) {
    __m512i h[4];
    for (int i = 0; i < 4; ++i) {
        __m512i v = _mm512_castsi128_si512(load16(rows[i] + offset));
        v = _mm512_inserti32x4(v, load16(rows[8 + i] + offset), 1);
        v = _mm512_inserti32x4(v, load16(rows[4 + i] + offset), 2);
        h[i] = _mm512_inserti32x4(v, load16(rows[12 + i] + offset), 3);
    }
    const __m512i lo01 = _mm512_unpacklo_epi32(h[0], h[1]);
    const __m512i hi01 = _mm512_unpackhi_epi32(h[0], h[1]);
    const __m512i lo23 = _mm512_unpacklo_epi32(h[2], h[3]);
    const __m512i hi23 = _mm512_unpackhi_epi32(h[2], h[3]);
    out[0] = _mm512_unpacklo_epi64(lo01, lo23);
    out[1] = _mm512_unpackhi_epi64(lo01, lo23);
    out[2] = _mm512_unpacklo_epi64(hi01, hi23);
    out[3] = _mm512_unpackhi_epi64(hi01, hi23);
}

// Go<C>::run(args...) for the run-time column count c in [1, N]: the tile kernels' sums stay in
// registers only for a compile-time count.
template <template <int> class Go, int N, class... Args>
inline void by_columns(int c, const Args&... args) {
    if constexpr (N > 1) {
        if (c < N) return by_columns<Go, N - 1>(c, args...);
    }
    Go<N>::run(args...);
}

// A 64-byte register's worth of memory, for the per-thread buffers of transposed blocks.
struct alignas(64) Line {
    uint8_t bytes[64];
};

struct Q8_0Lanes {
    // The 16 rows' block b, transposed (register k: codes 4k..4k+3 of each lane's row, + 128).
    static void transpose(const uint8_t* const (&rows)[kLaneRows], int64_t b, __m512i (&z)[8]) {
        transpose_32_bytes(rows, size_t(b) * sizeof(BlockQ8_0) + 2, z);
        for (auto& v : z) v = _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));
    }
    // The 16 rows' scales of block b in lane order, converted from fp16. (Sixteen scalar loads
    // through memory: a vpgatherdd of the same words took 40% of a decode tile's time.)
    static __m512 scales(const uint8_t* const (&rows)[kLaneRows], int64_t b) {
        return fp16_lanes(rows, size_t(b) * sizeof(BlockQ8_0));
    }
    // Every other block, each row's line 8 blocks on (272 bytes; 4-12 blocks measured alike).
    static void prefetch_ahead(const uint8_t* const (&rows)[kLaneRows], size_t ws, int64_t nb,
                               int64_t b) {
        constexpr int64_t kPrefetchBlocks = 8;
        prefetch_rows(rows, ws, size_t(nb) * sizeof(BlockQ8_0),
                      size_t(b + kPrefetchBlocks) * sizeof(BlockQ8_0), 1);
    }
    // acc[c] += the block's products of the C columns at `a` (their stride as, sides after nb
    // blocks), for the 16 rows in z with scales wd.
    template <int C>
    static void columns(const __m512i (&z)[8], __m512 wd, const uint8_t* a, size_t as, int64_t nb,
                        int64_t b, __m512 (&acc)[kLaneColumns]) {
        for (int c = 0; c < C; ++c) {
            const uint8_t* row = a + size_t(c) * as;
            const BlockQ8_0* x = block_at<BlockQ8_0>(row, 0, 0, b);
            Q8_0Side side;
            std::memcpy(&side, row + q8_0_sides_offset(nb) + size_t(b) * sizeof(Q8_0Side),
                        sizeof side);
            __m512i sum = _mm512_set1_epi32(side.offset_sum);
            for (int k = 0; k < 8; ++k) {
                int32_t four;
                std::memcpy(&four, x->qs + 4 * k, 4);
                sum = _mm512_dpbusd_epi32(sum, z[k], _mm512_set1_epi32(four));
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                                     _mm512_mul_ps(wd, _mm512_set1_ps(side.d)), acc[c]);
        }
    }

    // Columns [0, C) with the blocks transposed as they are used.
    template <int C>
    static void direct(const uint8_t* const (&rows)[kLaneRows], size_t ws, int n_rows,
                       const uint8_t* a, size_t as, int64_t nb, float* out, size_t os) {
        __m512 acc[kLaneColumns];
        for (auto& v : acc) v = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            if ((b & 1) == 0) prefetch_ahead(rows, ws, nb, b);
            __m512i z[8];
            transpose(rows, b, z);
            columns<C>(z, scales(rows, b), a, as, nb, b, acc);
        }
        store_lanes<C>(acc, n_rows, out, os);
    }
    // Columns [0, C) over the transposed blocks in `kept` (8 codes registers and the scales
    // per block).
    template <int C>
    static void from_kept(const Line* kept, int n_rows, const uint8_t* a, size_t as, int64_t nb,
                          float* out, size_t os) {
        __m512 acc[kLaneColumns];
        for (auto& v : acc) v = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const Line* k = kept + 9 * b;
            __m512i z[8];
            for (int i = 0; i < 8; ++i) z[i] = _mm512_load_si512(k[i].bytes);
            columns<C>(z, _mm512_load_ps(k[8].bytes), a, as, nb, b, acc);
        }
        store_lanes<C>(acc, n_rows, out, os);
    }

    template <int C>
    struct Direct {
        static void run(const uint8_t* const (&rows)[kLaneRows], size_t ws, int n_rows,
                        const uint8_t* a, size_t as, int64_t nb, float* out, size_t os) {
            direct<C>(rows, ws, n_rows, a, as, nb, out, os);
        }
    };
    template <int C>
    struct Kept {
        static void run(const Line* kept, int n_rows, const uint8_t* a, size_t as, int64_t nb,
                        float* out, size_t os) {
            from_kept<C>(kept, n_rows, a, as, nb, out, os);
        }
    };

    static void tile(const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as,
                     int n_cols, int64_t nb, float* out, size_t os) {
        const uint8_t* rows[kLaneRows];
        for (int i = 0; i < kLaneRows; ++i) rows[i] = w + size_t(std::min(i, n_rows - 1)) * ws;
        if (n_cols <= kLaneColumns) {
            return by_columns<Direct, kLaneColumns>(n_cols, rows, ws, n_rows, a, as, nb, out, os);
        }
        // The transposed blocks once, for every group of columns.
        static thread_local std::vector<Line> kept_buffer;
        if (kept_buffer.size() < size_t(9 * nb)) kept_buffer.resize(size_t(9 * nb));
        Line* kept = kept_buffer.data();
        for (int64_t b = 0; b < nb; ++b) {
            __m512i z[8];
            transpose(rows, b, z);
            for (int k = 0; k < 8; ++k) _mm512_store_si512(kept[9 * b + k].bytes, z[k]);
            _mm512_store_ps(kept[9 * b + 8].bytes, scales(rows, b));
        }
        for (int c = 0; c < n_cols; c += kLaneColumns) {
            by_columns<Kept, kLaneColumns>(std::min(kLaneColumns, n_cols - c), kept, n_rows,
                                           a + size_t(c) * as, as, nb, out + size_t(c) * os, os);
        }
    }
};

// ---- float weights with short rows in lanes: attention's keys --------------------------------
//
// A prompt's scores are products of rows of 64-256 elements (a head's keys) with a hundred or
// more query columns. FloatDotColumnPairs spends as much there on horizontal sums (two per
// column pair and row, every 64 products) as on the products. Here 16 rows sit in the lanes,
// transposed once per tile, and a column keeps FloatDot's eight lane sums as eight registers:
// register l sums elements l, l + 8, ... of all 16 rows with the same fused multiply-adds, and
// hsum's tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) is then done across registers.
// So every (row, column) gets FloatDotColumnPairs' bits, and the choice between the two kernels
// (few columns or long rows go to the pairs) changes no result.
constexpr int64_t kFloatLaneMaxElements = 256;  // 16 transposed rows: at most 16 KiB, in L1
constexpr int kFloatLaneMinColumns = 8;         // fewer: the transposition costs more than it saves

// out[i][j] = in[j][i] for 16 registers of 16 floats.
inline void transpose_16x16(__m512 (&r)[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + k]: per 128-bit lane q, element 4q + k of rows 4g .. 4g + 3.
    for (int g = 0; g < 4; ++g) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    for (int k = 0; k < 4; ++k) {
        const __m512 even_lo = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
        const __m512 even_hi = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
        const __m512 odd_lo = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd);
        const __m512 odd_hi = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
        r[k] = _mm512_shuffle_f32x4(even_lo, even_hi, 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(even_lo, even_hi, 0xdd);
        r[4 + k] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0x88);
        r[12 + k] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0xdd);
    }
}

// n elements as floats at out, zero past n up to `padded`.
template <class Elements>
inline void widen_row(const typename Elements::Element* p, int64_t n, int64_t padded, float* out) {
    int64_t i = 0;
    if constexpr (std::is_same_v<Elements, F16Elements>) {
        for (; i + 16 <= n; i += 16) {
            _mm512_storeu_ps(
                out + i,
                _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i))));
        }
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, Elements::load8(p + i));
    for (; i < n; ++i) out[i] = Elements::load1(p + i);
    for (; i < padded; ++i) out[i] = 0.0f;
}

template <class Elements>
struct FloatLanes {
    using E = typename Elements::Element;
    using Pairs = FloatDotColumnPairs<Elements>;
    static constexpr int kColumns = 3;  // per pass: 24 accumulators and the transposed element

    // FloatDot's lane sums of columns x[0..C) against the transposed rows t (element e of the
    // 16 rows at t + 16 e), over `steps` steps of 8, stored to out + c os for rows below n_rows.
    template <int C>
    static void columns(const float* t, int64_t steps, const float* const (&x)[kColumns],
                        int n_rows, float* out, size_t os) {
        __m512 acc[C][8];
        for (auto& column : acc) {
            for (auto& v : column) v = _mm512_setzero_ps();
        }
        for (int64_t s = 0; s < steps; ++s) {
            for (int l = 0; l < 8; ++l) {
                __m512 rows = _mm512_load_ps(t + 16 * (8 * s + l));
                // Loaded once into a register for the C columns, whose values then come as
                // broadcast memory operands (left alone, the compiler folds the rows into each
                // multiply-add instead: two loads per product).
                asm("" : "+v"(rows));
                for (int c = 0; c < C; ++c) {
                    acc[c][l] = _mm512_fmadd_ps(rows, _mm512_set1_ps(x[c][8 * s + l]), acc[c][l]);
                }
            }
        }
        const __mmask16 mask = __mmask16((1u << n_rows) - 1);
        for (int c = 0; c < C; ++c) {
            const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][4]),
                                                           _mm512_add_ps(acc[c][2], acc[c][6])),
                                             _mm512_add_ps(_mm512_add_ps(acc[c][1], acc[c][5]),
                                                           _mm512_add_ps(acc[c][3], acc[c][7])));
            _mm512_mask_storeu_ps(out + size_t(c) * os, mask, sum);
        }
    }

    template <int C>
    struct Columns {
        static void run(const float* t, int64_t steps, const float* const (&x)[kColumns],
                        int n_rows, float* out, size_t os) {
            columns<C>(t, steps, x, n_rows, out, os);
        }
    };

    // The pairs kernel over the tile, 4 rows and 8 columns at a time.
    static void by_pairs(const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as,
                         int n_cols, int64_t n, float* out, size_t os) {
        for (int c = 0; c < n_cols; c += kPairTileCols) {
            for (int r = 0; r < n_rows; r += kTileRows) {
                tile_dispatch<Pairs, kTileRows, kPairTileCols>(
                    w + size_t(r) * ws, ws, std::min(kTileRows, n_rows - r), a + size_t(c) * as, as,
                    std::min(kPairTileCols, n_cols - c), n, out + size_t(c) * os + size_t(r), os);
            }
        }
    }

    static void tile(const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as,
                     int n_cols, int64_t n, float* out, size_t os) {
        if (n > kFloatLaneMaxElements || n_cols < kFloatLaneMinColumns) {
            return by_pairs(w, ws, n_rows, a, as, n_cols, n, out, os);
        }
        const int64_t padded = (n + 15) / 16 * 16;
        alignas(64) float by_row[kLaneRows * kFloatLaneMaxElements];
        for (int i = 0; i < kLaneRows; ++i) {
            const auto* row = reinterpret_cast<const E*>(w + size_t(std::min(i, n_rows - 1)) * ws);
            widen_row<Elements>(row, n, padded, by_row + i * padded);
        }
        alignas(64) float t[kFloatLaneMaxElements * kLaneRows];  // element e of row i: t[16 e + i]
        for (int64_t e0 = 0; e0 < padded; e0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(by_row + i * padded + e0);
            transpose_16x16(r);
            for (int i = 0; i < 16; ++i) _mm512_store_ps(t + (e0 + i) * 16, r[i]);
        }
        alignas(64) float x[kColumns][kFloatLaneMaxElements];
        const float* const xs[kColumns] = {x[0], x[1], x[2]};
        const int64_t steps = (n + 7) / 8;  // the last zero-padded, as FloatDot's tail
        for (int c = 0; c < n_cols; c += kColumns) {
            const int count = std::min(kColumns, n_cols - c);
            for (int k = 0; k < count; ++k) {
                widen_row<Elements>(reinterpret_cast<const E*>(a + size_t(c + k) * as), n, padded,
                                    x[k]);
            }
            by_columns<Columns, kColumns>(count, t, steps, xs, n_rows, out + size_t(c) * os, os);
        }
    }
};

// ---- Q4_K with weight rows in lanes ------------------------------------------------------------
//
// Q8_0Lanes' layout for Q4_K: per super-block, the 16 rows' codes transposed and split into
// nibbles (register k of sub-block j: elements 4k..4k+3 of each row, 0..15), their six-bit scales
// and minima decoded into lanes, d and dmin as floats: a Prepared block, made once per tile and
// block. A column's block is then, per row: sumi = Σ_j sc_j (Σ_sub-block j q x) exactly (8
// vpdpbusd and one vpmulld per sub-block), summ = Σ_j m_j (x's sum over sub-block j) (4
// vpdpwssd on pairs of minima), and acc = fma(float(sumi), d dx, acc), then acc -= float(summ)
// dmin dx: the same operations for a column in every tile. Q5_K is the same with a fifth bit
// (codes 0..31), taken from its transposed qh.
template <class Block>
struct K4Lanes {
    static constexpr bool kFifth = std::is_same_v<Block, BlockQ5_K>;
    static constexpr int kColumns = 4;  // columns computed together (their sums in registers)
    struct Prepared {
        Line lo[4][8], hi[4][8];  // sub-blocks 2i and 2i + 1: register k, elements 4k..4k+3
        Line sc[8];               // int32 scales
        Line mins[4];             // int16 pairs: minima 2t and 2t + 1
        Line d, dmin;             // floats
    };

    // Every lane of v shifted right by `shift` bits and masked.
    static __m512i bits(__m512i v, int shift, int mask) {
        return _mm512_and_si512(_mm512_srli_epi32(v, unsigned(shift)), _mm512_set1_epi32(mask));
    }

    // A block's scales, minima and d, dmin in lanes.
    struct Heads {
        __m512i sc[8], mins[4];
        __m512 d, dmin;
    };
    static void heads(const uint8_t* const (&rows)[kLaneRows], size_t at, Heads& out) {
        // The 16-byte heads (d, dmin, 12 bytes of scales) as dwords per lane.
        __m512i head[4];
        transpose_16_bytes(rows, at, head);
        const __m512i dd = head[0];  // d | dmin << 16
        const __m512i q0 = head[1];  // scales bytes 0-3
        const __m512i q4 = head[2];  // 4-7
        const __m512i q8 = head[3];  // 8-11
        out.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        out.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        __m512i m[8];
        for (int j = 0; j < 4; ++j) {
            out.sc[j] = bits(q0, 8 * j, 63);
            m[j] = bits(q4, 8 * j, 63);
            const __m512i top_sc = _mm512_slli_epi32(bits(q0, 8 * j + 6, 3), 4);
            const __m512i top_m = _mm512_slli_epi32(bits(q4, 8 * j + 6, 3), 4);
            out.sc[j + 4] = _mm512_or_si512(bits(q8, 8 * j, 15), top_sc);
            m[j + 4] = _mm512_or_si512(bits(q8, 8 * j + 4, 15), top_m);
        }
        for (int t = 0; t < 4; ++t) {
            out.mins[t] = _mm512_or_si512(m[2 * t], _mm512_slli_epi32(m[2 * t + 1], 16));
        }
    }
    // Bit `bit` of every byte of v moved to bit 4, the rest cleared (16-bit shifts: what crosses
    // from the other byte of a pair lands below bit 4 or above it, and is masked).
    static __m512i bit_to_4(__m512i v, int bit) {
        const __m512i moved = bit <= 4 ? _mm512_slli_epi16(v, unsigned(4 - bit))
                                       : _mm512_srli_epi16(v, unsigned(bit - 4));
        return _mm512_and_si512(moved, _mm512_set1_epi8(0x10));
    }
    // Q5_K's qh of the 16 rows transposed (register k: qh[4k..4k+3] of each row); nothing for
    // Q4_K.
    static void fifth_bits(const uint8_t* const (&rows)[kLaneRows], size_t at, __m512i (&qh)[8]) {
        if constexpr (kFifth) transpose_32_bytes(rows, at + offsetof(BlockQ5_K, qh), qh);
    }
    // Sub-blocks 2i and 2i + 1 of the 16 rows: register k, elements 4k..4k+3 (codes 0..15, with
    // the fifth bit 0..31).
    static void codes(const uint8_t* const (&rows)[kLaneRows], size_t at, int i,
                      const __m512i (&qh)[8], __m512i (&lo)[8], __m512i (&hi)[8]) {
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        __m512i z[8];
        transpose_32_bytes(rows, at + offsetof(Block, qs) + 32 * size_t(i), z);
        for (int k = 0; k < 8; ++k) {
            lo[k] = _mm512_and_si512(z[k], low4);
            hi[k] = _mm512_and_si512(_mm512_srli_epi16(z[k], 4), low4);
            if constexpr (kFifth) {
                lo[k] = _mm512_or_si512(lo[k], bit_to_4(qh[k], 2 * i));
                hi[k] = _mm512_or_si512(hi[k], bit_to_4(qh[k], 2 * i + 1));
            }
        }
    }
    static void prepare(const uint8_t* const (&rows)[kLaneRows], int64_t b, Prepared& p) {
        const size_t at = size_t(b) * sizeof(Block);
        Heads h;
        heads(rows, at, h);
        for (int j = 0; j < 8; ++j) _mm512_store_si512(p.sc[j].bytes, h.sc[j]);
        for (int t = 0; t < 4; ++t) _mm512_store_si512(p.mins[t].bytes, h.mins[t]);
        _mm512_store_ps(p.d.bytes, h.d);
        _mm512_store_ps(p.dmin.bytes, h.dmin);
        __m512i qh[8];
        fifth_bits(rows, at, qh);
        for (int i = 0; i < 4; ++i) {
            __m512i lo[8], hi[8];
            codes(rows, at, i, qh, lo, hi);
            for (int k = 0; k < 8; ++k) {
                _mm512_store_si512(p.lo[i][k].bytes, lo[k]);
                _mm512_store_si512(p.hi[i][k].bytes, hi[k]);
            }
        }
    }

    // Four activation codes at q in every lane.
    static __m512i four(const int8_t* q) {
        int32_t v;
        std::memcpy(&v, q, 4);
        return _mm512_set1_epi32(v);
    }

    // acc[c] += the block's products of the C columns at `a` (stride as).
    template <int C>
    static void columns(const Prepared& p, const uint8_t* a, size_t as, int64_t b,
                        __m512 (&acc)[kColumns]) {
        const BlockQ8_K* x[C];
        for (int c = 0; c < C; ++c) x[c] = block_at<BlockQ8_K>(a, as, c, b);
        __m512i sumi[C];
        for (auto& v : sumi) v = _mm512_setzero_si512();
        for (int i = 0; i < 4; ++i) {
            __m512i lo[C], hi[C];
            for (int c = 0; c < C; ++c) lo[c] = hi[c] = _mm512_setzero_si512();
            for (int k = 0; k < 8; ++k) {
                const __m512i wl = _mm512_load_si512(p.lo[i][k].bytes);
                const __m512i wh = _mm512_load_si512(p.hi[i][k].bytes);
                for (int c = 0; c < C; ++c) {
                    lo[c] = _mm512_dpbusd_epi32(lo[c], wl, four(x[c]->qs + 64 * i + 4 * k));
                    hi[c] = _mm512_dpbusd_epi32(hi[c], wh, four(x[c]->qs + 64 * i + 32 + 4 * k));
                }
            }
            const __m512i sl = _mm512_load_si512(p.sc[2 * i].bytes);
            const __m512i sh = _mm512_load_si512(p.sc[2 * i + 1].bytes);
            for (int c = 0; c < C; ++c) {
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(lo[c], sl));
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(hi[c], sh));
            }
        }
        const __m512i mins[4] = {
            _mm512_load_si512(p.mins[0].bytes), _mm512_load_si512(p.mins[1].bytes),
            _mm512_load_si512(p.mins[2].bytes), _mm512_load_si512(p.mins[3].bytes)};
        const __m512 d = _mm512_load_ps(p.d.bytes), dmin = _mm512_load_ps(p.dmin.bytes);
        for (int c = 0; c < C; ++c) finish(sumi[c], mins, d, dmin, x[c], acc[c]);
    }

    // acc += the block's products of one column: sumi (Σ_j sc_j Σ q x) scaled, less the minima
    // term. The one place a product's floating-point operations happen, for every path here.
    static void finish(__m512i sumi, const __m512i (&mins)[4], __m512 d, __m512 dmin,
                       const BlockQ8_K* x, __m512& acc) {
        // The activations' sums per 32-element sub-block, as int16 pairs (|sum| <= 4096).
        int32_t pairs[4];
        for (int t = 0; t < 4; ++t) {
            const int16_t* s = x->bsums + 4 * t;
            const auto lo16 = uint16_t(int16_t(s[0] + s[1]));
            const auto hi16 = uint16_t(int16_t(s[2] + s[3]));
            pairs[t] = int32_t(uint32_t(lo16) | (uint32_t(hi16) << 16));
        }
        __m512i summ = _mm512_setzero_si512();
        for (int t = 0; t < 4; ++t) {
            summ = _mm512_dpwssd_epi32(summ, mins[t], _mm512_set1_epi32(pairs[t]));
        }
        const __m512 xd = _mm512_set1_ps(x->d);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(d, xd), acc);
        acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(dmin, xd), acc);
    }

    // columns() for C columns straight from the rows, nothing kept (decode).
    template <int C>
    static void direct_columns(const uint8_t* const (&rows)[kLaneRows], int64_t b, const uint8_t* a,
                               size_t as, __m512 (&acc)[kColumns]) {
        const size_t at = size_t(b) * sizeof(Block);
        const BlockQ8_K* x[C];
        for (int c = 0; c < C; ++c) x[c] = block_at<BlockQ8_K>(a, as, c, b);
        Heads h;
        heads(rows, at, h);
        __m512i sumi[C];
        for (auto& v : sumi) v = _mm512_setzero_si512();
        __m512i qh[8];
        fifth_bits(rows, at, qh);
        for (int i = 0; i < 4; ++i) {
            __m512i wl[8], wh[8];
            codes(rows, at, i, qh, wl, wh);
            for (int c = 0; c < C; ++c) {
                __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
                for (int k = 0; k < 8; ++k) {
                    lo = _mm512_dpbusd_epi32(lo, wl[k], four(x[c]->qs + 64 * i + 4 * k));
                    hi = _mm512_dpbusd_epi32(hi, wh[k], four(x[c]->qs + 64 * i + 32 + 4 * k));
                }
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(lo, h.sc[2 * i]));
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(hi, h.sc[2 * i + 1]));
            }
        }
        for (int c = 0; c < C; ++c) finish(sumi[c], h.mins, h.d, h.dmin, x[c], acc[c]);
    }

    // Columns [0, C) over prepared blocks (nb of them at `blocks`), or straight from the rows
    // when blocks is null.
    template <int C>
    struct Columns {
        static void run(const Prepared* blocks, const uint8_t* const (&rows)[kLaneRows], size_t ws,
                        int n_rows, const uint8_t* a, size_t as, int64_t nb, float* out,
                        size_t os) {
            __m512 acc[kColumns];
            for (auto& v : acc) v = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; ++b) {
                if (blocks) {
                    columns<C>(blocks[b], a, as, b, acc);
                } else {
                    prefetch_rows(rows, ws, size_t(nb) * sizeof(Block),
                                  size_t(b + 2) * sizeof(Block), sizeof(Block));
                    direct_columns<C>(rows, b, a, as, acc);
                }
            }
            store_lanes<C>(acc, n_rows, out, os);
        }
    };
    static void tile(const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as,
                     int n_cols, int64_t nb, float* out, size_t os) {
        const uint8_t* rows[kLaneRows];
        for (int i = 0; i < kLaneRows; ++i) rows[i] = w + size_t(std::min(i, n_rows - 1)) * ws;
        if (n_cols <= kColumns) {
            return by_columns<Columns, kColumns>(n_cols, nullptr, rows, ws, n_rows, a, as, nb, out,
                                                 os);
        }
        // The blocks prepared once, for every group of columns.
        static thread_local std::vector<Prepared> kept;
        if (kept.size() < size_t(nb)) kept.resize(size_t(nb));
        for (int64_t b = 0; b < nb; ++b) prepare(rows, b, kept[size_t(b)]);
        for (int c = 0; c < n_cols; c += kColumns) {
            by_columns<Columns, kColumns>(std::min(kColumns, n_cols - c), kept.data(), rows, ws,
                                          n_rows, a + size_t(c) * as, as, nb, out + size_t(c) * os,
                                          os);
        }
    }
};
using Q4_KLanes = K4Lanes<BlockQ4_K>;
using Q5_KLanes = K4Lanes<BlockQ5_K>;

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
