// fp16, bf16 and E8M0 conversions: exhaustive over every 16-bit pattern, rounding checked
// against exact arithmetic in double, and the F16C paths held against the portable ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "quant/float_formats.h"

namespace strata::quant {
namespace {

using detail::float_bits;
using detail::float_from_bits;

bool is_fp16_nan(uint16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}
bool is_bf16_nan(uint16_t b) {
    return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0;
}

// The value of a half from its fields, computed in double (an oracle independent of the
// conversion code): (-1)^s * 2^(e - 15) * (1 + m / 1024), or m * 2^-24 when e = 0.
double fp16_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f) {
        v = m ? std::nan("") : INFINITY;
    } else if (e == 0) {
        v = std::ldexp(double(m), -24);
    } else {
        v = std::ldexp(1.0 + m / 1024.0, e - 15);
    }
    return s ? -v : v;
}

TEST(QuantFloatFormats, EveryHalfConvertsToItsExactValue) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_fp32(uint16_t(h));
        if (is_fp16_nan(uint16_t(h))) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            ASSERT_EQ(float_bits(f) >> 31, h >> 15) << "NaN sign, " << std::hex << h;
        } else {
            ASSERT_EQ(double(f), fp16_value(uint16_t(h))) << std::hex << h;
            ASSERT_EQ(std::signbit(f), bool(h >> 15)) << std::hex << h;  // -0 stays -0
        }
    }
}

TEST(QuantFloatFormats, EveryHalfSurvivesARoundTripThroughFloat) {
    int nans = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t back = fp32_to_fp16(fp16_to_fp32(uint16_t(h)));
        if (is_fp16_nan(uint16_t(h))) {
            // NaN stays NaN with its sign and payload; only the quiet bit may be added.
            ASSERT_TRUE(is_fp16_nan(back)) << std::hex << h;
            ASSERT_EQ(back, h | 0x0200) << std::hex << h;
            ++nans;
        } else {
            ASSERT_EQ(back, h) << std::hex << h;
        }
    }
    EXPECT_EQ(nans, 2 * 1023);
}

// Checks that fp32_to_fp16(f) is the half nearest to f, ties to the even code, by comparing in
// double with the neighbouring halves.
void expect_nearest_half(float f) {
    const uint16_t h = fp32_to_fp16(f);
    const double x = f;
    if (std::fabs(x) >= 65520.0) {  // 65520 is the midpoint between 65504 and 2^16: Inf
        EXPECT_EQ(h & 0x7fff, 0x7c00) << f;
        return;
    }
    ASSERT_LT(h & 0x7fff, 0x7c00) << f;
    const double got = fp16_value(h);
    const double err = std::fabs(got - x);
    for (int step : {-1, 1}) {
        const int mag = (h & 0x7fff) + step;
        if (mag < 0 || mag >= 0x7c00) continue;
        const double other = fp16_value(uint16_t((h & 0x8000) | mag));
        const double other_err = std::fabs(other - x);
        ASSERT_LE(err, other_err) << f << " -> " << std::hex << h;
        if (err == other_err) {
            ASSERT_EQ(h & 1, 0) << "tie must go to even: " << f;
        }
    }
    if (x != 0) {
        ASSERT_EQ(std::signbit(fp16_value(h)), std::signbit(x)) << f;
    }
}

TEST(QuantFloatFormats, FloatToHalfRoundsTiesToEvenAtEveryMidpoint) {
    // The midpoint of two adjacent halves has at most 12 significant bits: exact in float.
    for (uint32_t mag = 0; mag < 0x7bff; ++mag) {
        for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
            const double lo = fp16_value(uint16_t(sign | mag));
            const double hi = fp16_value(uint16_t(sign | (mag + 1)));
            const float mid = float((lo + hi) / 2);
            ASSERT_EQ(double(mid), (lo + hi) / 2);
            const uint16_t even = uint16_t(sign | ((mag & 1) ? mag + 1 : mag));
            ASSERT_EQ(fp32_to_fp16(mid), even) << mid;
            // One float step either side of the midpoint decides by distance.
            ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, float(lo))), uint16_t(sign | mag)) << mid;
            ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, float(hi))), uint16_t(sign | (mag + 1)))
                << mid;
        }
    }
}

