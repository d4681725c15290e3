// AVX-512 tile kernels: the shared x86 kernels (x86_tile_kernels.inc) with the VNNI dot products
// (vpdpbusd: u8 x s8 summed by 4 into int32; vpdpwssd: int16 pairs into int32), one instruction
// where AVX2 needs two or three. The data comes in 32-byte blocks, so the kernels work on 256-bit
// registers (AVX-512VL), which also avoids the frequency drop of 512-bit arithmetic on many
// cores; the 32 registers allow tiles of 4 weight rows x 4 activation columns.
// The exceptions use 512-bit registers:
// - Q4_K (below), whose layout fills them without shuffling and whose 256-bit kernel could not
//   keep up with memory: on 512-bit units (measured on AMD Zen 5) it does 1.8x the work per core.
// - Prompt batches (2+ columns) of every other format (the float ones too, which attention's
//   products use), two columns per register, each half doing the 256-bit kernel's arithmetic,
//   so that a column's bits do not depend on the batch; decode (one column) runs the 256-bit
//   kernel. 1.15x (Q5_K) to 1.6x (Q2_K) the 256-bit kernels' prompt speed on Zen 5.
// - Q8_0, with 16 weight rows in the lanes of a register (Q8_0Lanes below): no horizontal sums,
//   4x the products per instruction of the column-pair kernel; on 2 cores of an AVX-512 Xeon a
//   prompt batch of 128 runs at 2.2x the column pairs' GFLOP/s, decode within ~10% of them.
// On CPUs that lower their clock for 512-bit integer work (Intel before Ice Lake) the margins
// are smaller; they have not been measured there.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
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

// ---- Q4_K on 512-bit registers ----------------------------------------------------------------
//
// Q4_K has the most work per weight byte of the formats decode streams (4-bit unpack, a scale and
// a minimum per 32 elements), so it gets its own kernel, on 512-bit registers and with the
// per-block bookkeeping done for the tile's four rows at once:
//
// - The 16-byte block heads (d, dmin, 12 bytes of packed scales) of the 4 rows share one
//   register: one decode of the 6-bit scales and minima, one minima term, one fp16 conversion
//   for all four.
// - 64 bytes of codes qs[64h .. 64h + 63] give two registers: their low nibbles (sub-blocks 4h
//   and 4h + 2 in the two 256-bit halves) and high nibbles (4h + 1, 4h + 3). The activations are
//   gathered into the same order once per block and shared by the rows.
// - vpdpbusd sums 4 products of a 4-bit code and an int8 activation into int32 (|sum| <= 7680),
//   so two such results pack losslessly into one register of int16, which one vpmaddwd /
//   vpdpwssd multiplies by the sub-block scales: 8 sub-blocks cost 4 vpdpbusd, 2 packs, 2
//   multiply-adds and 2 scale shuffles.
//
// The minima term, dmin dx Σ_s m_s (bsums[2s] + bsums[2s + 1]), is accumulated apart, four lanes
// per row, and subtracted at the end.

// k4_scales_and_mins (x86_tile_kernels.inc) of 4 blocks at once, from their first 16 bytes (d,
// dmin, the 12 packed bytes) in the 4 128-bit lanes, each taken as 32-bit words L0..L3:
//   sc0-3 = L1 & 0x3f            sc4-7 = (L3 & 0x0f) | ((L1 >> 2) & 0x30)
//   m0-3  = L2 & 0x3f            m4-7  = ((L3 >> 4) & 0x0f) | ((L2 >> 2) & 0x30)
// (The 256-bit kernels decode in scalar code: their vector units are the busier ones.)
inline __m512i k4_scales_and_mins_x4(__m512i heads) {
    const __m512i low = _mm512_shuffle_epi32(heads, _MM_PERM_DCDB);   // L1 L3 L2 L3
    const __m512i high = _mm512_shuffle_epi32(heads, _MM_PERM_CABA);  // -- L1 -- L2
    const __m512i low_bits = _mm512_and_si512(
        _mm512_srlv_epi32(low, _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 0, 4))),
        _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)));
    const __m512i high_bits =
        _mm512_and_si512(_mm512_srli_epi32(high, 2),
                         _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
    return _mm512_or_si512(low_bits, high_bits);
}

// A Q8_K block's sums per 32 elements, bsums[2s] + bsums[2s + 1], as 8 int16 (|sum| <= 32 * 128):
// Q4_K / Q5_K take their minima per 32-element sub-block, so the minima term is
// Σ_s m_s * pair_sum_s, one madd.
inline __m128i q8k_pair_sums(const int16_t* bsums) {
    const __m256i sums = _mm256_madd_epi16(load32(bsums), _mm256_set1_epi16(1));
    return _mm_packs_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
}

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

