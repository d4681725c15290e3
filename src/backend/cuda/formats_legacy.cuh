// The 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 (see formats.cuh for the
// decoders' contract; block layouts in quant/blocks.h, reference dequantizers in
// quant/legacy_quants.cpp and quant/nonlinear_quants.cpp).
//
// Two units of 16 elements per block: qs bytes 8k..8k+7 of a nibble block (their low nibbles,
// then their high ones; in nibble order through the table for IQ4_NL and MXFP4), or 16 bytes of
// Q8_0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/format_bits.cuh"
#include "backend/cuda/formats.cuh"

namespace strata::cuda {

inline constexpr uint32_t kIq4nlWord0 = table16_word(quant::kIq4nlValues, 0);
inline constexpr uint32_t kIq4nlWord1 = table16_word(quant::kIq4nlValues, 1);
inline constexpr uint32_t kIq4nlWord2 = table16_word(quant::kIq4nlValues, 2);
inline constexpr uint32_t kIq4nlWord3 = table16_word(quant::kIq4nlValues, 3);
inline constexpr uint32_t kMxfp4Word0 = table16_word(quant::kMxfp4Values, 0);
inline constexpr uint32_t kMxfp4Word1 = table16_word(quant::kMxfp4Values, 1);
inline constexpr uint32_t kMxfp4Word2 = table16_word(quant::kMxfp4Values, 2);
inline constexpr uint32_t kMxfp4Word3 = table16_word(quant::kMxfp4Values, 3);

STRATA_HD Table16 iq4nl_table() {
    return {kIq4nlWord0, kIq4nlWord1, kIq4nlWord2, kIq4nlWord3};
}
STRATA_HD Table16 mxfp4_table() {
    return {kMxfp4Word0, kMxfp4Word1, kMxfp4Word2, kMxfp4Word3};
}

// What every 32-element format shares: its traits, two units per block.
template <TensorType T>
struct Format32 : FormatTraits<T> {
    static_assert(FormatTraits<T>::kBlockElems == quant::kQK);
    static constexpr int kExtraItems = 0;
    using Codes = UnitCodes<1>;
};

// Unit k of a nibble block is qs bytes 8k..8k+7 (two words): codes 0-7 their low nibbles
// (elements 8k..8k+7), codes 8-15 their high nibbles (elements 16 + 8k..).
STRATA_HD int nibble_unit_element(int k, int i) {
    return 8 * k + (i & 7) + 16 * (i >> 3);
}

// The codes of nibble unit k from its qs words, with the Q5 fifth bits from qh when kFifth, each
// byte minus `Offset` when the format's codes are centred on it (0: left as they are).
template <uint32_t Offset, bool kFifth>
STRATA_HD UnitCodes<1> nibble_unit(uint32_t w0, uint32_t w1, uint32_t qh, int k, float scale) {
    UnitCodes<1> c;
    c.code[0] = w0 & 0x0f0f0f0fu;
    c.code[1] = w1 & 0x0f0f0f0fu;
    c.code[2] = (w0 >> 4) & 0x0f0f0f0fu;
    c.code[3] = (w1 >> 4) & 0x0f0f0f0fu;
    STRATA_UNROLL
    for (int w = 0; w < 4; ++w) {
        if constexpr (kFifth) c.code[w] |= q5_fifth(qh, nibble_unit_element(k, 4 * w));
        if constexpr (Offset != 0) c.code[w] = minus_offset<Offset>(c.code[w]);
    }
    c.mult[0] = 1;
    c.scale = scale;
    return c;
}

// x = d * (q - 8)
template <>
struct Format<TensorType::Q4_0> : Format32<TensorType::Q4_0> {
    static constexpr int kD = int(offsetof(Block, d)), kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return nibble_unit_element(k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 8 * k, w0, w1);
        return nibble_unit<8, false>(w0, w1, 0, k,
                                     half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD)));
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        for (int i = 0; i < 8; ++i) {
            const NibbleAt n = nibble32_at(j, i);
            const int q = (b[kQs + n.byte] >> n.shift) & 0x0f;
            out[i] = mul_rn(float(q - 8), d);
        }
    }
};

// x = d * q + m
template <>
struct Format<TensorType::Q4_1> : Format32<TensorType::Q4_1> {
    static constexpr int kExtraItems = 1;
    static constexpr int kD = int(offsetof(Block, d)), kM = int(offsetof(Block, m)),
                         kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return nibble_unit_element(k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 8 * k, w0, w1);
        return nibble_unit<0, false>(w0, w1, 0, k,
                                     half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD)));
    }

    // m * (sum of the block's 32 activations)
    template <int A>
    STRATA_HD static ExtraTerm extra(const uint8_t* b, int) {
        return {half_bits_to_float(load_u16<alignment_at(A, kM)>(b + kM)), 1, 0, 2};
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const float m = half_bits_to_float(load_u16<alignment_at(A, kM)>(b + kM));
        for (int i = 0; i < 8; ++i) {
            const NibbleAt n = nibble32_at(j, i);
            const int q = (b[kQs + n.byte] >> n.shift) & 0x0f;
            out[i] = add_rn(mul_rn(float(q), d), m);
        }
    }
};

