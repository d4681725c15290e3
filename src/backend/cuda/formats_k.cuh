// The 256-element super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (see formats.cuh
// for the decoders' contract; block layouts in quant/blocks.h, reference dequantizers in
// quant/k_quants.cpp and quant/nonlinear_quants.cpp).
//
// One activation step per super-block, so a unit's codes from different sub-blocks share it and
// their sub-block multipliers combine in integers. 16 units per block: Q2_K, Q3_K and Q6_K four
// 4-element groups of one byte column, each in its own 16-element sub-block; Q4_K and Q5_K 8 low
// nibbles of one sub-block and the 8 high nibbles of the next; IQ4_XS 16 nibbles of a sub-block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/formats.cuh"
#include "backend/cuda/formats_legacy.cuh"

namespace strata::cuda {

// What every super-block format shares: its traits.
template <TensorType T>
struct FormatK : FormatTraits<T> {
    static_assert(FormatTraits<T>::kBlockElems == quant::kQK_K);
    static constexpr int kExtraItems = 0;
};

// The 2-bit layouts (Q2_K, Q3_K; Q6_K alike): unit 8h + m (half h, byte column 4m..4m+3) has in
// code word j the elements 128h + 32j + 4m + 0..3 (bit pair j of those bytes).
STRATA_HD int k2_unit_element(int k, int i) {
    return 128 * (k >> 3) + 32 * (i >> 2) + 4 * (k & 7) + (i & 3);
}

// Element 8j of a super-block in the 2-bit layouts (Q2_K, Q3_K): half h, bit pair `pair`, byte
// column l0 (a multiple of 8, within the 32 bytes of the half).
struct K2At {
    int h, pair, l0;
};
STRATA_HD K2At k2_at(int j) {
    const int e0 = 8 * j;
    return {e0 >> 7, (e0 & 127) >> 5, e0 & 31};
}

// x = d * sc * q - dmin * m per 16-element sub-block (4-bit sc and m), q 2 bits.
template <>
struct Format<TensorType::Q2_K> : FormatK<TensorType::Q2_K> {
    static constexpr int kExtraItems = 16;  // one minimum per sub-block
    using Codes = UnitCodes<4>;
    static constexpr int kScales = int(offsetof(Block, scales)), kQs = int(offsetof(Block, qs)),
                         kD = int(offsetof(Block, d)), kDmin = int(offsetof(Block, dmin));

    STRATA_HD static int unit_element(int k, int i) { return k2_unit_element(k, i); }

    // Unit 8h + m: bit pair j of qs bytes 32h + 4m.. is sub-block 8h + 2j + (m >= 4).
    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int u) {
        const int h = u >> 3, m = u & 7, half = m >> 2;
        const uint32_t w = load_u32<alignment_at(A, kQs)>(b + kQs + 32 * h + 4 * m);
        const uint32_t s0 = load_u32<alignment_at(A, kScales)>(b + kScales + 8 * h);
        const uint32_t s1 = load_u32<alignment_at(A, kScales)>(b + kScales + 8 * h + 4);
        Codes c;
        STRATA_UNROLL
        for (int j = 0; j < 4; ++j) c.code[j] = (w >> (2 * j)) & 0x03030303u;
        c.mult[0] = int((s0 >> (8 * half)) & 0x0f);
        c.mult[1] = int((s0 >> (16 + 8 * half)) & 0x0f);
        c.mult[2] = int((s1 >> (8 * half)) & 0x0f);
        c.mult[3] = int((s1 >> (16 + 8 * half)) & 0x0f);
        c.scale = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        return c;
    }

    // -dmin * m_s * (sum of sub-block s's activations)
    template <int A>
    STRATA_HD static ExtraTerm extra(const uint8_t* b, int s) {
        return {-half_bits_to_float(load_u16<alignment_at(A, kDmin)>(b + kDmin)),
                int(b[kScales + s] >> 4), s, 1};
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const K2At at = k2_at(j);
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const float dmin = half_bits_to_float(load_u16<alignment_at(A, kDmin)>(b + kDmin));
        const int sc = b[kScales + 8 * at.h + 2 * at.pair + (at.l0 >> 4)];
        const float dl = mul_rn(d, float(sc & 0x0f));
        const float ml = mul_rn(dmin, float(sc >> 4));
        for (int i = 0; i < 8; ++i) {
            const int q = (b[kQs + 32 * at.h + at.l0 + i] >> (2 * at.pair)) & 3;
            out[i] = sub_rn(mul_rn(dl, float(q)), ml);
        }
    }
};