// The sums of the 16 lanes of each of four registers, as the four lanes of one: pairs of
// registers interleaved and added (unpack), then pairs of those, then the four 128-bit lanes.
inline __m128 sum_lanes_x4(const __m512 (&v)[4]) {
    const __m512 v01 =
        _mm512_add_ps(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));
    const __m512 v23 =
        _mm512_add_ps(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));
    // per 128-bit lane: v0 v1 v0 v1 and v2 v3 v2 v3 partial sums
    const __m512 all =
        _mm512_add_ps(_mm512_shuffle_ps(v01, v23, 0x44), _mm512_shuffle_ps(v01, v23, 0xee));
    // per 128-bit lane: v0 v1 v2 v3; add the lanes
    const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(all), high_half(all));
    return _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
}

struct Q4_KTimesQ8_KWide {
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        static_assert(R <= 4, "one 128-bit lane of block head per row");
        __m512 acc[R][C];   // d dx Σ_s sc_s Σ q qx
        __m512 acc_min[C];  // dmin dx Σ_s m_s pair_sum_s: lanes 4r .. 4r + 3 for row r
        for (int c = 0; c < C; ++c) {
            for (int r = 0; r < R; ++r) acc[r][c] = _mm512_setzero_ps();
            acc_min[c] = _mm512_setzero_ps();
        }
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        // Per 128-bit lane, as int16: the minima m0..m7 (bytes 8..15 of the decoded head).
        const __m512i min_index = _mm512_broadcast_i32x4(
            _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
        // The scales of packed dot-product pairs, as int16: in lanes 0-1 sc[4h] x4 then
        // sc[4h + 1] x4, in lanes 2-3 sc[4h + 2] x4 then sc[4h + 3] x4 (see the layout above).
        __m512i scale_index[2];
        for (int h = 0; h < 2; ++h) {
            const char s0 = char(4 * h), s1 = char(s0 + 1), s2 = char(s0 + 2), s3 = char(s0 + 3);
            const __m128i lo =
                _mm_setr_epi8(s0, -1, s0, -1, s0, -1, s0, -1, s1, -1, s1, -1, s1, -1, s1, -1);
            const __m128i hi =
                _mm_setr_epi8(s2, -1, s2, -1, s2, -1, s2, -1, s3, -1, s3, -1, s3, -1, s3, -1);
            const __m256i lo2 = _mm256_broadcastsi128_si256(lo),
                          hi2 = _mm256_broadcastsi128_si256(hi);
            scale_index[h] = _mm512_inserti64x4(_mm512_castsi256_si512(lo2), hi2, 1);
        }
        // dword 0 of each lane (d, dmin of row r) gathered into the low 128 bits
        const __m512i head_words =
            _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        // float lanes 4r .. 4r + 3 = element 2r + 1 (dmin_r dx) of the converted heads
        const __m512i dmin_index =
            _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);