TEST(QuantFloatFormats, FloatToHalfEdgeCases) {
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);  // just below the midpoint to 2^16
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);    // the midpoint: ties to even, which is Inf
    EXPECT_EQ(fp32_to_fp16(-1e30f), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
    EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);         // smallest subnormal
    EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);         // half of it: tie to even (zero)
    EXPECT_EQ(fp32_to_fp16(0x1.000002p-25f), 0x0001);  // just above the tie
    EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);         // 1.5 units: tie to even (2)
    EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);         // smallest normal
    EXPECT_EQ(fp32_to_fp16(0x1.ff8p-15f), 0x03ff);     // largest subnormal: 1023 units
    EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);     // 1023.5 units: tie, up into the normals
    EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
    EXPECT_EQ(fp32_to_fp16(-1e-45f), 0x8000);  // float subnormal input
    const uint16_t qnan = fp32_to_fp16(std::nanf(""));
    EXPECT_TRUE(is_fp16_nan(qnan));
    // A float NaN whose payload sits only in bits the half drops must not turn into Inf.
    EXPECT_TRUE(is_fp16_nan(fp32_to_fp16(float_from_bits(0x7f800001u))));
    EXPECT_TRUE(is_fp16_nan(fp32_to_fp16(float_from_bits(0xff800001u))));
}

TEST(QuantFloatFormats, FloatToHalfIsNearestOnRandomFloats) {
    std::mt19937 rng(1234);
    std::uniform_int_distribution<uint32_t> bits;
    std::uniform_real_distribution<float> exponent(-26, 17);
    for (int i = 0; i < 200000; ++i) {
        // Half the samples are arbitrary bit patterns, half are spread over the half's range.
        float f = float_from_bits(bits(rng));
        if (i % 2) f = std::copysign(std::exp2(exponent(rng)), f);
        if (std::isnan(f)) continue;
        expect_nearest_half(f);
    }
}

// The portable code paths against the F16C instructions, when this machine has them: every
// half, and every 257th float bit pattern (16.7 M values across all exponents and NaNs).
TEST(QuantFloatFormats, F16cAndPortablePathsAgreeBitForBit) {
    std::printf("  fp16 row path on this machine: %s\n", fp16_row_path());
    std::vector<uint16_t> halves(65536);
    for (uint32_t h = 0; h < 65536; ++h) halves[h] = uint16_t(h);
    std::vector<float> a(65536), b(65536);
    fp16_to_fp32_row(halves.data(), a.data(), 65536);
    detail::fp16_to_fp32_row_portable(halves.data(), b.data(), 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
        ASSERT_EQ(float_bits(a[h]), float_bits(b[h])) << std::hex << h;
        ASSERT_EQ(float_bits(fp16_to_fp32(uint16_t(h))), float_bits(b[h])) << std::hex << h;
    }

    std::vector<float> floats;
    for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 257) {
        floats.push_back(float_from_bits(uint32_t(u)));
    }
    std::vector<uint16_t> x(floats.size()), y(floats.size());
    fp32_to_fp16_row(floats.data(), x.data(), int64_t(floats.size()));
    detail::fp32_to_fp16_row_portable(floats.data(), y.data(), int64_t(floats.size()));
    for (size_t i = 0; i < floats.size(); ++i) {
        ASSERT_EQ(x[i], y[i]) << std::hex << float_bits(floats[i]);
        if (i % 64 == 0) {
            ASSERT_EQ(fp32_to_fp16(floats[i]), y[i]) << std::hex << float_bits(floats[i]);
        }
    }
}