// Q3_K sub-block scale sb (0..15), 6 bits, from its 12 packed bytes in three words
// (quant::q3k_scale).
STRATA_HD int q3k_scale_of(uint32_t t0, uint32_t t1, uint32_t t2, int sb) {
    const uint32_t low =
        sb < 8 ? byte_of3(t0, t1, t2, sb) & 0x0f : byte_of3(t0, t1, t2, sb - 8) >> 4;
    const uint32_t high = (byte_of3(t0, t1, t2, 8 + (sb & 3)) >> (2 * (sb >> 2))) & 3;
    return int(low | high << 4);
}

// x = d * (sc - 32) * (q - 4) per 16-element sub-block, q = 2 low bits | hmask bit << 2.
template <>
struct Format<TensorType::Q3_K> : FormatK<TensorType::Q3_K> {
    using Codes = UnitCodes<4>;
    static constexpr int kHmask = int(offsetof(Block, hmask)), kQs = int(offsetof(Block, qs)),
                         kScales = int(offsetof(Block, scales)), kD = int(offsetof(Block, d));

    STRATA_HD static int unit_element(int k, int i) { return k2_unit_element(k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int u) {
        const int h = u >> 3, m = u & 7, half = m >> 2;
        const uint32_t w = load_u32<alignment_at(A, kQs)>(b + kQs + 32 * h + 4 * m);
        const uint32_t hm = load_u32<alignment_at(A, kHmask)>(b + kHmask + 4 * m);
        constexpr int kSa = alignment_at(A, kScales);
        const uint32_t t0 = load_u32<kSa>(b + kScales), t1 = load_u32<kSa>(b + kScales + 4),
                       t2 = load_u32<kSa>(b + kScales + 8);
        Codes c;
        STRATA_UNROLL
        for (int j = 0; j < 4; ++j) {
            const uint32_t q =
                ((w >> (2 * j)) & 0x03030303u) | (((hm >> (4 * h + j)) & 0x01010101u) << 2);
            c.code[j] = minus_offset<4>(q);
            c.mult[j] = q3k_scale_of(t0, t1, t2, 8 * h + 2 * j + half) - 32;
        }
        c.scale = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        return c;
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const K2At at = k2_at(j);
        constexpr int kSa = alignment_at(A, kScales);
        const uint32_t t0 = load_u32<kSa>(b + kScales), t1 = load_u32<kSa>(b + kScales + 4),
                       t2 = load_u32<kSa>(b + kScales + 8);
        const int sb = 8 * at.h + 2 * at.pair + (at.l0 >> 4);
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const float dl = mul_rn(d, float(q3k_scale_of(t0, t1, t2, sb) - 32));
        for (int i = 0; i < 8; ++i) {
            const int low = (b[kQs + 32 * at.h + at.l0 + i] >> (2 * at.pair)) & 3;
            const int high = (b[kHmask + at.l0 + i] >> (4 * at.h + at.pair)) & 1;
            out[i] = mul_rn(dl, float(low + 4 * high - 4));
        }
    }
};

// Q4_K / Q5_K sub-block sb (0..7) scale and minimum, 6 bits each, from their 12 packed bytes in
// three words (quant::k4_scale_min).
struct ScaleMin6 {
    int scale, min;
};
STRATA_HD ScaleMin6 k4_scale_min_of(uint32_t t0, uint32_t t1, uint32_t t2, int sb) {
    if (sb < 4) {
        return {int(byte_of3(t0, t1, t2, sb) & 63), int(byte_of3(t0, t1, t2, sb + 4) & 63)};
    }
    const uint32_t packed = byte_of3(t0, t1, t2, sb + 4);
    return {int((packed & 0x0f) | (byte_of3(t0, t1, t2, sb - 4) >> 6) << 4),
            int((packed >> 4) | (byte_of3(t0, t1, t2, sb) >> 6) << 4)};
}

// Q4_K and Q5_K: x = d * sc * q - dmin * m per 32-element sub-block; Q5_K adds a fifth bit.
template <TensorType T>
struct FormatK4 : FormatK<T> {
    static_assert(T == TensorType::Q4_K || T == TensorType::Q5_K);
    static constexpr bool kFifthBit = T == TensorType::Q5_K;
    using Block = typename FormatK<T>::Block;
    static constexpr int kExtraItems = 8;  // one minimum per sub-block
    using Codes = UnitCodes<2>;
    static constexpr int kD = int(offsetof(Block, d)), kDmin = int(offsetof(Block, dmin)),
                         kScales = int(offsetof(Block, scales)), kQs = int(offsetof(Block, qs));
    // Q5_K's qh; unused (and pointing at qs) for Q4_K.
    static constexpr int kQh = kFifthBit ? int(offsetof(quant::BlockQ5_K, qh)) : kQs;

