// Synth's row encoders: F16 / BF16 output through the quant module's row converters (special
// values, exact round-to-nearest-even on ties, every F16 value round-trips, the F16C path agrees
// with the portable one), quantized types through quantize_row, and the type recipe.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "quant/quant.h"
#include "synth/row_encoder.h"
#include "synth/synth_config.h"

namespace strata {
namespace {

float from_bits(uint32_t b) {
    return std::bit_cast<float>(b);
}

// One value through the row converters synth writes with, and back.
uint16_t float_to_f16(float f) {
    uint16_t h;
    quant::fp32_to_fp16_row(&f, &h, 1);
    return h;
}
uint16_t float_to_bf16(float f) {
    uint16_t h;
    quant::fp32_to_bf16_row(&f, &h, 1);
    return h;
}
float f16_to_float(uint16_t h) {
    float f;
    quant::fp16_to_fp32_row(&h, &f, 1);
    return f;
}
float bf16_to_float(uint16_t h) {
    float f;
    quant::bf16_to_fp32_row(&h, &f, 1);
    return f;
}

TEST(HalfFloat, SpecialValuesToF16) {
    EXPECT_EQ(float_to_f16(0.0f), 0x0000);
    EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
    EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
    EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);  // largest finite half
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
    EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
    EXPECT_EQ(float_to_f16(1e10f), 0x7c00);  // overflow
    EXPECT_EQ(float_to_f16(-1e10f), 0xfc00);
    EXPECT_EQ(float_to_f16(0x1p-14f), 0x0400);  // smallest normal half
    EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);  // smallest subnormal half
    EXPECT_EQ(float_to_f16(-0x1p-24f), 0x8001);
    EXPECT_EQ(float_to_f16(0x3p-24f), 0x0003);
    EXPECT_EQ(float_to_f16(0x1p-30f), 0x0000);  // underflow keeps the sign
    EXPECT_EQ(float_to_f16(-0x1p-30f), 0x8000);
    EXPECT_EQ(float_to_f16(from_bits(0x00000001)), 0x0000);  // float subnormal
    EXPECT_EQ(float_to_f16(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(HalfFloat, NanStaysNanToF16) {
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u,
                             0x7fa00000u, 0xff800001u, 0x7fffffffu};
    for (uint32_t b : nans) {
        const uint16_t h = float_to_f16(from_bits(b));
        EXPECT_EQ(h & 0x7c00, 0x7c00) << std::hex << b;
        EXPECT_NE(h & 0x03ff, 0) << "NaN became infinity: " << std::hex << b;
        EXPECT_EQ(h & 0x8000, (b >> 16) & 0x8000) << "sign lost: " << std::hex << b;
        EXPECT_TRUE(std::isnan(f16_to_float(h)));
    }
}

TEST(HalfFloat, TiesRoundToEvenF16) {
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
    EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00);
    // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
    EXPECT_EQ(float_to_f16(1.0f + 0x3p-11f), 0x3c02);
    // Just above a tie rounds up.
    EXPECT_EQ(float_to_f16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
    // 65520 is halfway between 65504 (odd mantissa) and 65536 (inf): to even, i.e. infinity.
    EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);
    EXPECT_EQ(float_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
    // Subnormal ties: 2^-25 is halfway between 0 and 2^-24 -> 0; 3 * 2^-25 -> 2 * 2^-24.
    EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);
    EXPECT_EQ(float_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
    EXPECT_EQ(float_to_f16(0x3p-25f), 0x0002);
    EXPECT_EQ(float_to_f16(0x5p-25f), 0x0002);
    // Rounding up out of the subnormal range gives the smallest normal.
    EXPECT_EQ(float_to_f16(0x1p-14f - 0x1p-26f), 0x0400);
}

TEST(HalfFloat, EveryF16ValueRoundTrips) {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const float f = f16_to_float(static_cast<uint16_t>(h));
        const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
        if (is_nan) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            continue;
        }
        ASSERT_EQ(float_to_f16(f), h) << std::hex << h;
    }
    EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
    EXPECT_EQ(f16_to_float(0x03ff), 0x3ffp-24f);
    EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_float(0x8000)), 0x80000000u);
}