TEST(QuantFloatFormats, RowConvertersHandleEveryTailLength) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0, 100);
    for (int n = 0; n <= 40; ++n) {
        std::vector<float> f(size_t(n) + 1);
        for (auto& v : f) v = normal(rng);
        std::vector<uint16_t> h(size_t(n) + 1, 0xabcd), b(size_t(n) + 1, 0xabcd);
        fp32_to_fp16_row(f.data(), h.data(), n);
        fp32_to_bf16_row(f.data(), b.data(), n);
        EXPECT_EQ(h[size_t(n)], 0xabcd) << "wrote past the end, n = " << n;
        EXPECT_EQ(b[size_t(n)], 0xabcd) << "wrote past the end, n = " << n;
        std::vector<float> back(size_t(n) + 1, -7), back_bf(size_t(n) + 1, -7);
        fp16_to_fp32_row(h.data(), back.data(), n);
        bf16_to_fp32_row(b.data(), back_bf.data(), n);
        EXPECT_EQ(back[size_t(n)], -7);
        EXPECT_EQ(back_bf[size_t(n)], -7);
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(h[size_t(i)], fp32_to_fp16(f[size_t(i)]));
            ASSERT_EQ(b[size_t(i)], fp32_to_bf16(f[size_t(i)]));
            ASSERT_EQ(back[size_t(i)], fp16_to_fp32(h[size_t(i)]));
            ASSERT_EQ(back_bf[size_t(i)], bf16_to_fp32(b[size_t(i)]));
        }
    }
}

TEST(QuantFloatFormats, EveryBf16SurvivesARoundTripThroughFloat) {
    for (uint32_t b = 0; b < 65536; ++b) {
        const float f = bf16_to_fp32(uint16_t(b));
        ASSERT_EQ(float_bits(f), b << 16);  // widening is exact: the float's top half
        const uint16_t back = fp32_to_bf16(f);
        if (is_bf16_nan(uint16_t(b))) {
            ASSERT_TRUE(is_bf16_nan(back)) << std::hex << b;
            ASSERT_EQ(back, b | 0x0040) << std::hex << b;  // quieted, sign and payload kept
        } else {
            ASSERT_EQ(back, b) << std::hex << b;
        }
    }
}

TEST(QuantFloatFormats, FloatToBf16RoundsToNearestEven) {
    // Every bf16 magnitude below Inf, with the float halfway to the next one and a step either
    // side of it.
    for (uint32_t b = 0; b < 0x7f80; ++b) {
        for (uint32_t sign : {0u, 0x8000u}) {
            const uint32_t base = (sign | b) << 16;
            const uint16_t lo = uint16_t(sign | b), hi = uint16_t(sign | (b + 1));
            ASSERT_EQ(fp32_to_bf16(float_from_bits(base)), lo);
            ASSERT_EQ(fp32_to_bf16(float_from_bits(base + 0x7fff)), lo);
            ASSERT_EQ(fp32_to_bf16(float_from_bits(base + 0x8000)), (b & 1) ? hi : lo);
            ASSERT_EQ(fp32_to_bf16(float_from_bits(base + 0x8001)), hi);
        }
    }
    EXPECT_EQ(fp32_to_bf16(3.4028235e38f), 0x7f80);  // FLT_MAX rounds up to Inf
    EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
    EXPECT_TRUE(is_bf16_nan(fp32_to_bf16(float_from_bits(0x7f800001u))));  // not Inf
    EXPECT_EQ(fp32_to_bf16(1e-40f), 0x0001);  // float subnormals stay subnormal
}

TEST(QuantFloatFormats, E8M0IsAPowerOfTwo) {
    for (int e = 0; e < 255; ++e) {
        EXPECT_EQ(double(e8m0_to_fp32(uint8_t(e))), std::ldexp(1.0, e - 127)) << e;
    }
    for (int e = 0; e < 256; ++e) {
        EXPECT_EQ(double(e8m0_to_fp32_half(uint8_t(e))), std::ldexp(1.0, e - 128)) << e;
    }
}

}  // namespace
}  // namespace strata::quant