    // Unit 4j + m: qs bytes 32j + 8m..+7, their low nibbles (elements 64j + 8m.., sub-block 2j),
    // then their high nibbles (elements 64j + 32 + 8m.., sub-block 2j + 1).
    STRATA_HD static int unit_element(int k, int i) {
        return 64 * (k >> 2) + 8 * (k & 3) + (i & 7) + 32 * (i >> 3);
    }

    template <int A>
    STRATA_HD static ScaleMin6 scale_min(const uint8_t* b, int sb) {
        constexpr int kSa = alignment_at(A, kScales);
        return k4_scale_min_of(load_u32<kSa>(b + kScales), load_u32<kSa>(b + kScales + 4),
                               load_u32<kSa>(b + kScales + 8), sb);
    }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        const int j = k >> 2, m = k & 3;
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 32 * j + 8 * m, w0, w1);
        Codes c;
        c.code[0] = w0 & 0x0f0f0f0fu;
        c.code[1] = w1 & 0x0f0f0f0fu;
        c.code[2] = (w0 >> 4) & 0x0f0f0f0fu;
        c.code[3] = (w1 >> 4) & 0x0f0f0f0fu;
        if constexpr (kFifthBit) {
            uint32_t h0, h1;  // qh bytes 8m..8m+7: bit 2j the low element's, 2j + 1 the high's
            load_u32x2<alignment_at(A, kQh)>(b + kQh + 8 * m, h0, h1);
            c.code[0] |= ((h0 >> (2 * j)) & 0x01010101u) << 4;
            c.code[1] |= ((h1 >> (2 * j)) & 0x01010101u) << 4;
            c.code[2] |= ((h0 >> (2 * j + 1)) & 0x01010101u) << 4;
            c.code[3] |= ((h1 >> (2 * j + 1)) & 0x01010101u) << 4;
        }
        c.mult[0] = scale_min<A>(b, 2 * j).scale;
        c.mult[1] = scale_min<A>(b, 2 * j + 1).scale;
        c.scale = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        return c;
    }

    // -dmin * m_s * (sum of sub-block s's activations)
    template <int A>
    STRATA_HD static ExtraTerm extra(const uint8_t* b, int s) {
        return {-half_bits_to_float(load_u16<alignment_at(A, kDmin)>(b + kDmin)),
                scale_min<A>(b, s).min, 2 * s, 2};
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const int s = j >> 2, l0 = 8 * (j & 3);  // sub-block, first element in it
        const ScaleMin6 sm = scale_min<A>(b, s);
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const float dmin = half_bits_to_float(load_u16<alignment_at(A, kDmin)>(b + kDmin));
        const float ds = mul_rn(d, float(sm.scale));
        const float dm = mul_rn(dmin, float(sm.min));
        for (int i = 0; i < 8; ++i) {
            int q = (b[kQs + 32 * (s >> 1) + l0 + i] >> (4 * (s & 1))) & 0x0f;
            if constexpr (kFifthBit) q |= ((b[kQh + l0 + i] >> s) & 1) << 4;
            out[i] = sub_rn(mul_rn(ds, float(q)), dm);
        }
    }
};
template <>
struct Format<TensorType::Q4_K> : FormatK4<TensorType::Q4_K> {};
template <>
struct Format<TensorType::Q5_K> : FormatK4<TensorType::Q5_K> {};

// x = d * sc * (q - 32) per 16-element sub-block, sc int8, q = 4 bits of ql | 2 bits of qh << 4.
template <>
struct Format<TensorType::Q6_K> : FormatK<TensorType::Q6_K> {
    using Codes = UnitCodes<4>;
    static constexpr int kQl = int(offsetof(Block, ql)), kQh = int(offsetof(Block, qh)),
                         kScales = int(offsetof(Block, scales)), kD = int(offsetof(Block, d));

    STRATA_HD static int unit_element(int k, int i) { return k2_unit_element(k, i); }