// x = d * (q - 16), q = nibble | fifth bit << 4
template <>
struct Format<TensorType::Q5_0> : Format32<TensorType::Q5_0> {
    static constexpr int kD = int(offsetof(Block, d)), kQh = int(offsetof(Block, qh)),
                         kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return nibble_unit_element(k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 8 * k, w0, w1);
        const uint32_t qh = load_u32<alignment_at(A, kQh)>(b + kQh);
        return nibble_unit<16, true>(w0, w1, qh, k,
                                     half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD)));
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const uint32_t qh = load_u32<alignment_at(A, kQh)>(b + kQh);
        for (int i = 0; i < 8; ++i) {
            const NibbleAt n = nibble32_at(j, i);
            const int q = ((b[kQs + n.byte] >> n.shift) & 0x0f) | int((qh >> (8 * j + i)) & 1) << 4;
            out[i] = mul_rn(float(q - 16), d);
        }
    }
};

// x = d * q + m, q = nibble | fifth bit << 4
template <>
struct Format<TensorType::Q5_1> : Format32<TensorType::Q5_1> {
    static constexpr int kExtraItems = 1;
    static constexpr int kD = int(offsetof(Block, d)), kM = int(offsetof(Block, m)),
                         kQh = int(offsetof(Block, qh)), kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return nibble_unit_element(k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 8 * k, w0, w1);
        const uint32_t qh = load_u32<alignment_at(A, kQh)>(b + kQh);
        return nibble_unit<0, true>(w0, w1, qh, k,
                                    half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD)));
    }

    template <int A>
    STRATA_HD static ExtraTerm extra(const uint8_t* b, int) {
        return {half_bits_to_float(load_u16<alignment_at(A, kM)>(b + kM)), 1, 0, 2};
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const float m = half_bits_to_float(load_u16<alignment_at(A, kM)>(b + kM));
        const uint32_t qh = load_u32<alignment_at(A, kQh)>(b + kQh);
        for (int i = 0; i < 8; ++i) {
            const NibbleAt n = nibble32_at(j, i);
            const int q = ((b[kQs + n.byte] >> n.shift) & 0x0f) | int((qh >> (8 * j + i)) & 1) << 4;
            out[i] = add_rn(mul_rn(float(q), d), m);
        }
    }
};

// x = d * q, q int8; unit k = elements 16k..16k+15 in order.
template <>
struct Format<TensorType::Q8_0> : Format32<TensorType::Q8_0> {
    static constexpr int kD = int(offsetof(Block, d)), kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return 16 * k + i; }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        Codes c;
        STRATA_UNROLL
        for (int w = 0; w < 4; ++w)
            c.code[w] = load_u32<alignment_at(A, kQs)>(b + kQs + 16 * k + 4 * w);
        c.mult[0] = 1;
        c.scale = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        return c;
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        for (int i = 0; i < 8; ++i) out[i] = mul_rn(float(int8_t(b[kQs + 8 * j + i])), d);
    }
};

// Nibble codes looked up in a 16-entry table, in nibble order: the unit of qs bytes l..l+7 (two
// words) has code i from byte l + i / 2, its low nibble for even i, its high nibble for odd i,
// i.e. the element l + i / 2 + 16 * (i % 2) of a 32-element IQ4_NL layout.
STRATA_HD int table_unit_element(int first_byte, int i) {
    return first_byte + (i >> 1) + 16 * (i & 1);
}
STRATA_HD UnitCodes<1> table_unit(uint32_t w0, uint32_t w1, const Table16& t, float scale) {
    UnitCodes<1> c;
    c.code[0] = lookup4(w0, t);
    c.code[1] = lookup4(w0 >> 16, t);
    c.code[2] = lookup4(w1, t);
    c.code[3] = lookup4(w1 >> 16, t);
    c.mult[0] = 1;
    c.scale = scale;
    return c;
}

// x = d * kIq4nlValues[q]
template <>
struct Format<TensorType::IQ4_NL> : Format32<TensorType::IQ4_NL> {
    static constexpr int kD = int(offsetof(Block, d)), kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return table_unit_element(8 * k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 8 * k, w0, w1);
        return table_unit(w0, w1, iq4nl_table(),
                          half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD)));
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = half_bits_to_float(load_u16<alignment_at(A, kD)>(b + kD));
        const Table16 t = iq4nl_table();
        for (int i = 0; i < 8; ++i) {
            const NibbleAt n = nibble32_at(j, i);
            out[i] = mul_rn(d, float(table_value((b[kQs + n.byte] >> n.shift) & 0x0f, t)));
        }
    }
};

// x = kMxfp4Values[q] * 2^(e - 128); 17-byte blocks, so nothing in them is aligned.
template <>
struct Format<TensorType::MXFP4> : Format32<TensorType::MXFP4> {
    static constexpr int kE = int(offsetof(Block, e)), kQs = int(offsetof(Block, qs));

    STRATA_HD static int unit_element(int k, int i) { return table_unit_element(8 * k, i); }

    template <int A>
    STRATA_HD static Codes unit(const uint8_t* b, int k) {
        uint32_t w0, w1;
        load_u32x2<alignment_at(A, kQs)>(b + kQs + 8 * k, w0, w1);
        return table_unit(w0, w1, mxfp4_table(), e8m0_half(b[kE]));
    }

    template <int A>
    STRATA_HD static void dequant8(const uint8_t* b, int j, float* out) {
        const float d = e8m0_half(b[kE]);
        const Table16 t = mxfp4_table();
        for (int i = 0; i < 8; ++i) {
            const NibbleAt n = nibble32_at(j, i);
            out[i] = mul_rn(float(table_value((b[kQs + n.byte] >> n.shift) & 0x0f, t)), d);
        }
    }
};

}  // namespace strata::cuda
