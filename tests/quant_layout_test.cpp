// The quant API surface and the block layouts: which types are supported, row sizes and their
// errors, packed scale fields, and hand-built blocks with known values for the formats that no
// golden file contains (Q8_1, Q8_K, MXFP4; the others are checked against llama.cpp's files in
// quant_golden_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace strata::quant {
namespace {

constexpr TensorType kSupported[] = {
    TensorType::F32,    TensorType::F16,    TensorType::BF16,  TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,  TensorType::Q8_1, TensorType::Q2_K,
    TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,  TensorType::Q6_K, TensorType::Q8_K,
    TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4,
};

TEST(QuantApi, SupportsExactlyTheImplementedTypes) {
    int supported = 0;
    for (TensorType t : kAllTensorTypes) {
        const bool expected =
            std::find(std::begin(kSupported), std::end(kSupported), t) != std::end(kSupported);
        EXPECT_EQ(is_quant_supported(t), expected) << tensor_type_name(t);
        supported += is_quant_supported(t);
    }
    EXPECT_EQ(supported, 18);
}

TEST(QuantApi, RowBytesFollowTheGeometryTable) {
    EXPECT_EQ(quant_row_bytes(TensorType::Q4_K, 512).value(), 288u);
    EXPECT_EQ(quant_row_bytes(TensorType::Q8_0, 4096).value(), 4352u);
    EXPECT_EQ(quant_row_bytes(TensorType::MXFP4, 64).value(), 34u);
    EXPECT_EQ(quant_row_bytes(TensorType::F16, 3).value(), 6u);
    EXPECT_EQ(quant_row_bytes(TensorType::Q6_K, 0).value(), 0u);

    auto partial = quant_row_bytes(TensorType::Q4_K, 172);
    ASSERT_FALSE(partial.ok());
    EXPECT_NE(partial.error().message.find("172"), std::string::npos) << partial.error().message;
    EXPECT_NE(partial.error().message.find("Q4_K"), std::string::npos) << partial.error().message;
    EXPECT_NE(partial.error().message.find("256"), std::string::npos) << partial.error().message;

    auto unsupported = quant_row_bytes(TensorType::IQ2_XXS, 256);
    ASSERT_FALSE(unsupported.ok());
    EXPECT_NE(unsupported.error().message.find("IQ2_XXS"), std::string::npos);
    EXPECT_FALSE(quant_row_bytes(TensorType::Q8_0, -32).ok());
}

// The activation formats of the reference engine's CPU matmuls (testdata README: "Activation
// quantization").
TEST(QuantApi, VecDotTypesMatchTheReferenceEngine) {
    const std::pair<TensorType, TensorType> expected[] = {
        {TensorType::F32, TensorType::F32},     {TensorType::F16, TensorType::F16},
        {TensorType::BF16, TensorType::BF16},   {TensorType::Q4_0, TensorType::Q8_0},
        {TensorType::Q5_0, TensorType::Q8_0},   {TensorType::Q8_0, TensorType::Q8_0},
        {TensorType::IQ4_NL, TensorType::Q8_0}, {TensorType::MXFP4, TensorType::Q8_0},
        {TensorType::Q4_1, TensorType::Q8_1},   {TensorType::Q5_1, TensorType::Q8_1},
        {TensorType::Q2_K, TensorType::Q8_K},   {TensorType::Q3_K, TensorType::Q8_K},
        {TensorType::Q4_K, TensorType::Q8_K},   {TensorType::Q5_K, TensorType::Q8_K},
        {TensorType::Q6_K, TensorType::Q8_K},   {TensorType::IQ4_XS, TensorType::Q8_K},
    };
    for (auto [weight, act] : expected) {
        EXPECT_EQ(vec_dot_type(weight), act) << tensor_type_name(weight);
        // And the activation type must be one the activation quantizer handles: its block size
        // divides every row the weight type allows.
        EXPECT_EQ(tensor_type_info(weight)->block_size % tensor_type_info(act)->block_size, 0u);
    }
}

// ---- packed scale fields -----------------------------------------------------------------------

TEST(QuantLayout, K4ScaleMinPackingRoundTrips) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> six_bits(0, 63);
    for (int trial = 0; trial < 2000; ++trial) {
        uint8_t scale[8], min[8], packed[12];
        for (int j = 0; j < 8; ++j) {
            scale[j] = uint8_t(six_bits(rng));
            min[j] = uint8_t(six_bits(rng));
        }
        k4_pack_scale_min(scale, min, packed);
        for (int j = 0; j < 8; ++j) {
            const ScaleMin sm = k4_scale_min(packed, j);
            ASSERT_EQ(sm.scale, scale[j]) << j;
            ASSERT_EQ(sm.min, min[j]) << j;
        }
    }
    // The documented byte positions: sub-block 5's scale is the low nibble of byte 9 plus the
    // top two bits of byte 1; its minimum the high nibble of byte 9 plus the top of byte 5.
    uint8_t packed[12] = {};
    packed[9] = 0xa7;
    packed[1] = 0x80;
    packed[5] = 0x40;
    EXPECT_EQ(k4_scale_min(packed, 5).scale, 0x27);
    EXPECT_EQ(k4_scale_min(packed, 5).min, 0x1a);
}

TEST(QuantLayout, Q3kScalePackingRoundTrips) {
    std::mt19937 rng(4);
    std::uniform_int_distribution<int> six_bits(0, 63);
    for (int trial = 0; trial < 2000; ++trial) {
        uint8_t scale[16], packed[12];
        for (auto& s : scale) s = uint8_t(six_bits(rng));
        q3k_pack_scales(scale, packed);
        for (int j = 0; j < 16; ++j) ASSERT_EQ(q3k_scale(packed, j), scale[j]) << j;
    }
    // Sub-block 13: high nibble of byte 5, bits 6-7 of byte 9.
    uint8_t packed[12] = {};
    packed[5] = 0x90;
    packed[9] = 0x80;
    EXPECT_EQ(q3k_scale(packed, 13), 0x29);
}