// Every float (sampled with a stride co-prime to the bit layout) converts to the nearest half,
// with ties to the even one: checked against the neighbouring halves in double precision.
TEST(HalfFloat, SampledFloatsRoundToNearestF16) {
    for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
        const float f = from_bits(static_cast<uint32_t>(b));
        if (std::isnan(f)) continue;
        const uint16_t h = float_to_f16(f);
        const double got = f16_to_float(h);
        const double x = f;
        if (std::isinf(got)) {
            ASSERT_GE(std::fabs(x), 65520.0) << std::hex << b;
            continue;
        }
        // Neighbours of h in the direction of x and away from it.
        const uint16_t mag = h & 0x7fff;
        const double up = mag < 0x7bff
                              ? f16_to_float(static_cast<uint16_t>((h & 0x8000) | (mag + 1)))
                              : 65536.0 * (h & 0x8000 ? -1 : 1);
        const double err = std::fabs(x - got);
        ASSERT_LE(err, std::fabs(x - up)) << std::hex << b;
        if (mag > 0) {
            const double down = f16_to_float(static_cast<uint16_t>((h & 0x8000) | (mag - 1)));
            ASSERT_LE(err, std::fabs(x - down)) << std::hex << b;
            if (err == std::fabs(x - down)) {
                ASSERT_EQ(h & 1, 0) << "tie not to even " << std::hex << b;
            }
        }
        if (err == std::fabs(x - up)) {
            ASSERT_EQ(h & 1, 0) << "tie not to even " << std::hex << b;
        }
    }
}

#ifdef __FLT16_MAX__
// The compiler's own _Float16 conversion is an independent reference (IEEE, ties to even).
TEST(HalfFloat, AgreesWithCompilerFloat16) {
    // In bulk through the F16 encoder, so that the vectorised path is the one checked.
    std::vector<float> src;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 257) {
        const float f = from_bits(static_cast<uint32_t>(b));
        if (!std::isnan(f)) src.push_back(f);
    }
    src.resize(src.size() / 8 * 8);
    std::vector<uint16_t> got(src.size());
    row_encoder_for(TensorType::F16)->encode(src.data(), got.data(), src.size() / 8, 8);
    for (size_t i = 0; i < src.size(); ++i) {
        const _Float16 ref = static_cast<_Float16>(src[i]);
        uint16_t ref_bits;
        std::memcpy(&ref_bits, &ref, sizeof ref_bits);
        ASSERT_EQ(got[i], ref_bits) << std::hex << std::bit_cast<uint32_t>(src[i]);
    }
}
#endif

TEST(HalfFloat, SpecialValuesToBf16) {
    EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
    EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
    EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the max
    EXPECT_EQ(float_to_bf16(from_bits(0x00010000u)), 0x0001);             // subnormals are kept
    EXPECT_EQ(float_to_bf16(from_bits(0x80008000u)), 0x8000);  // subnormal tie -> even (0)
    // Ties: 0x3f808000 is halfway between 0x3f80 (even) and 0x3f81.
    EXPECT_EQ(float_to_bf16(from_bits(0x3f808000u)), 0x3f80);
    EXPECT_EQ(float_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // 0x3f81 odd -> up to even
    EXPECT_EQ(float_to_bf16(from_bits(0x3f808001u)), 0x3f81);  // above the tie
    EXPECT_EQ(float_to_bf16(from_bits(0x3f807fffu)), 0x3f80);  // below the tie
    for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f80ffffu}) {
        const uint16_t h = float_to_bf16(from_bits(b));
        EXPECT_TRUE(std::isnan(bf16_to_float(h))) << std::hex << b;
        EXPECT_EQ(h & 0x8000, (b >> 16) & 0x8000);
    }
}