        for (int64_t b = 0; b < nb; ++b) {
            // Activations in the codes' order: x[c][2h] matches the low nibbles of
            // qs[64h .. 64h + 63], x[c][2h + 1] the high nibbles.
            __m512i x[C][4];
            __m512i pair_sums[C];
            __m256 xd[C];
            for (int c = 0; c < C; ++c) {
                const BlockQ8_K* ab = block_at<BlockQ8_K>(a, as, c, b);
                for (int h = 0; h < 2; ++h) {
                    x[c][2 * h] = load_halves(ab->qs + 128 * h, ab->qs + 128 * h + 64);
                    x[c][2 * h + 1] = load_halves(ab->qs + 128 * h + 32, ab->qs + 128 * h + 96);
                }
                pair_sums[c] = _mm512_broadcast_i32x4(q8k_pair_sums(ab->bsums));
                xd[c] = _mm256_set1_ps(ab->d);
            }

            // Row r's head in 128-bit lane r (a masked broadcast: the lane of an insert must be
            // a constant expression, which r is not for every compiler).
            __m512i heads = _mm512_zextsi128_si512(load16(block_at<BlockQ4_K>(w, ws, 0, b)));
            for (int r = 1; r < R; ++r) {
                heads = _mm512_mask_broadcast_i32x4(heads, __mmask16(0xf << (4 * r)),
                                                    load16(block_at<BlockQ4_K>(w, ws, r, b)));
            }
            const __m512i scales_mins = k4_scales_and_mins_x4(heads);
            const __m512i mins = _mm512_shuffle_epi8(scales_mins, min_index);
            // d_r, dmin_r at elements 2r, 2r + 1
            const __m256 d_dmin = _mm256_cvtph_ps(
                _mm512_castsi512_si128(_mm512_permutexvar_epi32(head_words, heads)));
            __m512 factors[C];  // d_r dx, dmin_r dx at elements 2r, 2r + 1
            for (int c = 0; c < C; ++c) {
                factors[c] = _mm512_castps256_ps512(_mm256_mul_ps(d_dmin, xd[c]));
                const __m512i min_sums = _mm512_madd_epi16(mins, pair_sums[c]);
                acc_min[c] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dmin_index, factors[c]),
                                             _mm512_cvtepi32_ps(min_sums), acc_min[c]);
            }

            // Unrolled so that the accumulators stay in registers.
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const BlockQ4_K* wb = block_at<BlockQ4_K>(w, ws, r, b);
                prefetch_next_tile(wb, R * ws);
                __m512i q[4];
                for (int h = 0; h < 2; ++h) {
                    const __m512i bytes = _mm512_loadu_si512(wb->qs + 64 * h);
                    q[2 * h] = _mm512_and_si512(bytes, low4);
                    q[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4);
                }
                const __m512i row_scales = _mm512_permutexvar_epi32(  // lane r, four times
                    _mm512_add_epi32(_mm512_set1_epi32(4 * r),
                                     _mm512_broadcast_i32x4(_mm_setr_epi32(0, 1, 2, 3))),
                    scales_mins);
                const __m512i scale0 = _mm512_shuffle_epi8(row_scales, scale_index[0]);
                const __m512i scale1 = _mm512_shuffle_epi8(row_scales, scale_index[1]);
                const __m512i d_index = _mm512_set1_epi32(2 * r);
                for (int c = 0; c < C; ++c) {
                    __m512i t[4];
                    for (int k = 0; k < 4; ++k) {
                        t[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], x[c][k]);
                    }
                    const __m512i sum = _mm512_dpwssd_epi32(
                        _mm512_madd_epi16(_mm512_packs_epi32(t[0], t[1]), scale0),
                        _mm512_packs_epi32(t[2], t[3]), scale1);
                    acc[r][c] = _mm512_fmadd_ps(_mm512_permutexvar_ps(d_index, factors[c]),
                                                _mm512_cvtepi32_ps(sum), acc[r][c]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            // The four rows' sums at once (rows past R are zero); a block of 768 elements (an
            // expert's down projection) is only three blocks per tile, so this matters.
            __m512 rows[4];
            for (int r = 0; r < 4; ++r) rows[r] = r < R ? acc[r][c] : _mm512_setzero_ps();
            const __m128 sums = sum_lanes_x4(rows);
            // acc_min[c]: lanes 4r .. 4r + 3 of row r, summed within each 128-bit lane
            __m512 m = acc_min[c];
            m = _mm512_add_ps(m, _mm512_permute_ps(m, 0x4e));  // + the other 64-bit half
            m = _mm512_add_ps(m, _mm512_permute_ps(m, 0xb1));  // + the neighbour
            const __m128 mins = _mm512_castps512_ps128(_mm512_permutexvar_ps(
                _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), m));
            alignas(16) float row_out[4];
            _mm_store_ps(row_out, _mm_sub_ps(sums, mins));
            for (int r = 0; r < R; ++r) out[size_t(c) * os + size_t(r)] = row_out[r];
        }
    }
};

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