TEST(QuantLayout, Iq4xsScaleFields) {
    BlockIQ4_XS b{};
    b.scales_l[2] = 0x5c;  // sub-block 4: low nibble 0xc, sub-block 5: 0x5
    b.scales_h = 0x0b00;   // sub-block 4: bits 8-9 = 3, sub-block 5: bits 10-11 = 2
    EXPECT_EQ(iq4xs_scale(b, 4), 0x3c);
    EXPECT_EQ(iq4xs_scale(b, 5), 0x25);
    EXPECT_EQ(iq4xs_scale(b, 0), 0);
}

// ---- known-answer blocks -----------------------------------------------------------------------

TEST(QuantLayout, Q8_1KnownBlock) {
    BlockQ8_1 b{};
    b.d = fp32_to_fp16(0.25f);
    b.s = fp32_to_fp16(-4.0f);  // d * sum: (sum of j - 16 over 32 values) = -16
    for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(j - 16);
    const std::vector<float> y = test::dequantize(TensorType::Q8_1, &b, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[size_t(j)], 0.25f * float(j - 16)) << j;
}

TEST(QuantLayout, Q8_KKnownBlock) {
    std::vector<BlockQ8_K> blocks(2);
    for (int i = 0; i < 2; ++i) {
        blocks[size_t(i)].d = i == 0 ? 0.5f : -3.0f;
        for (int e = 0; e < 256; ++e) blocks[size_t(i)].qs[e] = int8_t((e * 7 + i) % 255 - 127);
    }
    const std::vector<float> y = test::dequantize(TensorType::Q8_K, blocks.data(), 512);
    for (int i = 0; i < 2; ++i) {
        for (int e = 0; e < 256; ++e) {
            ASSERT_EQ(y[size_t(256 * i + e)], blocks[size_t(i)].d * float((e * 7 + i) % 255 - 127));
        }
    }
}

// E2M1 from its definition: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0.
double e2m1_value(int code) {
    const int e = (code >> 1) & 3, m = code & 1;
    const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
    return code & 8 ? -mag : mag;
}

TEST(QuantLayout, Mxfp4KnownBlocks) {
    // The value table is E2M1 doubled.
    for (int c = 0; c < 16; ++c) EXPECT_EQ(kMxfp4Values[c], 2 * e2m1_value(c)) << c;

    for (int e : {127, 130, 100, 1, 0, 252}) {
        BlockMXFP4 b{};
        b.e = uint8_t(e);
        for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
        const std::vector<float> y = test::dequantize(TensorType::MXFP4, &b, 32);
        const double scale = std::ldexp(1.0, e - 127);
        for (int j = 0; j < 16; ++j) {
            EXPECT_EQ(double(y[size_t(j)]), e2m1_value(j) * scale) << "e " << e << " j " << j;
            EXPECT_EQ(double(y[size_t(j + 16)]), e2m1_value(15 - j) * scale) << "e " << e;
        }
    }
}

// A Q4_K block built by hand: d = 1, dmin = 0.5, sub-block s has scale s + 1 and minimum 2s;
// element 64j + l is the low nibble of qs[32j + l] and 64j + 32 + l the high nibble.
TEST(QuantLayout, Q4KElementOrder) {
    BlockQ4_K b{};
    b.d = fp32_to_fp16(1.0f);
    b.dmin = fp32_to_fp16(0.5f);
    uint8_t scale[8], min[8];
    for (int s = 0; s < 8; ++s) {
        scale[s] = uint8_t(s + 1);
        min[s] = uint8_t(2 * s);
    }
    k4_pack_scale_min(scale, min, b.scales);
    for (int i = 0; i < 128; ++i) b.qs[i] = uint8_t((i % 16) | ((15 - i % 16) << 4));
    const std::vector<float> y = test::dequantize(TensorType::Q4_K, &b, 256);
    for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 32; ++l) {
            const int lo = l % 16, hi = 15 - l % 16;
            EXPECT_EQ(y[size_t(64 * j + l)], float((2 * j + 1) * lo) - 0.5f * float(4 * j));
            EXPECT_EQ(y[size_t(64 * j + 32 + l)],
                      float((2 * j + 2) * hi) - 0.5f * float(4 * j + 2));
        }
    }
}

// Q6_K: element 128h + 32k + l; one non-zero code at a time finds each element's bits.
TEST(QuantLayout, Q6KElementOrder) {
    for (int e = 0; e < 256; e += 7) {
        BlockQ6_K b{};
        b.d = fp32_to_fp16(1.0f);
        for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(s + 1);
        // Every code 32 (value 0) except element e, which gets 32 + 21 = 0b110101.
        std::memset(b.ql, 0, sizeof b.ql);
        std::memset(b.qh, 0xaa, sizeof b.qh);  // high bits 0b10 everywhere: 32
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        uint8_t& ql = b.ql[64 * h + l + 32 * (k % 2)];
        ql = uint8_t(ql | (0x5 << (k < 2 ? 0 : 4)));
        uint8_t& qh = b.qh[32 * h + l];
        qh = uint8_t((qh & ~(3 << (2 * k))) | (3 << (2 * k)));
        const std::vector<float> y = test::dequantize(TensorType::Q6_K, &b, 256);
        for (int i = 0; i < 256; ++i) {
            ASSERT_EQ(y[size_t(i)], i == e ? float(e / 16 + 1) * 21.0f : 0.0f) << e << " " << i;
        }
    }
}

}  // namespace
}  // namespace strata::quant