TEST(HalfFloat, SampledFloatsRoundToNearestBf16) {
    for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
        const float f = from_bits(static_cast<uint32_t>(b));
        if (std::isnan(f)) continue;
        const uint16_t h = float_to_bf16(f);
        // Truncation is one candidate, the next bf16 up (in magnitude) the other.
        const uint32_t low = static_cast<uint32_t>(b) & 0xffffu;
        const uint16_t trunc = static_cast<uint16_t>(b >> 16);
        const uint16_t want =
            low < 0x8000 || (low == 0x8000 && (trunc & 1) == 0) ? trunc : trunc + 1;
        ASSERT_EQ(h, want) << std::hex << b;
        ASSERT_EQ(std::bit_cast<uint32_t>(bf16_to_float(h)), uint32_t{h} << 16);
    }
}

// The encoders (vectorised where the CPU allows) give the same bytes as the scalar conversion.
TEST(RowEncoder, VectorisedEncodersMatchScalarConversion) {
    std::vector<float> src;
    for (uint32_t b = 0; b < 200000; ++b) src.push_back(from_bits(b * 21473u + 0x9e37u));
    for (float s : {0.0f, -0.0f, 65520.0f, 0x1p-25f, 0x3p-25f, 1.0f + 0x1p-11f,
                    std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                    from_bits(0x7f800001u), from_bits(0x3f808000u)}) {
        src.push_back(s);
    }
    src.resize(src.size() / 8 * 8);
    const size_t rows = src.size() / 8;
    std::vector<uint16_t> f16(src.size()), bf16(src.size());
    row_encoder_for(TensorType::F16)->encode(src.data(), f16.data(), rows, 8);
    row_encoder_for(TensorType::BF16)->encode(src.data(), bf16.data(), rows, 8);
    for (size_t i = 0; i < src.size(); ++i) {
        ASSERT_EQ(f16[i], quant::detail::fp32_to_fp16_portable(src[i])) << i;
        ASSERT_EQ(bf16[i], quant::fp32_to_bf16(src[i])) << i;
    }
    std::vector<float> f32(src.size());
    row_encoder_for(TensorType::F32)->encode(src.data(), f32.data(), rows, 8);
    EXPECT_EQ(std::memcmp(f32.data(), src.data(), src.size() * sizeof(float)), 0);
}

TEST(RowEncoder, TypeRecipeKeepsSmallTensorsF32) {
    ModelHparams hp = *synth_preset("tiny");
    hp = with_layout_defaults(hp);
    TensorSpec norm{"blk.0.attn_norm.weight", TensorRole::AttnNorm, 0, false, {256}};
    TensorSpec bias{"blk.0.attn_q.bias", TensorRole::AttnQ, 0, true, {256}};
    TensorSpec router{"blk.0.ffn_gate_inp.weight", TensorRole::MoeRouter, 0, false, {256, 8}};
    TensorSpec q{"blk.0.attn_q.weight", TensorRole::AttnQ, 0, false, {256, 256}};
    TensorSpec experts{"blk.0.ffn_up_exps.weight", TensorRole::ExpertUp, 0, false, {256, 64, 8}};
    for (WeightFormat w : {WeightFormat(TensorType::BF16), WeightFormat(TensorType::Q8_0),
                           WeightFormat(TensorType::Q4_K, QuantMix::Q4_K_M)}) {
        EXPECT_EQ(synth_tensor_type(norm, w, hp), TensorType::F32);
        EXPECT_EQ(synth_tensor_type(bias, w, hp), TensorType::F32);
        EXPECT_EQ(synth_tensor_type(router, w, hp), TensorType::F32);
        EXPECT_EQ(synth_tensor_type(q, w, hp), w.base);
        EXPECT_EQ(synth_tensor_type(experts, w, hp), w.base);
    }
    EXPECT_FALSE(row_encoder_for(TensorType::IQ2_XXS).has_value());
    EXPECT_EQ(file_type_for(TensorType::F32), 0u);
    EXPECT_EQ(file_type_for(TensorType::F16), 1u);
    EXPECT_EQ(file_type_for(TensorType::BF16), 32u);
}

}  // namespace
}  // namespace strata