// Q5_K in column pairs: K4TimesQ8_K<true>'s arithmetic (x86_tile_kernels.inc) per half, the codes
// with their fifth bits and the scales unpacked once per row for both columns.
struct Q5_KTimesQ8_KColumnPairs {
    template <int R, int C>
    static void tile(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t nb,
                     float* out, size_t os) {
        if constexpr (C == 1) {
            K4TimesQ8_K<true>::template tile<R, 1>(w, ws, a, as, nb, out, os);
        } else {
            constexpr int P = (C + 1) / 2;
            __m512 acc[R][P];
            for (auto& row : acc) {
                for (auto& v : row) v = _mm512_setzero_ps();
            }
            const __m512i low4 = _mm512_set1_epi8(0x0f);
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            // k4_min_terms' index (int16 m0 m0 m1 m1 .. | m4 m4 .. m7 m7) in both halves
            const __m512i min_index = _mm512_broadcast_i64x4(
                _mm256_set_epi64x(int64_t(0xff0fff0fff0eff0eull), int64_t(0xff0dff0dff0cff0cull),
                                  int64_t(0xff0bff0bff0aff0aull), int64_t(0xff09ff09ff08ff08ull)));
            for (int64_t b = 0; b < nb; ++b) {
                __m512i x[P][8];
                __m512i bsums[P];
                __m512 xd[P];
                q8k_pairs<P, C>(a, as, b, x, bsums, xd);
                for (int r = 0; r < R; ++r) {
                    const BlockQ5_K* wb = block_at<BlockQ5_K>(w, ws, r, b);
                    prefetch_next_tile(wb, R * ws);
                    const __m512i scales_mins =
                        _mm512_broadcast_i32x4(k4_scales_and_mins(wb->scales));
                    const __m512i hbits = _mm512_broadcast_i64x4(load32(wb->qh));
                    __m512i q[8];
                    for (int j = 0; j < 4; ++j) {
                        const __m512i bytes = _mm512_broadcast_i64x4(load32(wb->qs + 32 * j));
                        const __m512i h = _mm512_srli_epi16(hbits, 2 * j);
                        q[2 * j] = _mm512_or_si512(_mm512_and_si512(bytes, low4),
                                                   _mm512_and_si512(_mm512_slli_epi16(h, 4), bit4));
                        q[2 * j + 1] =
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4),
                                            _mm512_and_si512(_mm512_slli_epi16(h, 3), bit4));
                    }
                    __m512i scale[8];  // sub-block s's scale in every int16 lane
                    for (int s = 0; s < 8; ++s) {
                        scale[s] = _mm512_shuffle_epi8(scales_mins,
                                                       _mm512_set1_epi16(int16_t(0xff00 | s)));
                    }
                    const __m512i mins = _mm512_shuffle_epi8(scales_mins, min_index);
                    const __m512 wd = _mm512_set1_ps(half_to_float(wb->d));
                    const __m512 wdmin = _mm512_set1_ps(half_to_float(wb->dmin));
                    for (int p = 0; p < P; ++p) {
                        __m512i sum = _mm512_setzero_si512();
                        for (int s = 0; s < 8; ++s) {
                            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(q[s], x[p][s]),
                                                      scale[s]);
                        }
                        const __m512i min_terms = _mm512_madd_epi16(bsums[p], mins);
                        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[p]),
                                                    _mm512_cvtepi32_ps(sum), acc[r][p]);
                        acc[r][p] = _mm512_fnmadd_ps(_mm512_mul_ps(wdmin, xd[p]),
                                                     _mm512_cvtepi32_ps(min_terms), acc[r][p]);
                    }
                }
            }
            store_pair_tile<R, C>(acc, out, os);
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