    // Unit 8h + m, l = 4m..4m+3: group k is element 128h + 32k + l, from the low (k = 0, 1) or
    // high (k = 2, 3) nibble of ql[64h + 32(k & 1) + l] and bits 2k of qh[32h + l]; sub-block
    // 8h + 2k + (m >= 4).
    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int u) {
        const int h = u >> 3, m = u & 7, half = m >> 2;
        constexpr int kLa = alignment_at(A, kQl), kHa = alignment_at(A, kQh);
        const uint32_t lo = load_u32<kLa>(b + kQl + 64 * h + 4 * m);
        const uint32_t hi = load_u32<kLa>(b + kQl + 64 * h + 32 + 4 * m);
        const uint32_t qh = load_u32<kHa>(b + kQh + 32 * h + 4 * m);
        constexpr int kSa = alignment_at(A, kScales);
        const uint32_t s0 = load_u32<kSa>(b + kScales + 8 * h);
        const uint32_t s1 = load_u32<kSa>(b + kScales + 8 * h + 4);
        Codes c;
        c.code[0] = minus_offset<32>((lo & 0x0f0f0f0fu) | (qh & 0x03030303u) << 4);
        c.code[1] = minus_offset<32>((hi & 0x0f0f0f0fu) | ((qh >> 2) & 0x03030303u) << 4);
        c.code[2] = minus_offset<32>(((lo >> 4) & 0x0f0f0f0fu) | ((qh >> 4) & 0x03030303u) << 4);
        c.code[3] = minus_offset<32>(((hi >> 4) & 0x0f0f0f0fu) | ((qh >> 6) & 0x03030303u) << 4);
        c.mult[0] = int(int8_t((s0 >> (8 * half)) & 0xff));
        c.mult[1] = int(int8_t((s0 >> (16 + 8 * half)) & 0xff));
        c.mult[2] = int(int8_t((s1 >> (8 * half)) & 0xff));
        c.mult[3] = int(int8_t((s1 >> (16 + 8 * half)) & 0xff));
        c.scale = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        return c;
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const int e0 = 8 * j, h = e0 >> 7, k = (e0 & 127) >> 5, l0 = e0 & 31;
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const int sc = int(int8_t(b[kScales + 8 * h + 2 * k + (l0 >> 4)]));
        const float dsc = mul_rn(d, float(sc));
        for (int i = 0; i < 8; ++i) {
            const int l = l0 + i;
            const int low = (b[kQl + 64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
            const int high = (b[kQh + 32 * h + l] >> (2 * k)) & 3;
            out[i] = mul_rn(dsc, float((low | high << 4) - 32));
        }
    }
};

// x = d * (ls - 32) * kIq4nlValues[q] per 32-element sub-block; within a sub-block the IQ4_NL
// layout (unit 2s + h = qs bytes 16s + 8h..+7 of sub-block s, in nibble order through the table).
template <>
struct Format<TensorType::IQ4_XS> : FormatK<TensorType::IQ4_XS> {
    using Codes = UnitCodes<1>;
    static constexpr int kD = int(offsetof(Block, d)), kScalesH = int(offsetof(Block, scales_h)),
                         kScalesL = int(offsetof(Block, scales_l)), kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) {
        return 32 * (k >> 1) + table_unit_element(8 * (k & 1), i);
    }

    template <int A>
    STRATA_HD static int sub_scale(const uint8_t* b, int s) {
        const uint32_t high = load_u16<alignment_at(A, kScalesH)>(b + kScalesH);
        const uint32_t low = b[kScalesL + (s >> 1)];
        return int(((low >> (4 * (s & 1))) & 0x0f) | ((high >> (2 * s)) & 3) << 4) - 32;
    }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        const int s = k >> 1;
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 16 * s + 8 * (k & 1), w0, w1);
        Codes c = table_unit(w0, w1, iq4nl_table(),
                             half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD)));
        c.mult[0] = sub_scale<A>(b, s);
        return c;
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const int s = j >> 2, r0 = 8 * (j & 3);  // sub-block, first element in it
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const float dl = mul_rn(d, float(sub_scale<A>(b, s)));
        const Table16 t = iq4nl_table();
        for (int i = 0; i < 8; ++i) {
            const int r = r0 + i;
            const int q = (b[kQs + 16 * s + (r & 15)] >> (4 * (r >> 4))) & 0x0f;
            out[i] = mul_rn(dl, float(table_value(q, t)));
        }
    }
};

}  // namespace strata::cuda