struct Q8_0Lanes {
    struct alignas(64) Line {
        uint8_t bytes[64];
    };
    // The 16 rows' block b, transposed (register k: codes 4k..4k+3 of each lane's row, + 128).
    static void transpose(const uint8_t* const (&rows)[kLaneRows], int64_t b, __m512i (&z)[8]) {
        __m512i a[8];
        for (int i = 0; i < 8; ++i) {
            a[i] = load_halves(block_at<BlockQ8_0>(rows[i], 0, 0, b)->qs,
                               block_at<BlockQ8_0>(rows[i + 8], 0, 0, b)->qs);
        }
        // 128-bit lanes of a[i]: codes 0-15 and 16-31 of row i, then of row i + 8 (as dwords
        // e0-e3, e4-e7). Two unpack steps gather one dword of 4 rows per 128-bit lane...
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
        const __m512i offset = _mm512_set1_epi8(char(0x80));
        for (int k = 0; k < 4; ++k) {
            z[k] = _mm512_xor_si512(_mm512_shuffle_i32x4(u[0][k], u[1][k], _MM_SHUFFLE(2, 0, 2, 0)),
                                    offset);
            z[k + 4] = _mm512_xor_si512(
                _mm512_shuffle_i32x4(u[0][k], u[1][k], _MM_SHUFFLE(3, 1, 3, 1)), offset);
        }
    }
    // The 16 rows' scales of block b in lane order, converted from fp16. (Sixteen scalar loads
    // through memory: a vpgatherdd of the same words took 40% of a decode tile's time.)
    static __m512 scales(const uint8_t* const (&rows)[kLaneRows], int64_t b) {
        alignas(32) uint16_t d[kLaneRows];
        for (int j = 0; j < kLaneRows; ++j) {
            d[j] = block_at<BlockQ8_0>(rows[kLaneRow[j]], 0, 0, b)->d;
        }
        return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
    }
    // 16 row streams, too many for the hardware prefetchers: every other block, each row's
    // line kPrefetchBlocks blocks on (past its end, the same row of the next tile).
    static void prefetch_ahead(const uint8_t* const (&rows)[kLaneRows], size_t ws, int64_t nb,
                               int64_t b) {
        constexpr int64_t kPrefetchBlocks = 8;  // 272 bytes (4-12 measured alike)
        const int64_t ahead = b + kPrefetchBlocks;
        const size_t at = ahead < nb ? size_t(ahead) * sizeof(BlockQ8_0)
                                     : kLaneRows * ws + size_t(ahead - nb) * sizeof(BlockQ8_0);
        for (int i = 0; i < kLaneRows; ++i) {
            _mm_prefetch(reinterpret_cast<const char*>(rows[i]) + at, _MM_HINT_T0);
        }
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
    template <int C>
    static void store(const __m512 (&acc)[kLaneColumns], int n_rows, float* out, size_t os) {
        for (int c = 0; c < C; ++c) {
            alignas(64) float lanes[kLaneRows];
            _mm512_store_ps(lanes, acc[c]);
            for (int j = 0; j < kLaneRows; ++j) {
                if (kLaneRow[j] < n_rows) out[size_t(c) * os + size_t(kLaneRow[j])] = lanes[j];
            }
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
        store<C>(acc, n_rows, out, os);
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
        store<C>(acc, n_rows, out, os);
    }

    template <template <int> class Go>
    static void by_columns(int c, auto&&... args) {
        switch (c) {
            case 1:
                return Go<1>::run(args...);
            case 2:
                return Go<2>::run(args...);
            case 3:
                return Go<3>::run(args...);
            case 4:
                return Go<4>::run(args...);
            case 5:
                return Go<5>::run(args...);
            case 6:
                return Go<6>::run(args...);
            case 7:
                return Go<7>::run(args...);
            default:
                return Go<8>::run(args...);
        }
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
            return by_columns<Direct>(n_cols, rows, ws, n_rows, a, as, nb, out, os);
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
            by_columns<Kept>(std::min(kLaneColumns, n_cols - c), kept, n_rows, a + size_t(c) * as,
                             as, nb, out + size_t(c) * os, os);
        }
    }
};

template <class Codes>
constexpr TileKernel column_pair_kernel() {
    return tile_kernel<SignedTimesQ8_0ColumnPairs<Codes>, kTileRows, kPairTileCols>();
}

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace {

// Q4_K prompt tiles of up to 4 columns where rows are long, in pairs of columns where they are
// short: the 4-column tile keeps its 16 accumulators in registers only in part, and over a short
// row (an expert's down projection: 3 blocks) its spills and per-tile setup cost more than the
// activations it shares (measured on Zen 5, one thread, 64 columns: 2048 x 768 +14% in pairs,
// 768 x 2048 +4%, 4096 x 4096 -3%). A column's arithmetic is the same in either tile.
constexpr int64_t kQ4KFourColumnBlocks = 16;

void q4_k_wide_dispatch(const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as,
                        int n_cols, int64_t nb, float* out, size_t os) {
    static constexpr TileTable<Q4_KTimesQ8_KWide, kTileRows, kTileCols> table;
    const int step = nb < kQ4KFourColumnBlocks ? 2 : kTileCols;
    for (int c = 0; c < n_cols; c += step) {
        const int m = std::min(step, n_cols - c);
        table.fns[n_rows - 1][m - 1](w, ws, n_rows, a + size_t(c) * as, as, m, nb,
                                     out + size_t(c) * os, os);
    }
}

}  // namespace

TileKernel avx512_tile_kernel(TensorType weight) {
    switch (weight) {
        case TensorType::Q4_K:
            return {&q4_k_wide_dispatch, kTileRows, kTileCols};
        case TensorType::Q6_K:
            return tile_kernel<Q6_KTimesQ8_KColumnPairs, kTileRows, kPairTileCols>();
        case TensorType::Q5_K:
            return tile_kernel<Q5_KTimesQ8_KColumnPairs, kTileRows, kPairTileCols>();
        case TensorType::F32:
            return tile_kernel<FloatDotColumnPairs<F32Elements>, kTileRows, kPairTileCols>();
        case TensorType::F16:
            return tile_kernel<FloatDotColumnPairs<F16Elements>, kTileRows, kPairTileCols>();
        case TensorType::BF16:
            return tile_kernel<FloatDotColumnPairs<BF16Elements>, kTileRows, kPairTileCols>();
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
