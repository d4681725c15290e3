// Quantize -> dequantize round trips on fresh random data, for every supported format.
//
// Each format gets an element-wise error bound derived from the format and the scales the block
// actually stores (so fp16 rounding of a scale is accounted for, never hidden in a loose
// tolerance):
//   linear formats (Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, Q8_K): half a quantization step, plus
//     the largest code times the fp16 rounding error of the scale (and of the minimum);
//   grid formats (IQ4_NL, IQ4_XS, MXFP4) and the K-quants: every element lands on the grid value
//     nearest to it under the stored scales (up to the effect of the scale's fp16 rounding,
//     where the encoder chose codes with the unrounded scale);
// plus relative-RMS bounds on Gaussian data (measured figures in the table, with margins),
// block independence, constant and all-zero blocks, and re-quantization idempotence where the
// format guarantees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace strata::quant {
namespace {

using test::Pattern;

// Relative rounding of a scale when stored as fp16: at most 2^-11 relative for normal halves,
// half a subnormal step (2^-25) below.
double fp16_rounding(double v) {
    return std::max(std::fabs(v) * 0x1p-11, 0x1p-25);
}

// Float noise allowance for a block whose values reach amax.
double slack(double amax) {
    return 1e-6 * amax + 1e-37;
}

struct BlockView {
    const float* x;     // source values of the block
    const float* y;     // dequantized values
    const void* block;  // the stored block
    int n;              // elements in the block
};

double block_amax(const BlockView& v) {
    double a = 0;
    for (int i = 0; i < v.n; ++i) a = std::max(a, std::fabs(double(v.x[i])));
    return a;
}

// ---- linear formats ----------------------------------------------------------------------------

// Q8_0 / Q8_1: d = amax / 127; |x - q d16| <= d/2 + 127 |d - d16|.
template <typename Block>
void check_q8(const BlockView& v) {
    const auto& b = *static_cast<const Block*>(v.block);
    const double amax = block_amax(v);
    const double d = amax / 127, d16 = fp16_to_fp32(b.d);
    EXPECT_LE(std::fabs(d - d16), fp16_rounding(d));
    const double bound = d / 2 + 127 * std::fabs(d - d16) + slack(amax);
    for (int i = 0; i < v.n; ++i) ASSERT_LE(std::fabs(v.x[i] - v.y[i]), bound) << i;
}

void check_q8_1_sum(const BlockView& v) {
    check_q8<BlockQ8_1>(v);
    const auto& b = *static_cast<const BlockQ8_1*>(v.block);
    int sum = 0;
    for (int i = 0; i < kQK; ++i) sum += b.qs[i];
    const double s = double(sum) * (block_amax(v) / 127);  // d * sum(qs), d unrounded
    EXPECT_LE(std::fabs(fp16_to_fp32(b.s) - s), fp16_rounding(s) + slack(std::fabs(s)));
}

// Q4_0 / Q5_0: d = max / -half (max: the value of largest magnitude). Codes q - half in
// [-half, half - 1]; values on the far side beyond (half - 0.5) |d| clamp to (half - 1) d.
template <typename Block, int kHalf>
void check_symmetric_legacy(const BlockView& v) {
    const auto& b = *static_cast<const Block*>(v.block);
    double max = 0;
    for (int i = 0; i < v.n; ++i) {
        if (std::fabs(v.x[i]) > std::fabs(max)) max = v.x[i];
    }
    const double d = max / -kHalf, d16 = fp16_to_fp32(b.d);
    EXPECT_LE(std::fabs(d - d16), fp16_rounding(d));
    const double scale_err = kHalf * std::fabs(d - d16) + slack(std::fabs(max));
    for (int i = 0; i < v.n; ++i) {
        const double t = d != 0 ? v.x[i] / d : 0;
        const double step_err =
            t > kHalf - 0.5 ? std::fabs(v.x[i] - (kHalf - 1) * d) : std::fabs(d) / 2;
        ASSERT_LE(std::fabs(v.x[i] - v.y[i]), step_err + scale_err) << i;
    }
}

// Q4_1 / Q5_1: d = (max - min) / (levels - 1), m = min: |x - y| <= d/2 + (levels - 1)|d - d16|
// + |min - m16|.
template <typename Block, int kLevels>
void check_affine_legacy(const BlockView& v) {
    const auto& b = *static_cast<const Block*>(v.block);
    const double lo = *std::min_element(v.x, v.x + v.n), hi = *std::max_element(v.x, v.x + v.n);
    const double d = (hi - lo) / (kLevels - 1), d16 = fp16_to_fp32(b.d), m16 = fp16_to_fp32(b.m);
    EXPECT_LE(std::fabs(d - d16), fp16_rounding(d));
    EXPECT_LE(std::fabs(lo - m16), fp16_rounding(lo));
    const double bound = d / 2 + (kLevels - 1) * std::fabs(d - d16) + std::fabs(lo - m16) +
                         slack(std::max(std::fabs(lo), std::fabs(hi)));
    for (int i = 0; i < v.n; ++i) ASSERT_LE(std::fabs(v.x[i] - v.y[i]), bound) << i;
}

// Q8_K: fp32 d, codes in [-127, 127], the largest magnitude maps to -127, bsums are the sums of
// each 16 codes: |x - q d| <= |d| / 2.
void check_q8_k(const BlockView& v) {
    const auto& b = *static_cast<const BlockQ8_K*>(v.block);
    const double amax = block_amax(v);
    EXPECT_NEAR(std::fabs(b.d), amax / 127, amax / 127 * 1e-6);
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
        EXPECT_EQ(b.bsums[g], sum) << g;
    }
    for (int i = 0; i < v.n; ++i) {
        ASSERT_GE(b.qs[i], -127);
        ASSERT_LE(std::fabs(v.x[i] - v.y[i]), std::fabs(b.d) / 2 + slack(amax)) << i;
        if (std::fabs(v.x[i]) == amax && amax > 0) {
            ASSERT_EQ(std::abs(int(b.qs[i])), 127);
        }
    }
}

// ---- grid formats ------------------------------------------------------------------------------

// Distance from x to the nearest of the levels.
double nearest_distance(double x, const std::vector<double>& levels) {
    double best = INFINITY;
    for (double l : levels) best = std::min(best, std::fabs(x - l));
    return best;
}

// Every element of [x, x + n) dequantized within `extra` of its nearest level.
void expect_nearest(const float* x, const float* y, int n, const std::vector<double>& levels,
                    double extra) {
    for (int i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(x[i] - y[i]), nearest_distance(x[i], levels) + extra)
            << "element " << i << " x=" << x[i] << " y=" << y[i];
    }
}

std::vector<double> iq4_levels(double scale) {
    std::vector<double> l;
    for (int8_t g : kIq4nlValues) l.push_back(scale * g);
    return l;
}

// IQ4_NL: nearest grid value of d16 * kIq4nlValues, up to 2 * 127 * (fp16 rounding of d).
void check_iq4_nl(const BlockView& v) {
    const double d16 = fp16_to_fp32(static_cast<const BlockIQ4_NL*>(v.block)->d);
    expect_nearest(v.x, v.y, v.n, iq4_levels(d16),
                   2 * 127 * fp16_rounding(d16) + slack(block_amax(v)));
}

// IQ4_XS: per 32-element sub-block, nearest grid value of d16 * (ls - 32) * kIq4nlValues; the
// encoder used the unrounded d, |ls - 32| <= 32.
void check_iq4_xs(const BlockView& v) {
    const auto& b = *static_cast<const BlockIQ4_XS*>(v.block);
    const double d16 = fp16_to_fp32(b.d);
    for (int s = 0; s < 8; ++s) {
        const double dl = d16 * (iq4xs_scale(b, s) - 32);
        expect_nearest(v.x + 32 * s, v.y + 32 * s, 32, iq4_levels(dl),
                       2 * 127 * 32 * fp16_rounding(d16) + slack(block_amax(v)));
    }
}

// MXFP4: exactly the nearest E2M1 value times 2^(e - 127) (the scale is a power of two, exact);
// the block maximum sits in [4, 8) scale units, so nothing is further than 2 units off.
void check_mxfp4(const BlockView& v) {
    const auto& b = *static_cast<const BlockMXFP4*>(v.block);
    const double unit = std::ldexp(1.0, int(b.e) - 127);  // the E2M1 value 1.0
    const double amax = block_amax(v);
    if (amax > 0) {
        EXPECT_GE(amax, 4 * unit);
        EXPECT_LT(amax, 8 * unit);
    }
    std::vector<double> levels;
    for (int c = 0; c < 16; ++c) {
        // E2M1 from its bits: sign, 2 exponent bits (bias 1), 1 mantissa bit.
        const int e = (c >> 1) & 3, m = c & 1;
        const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
        levels.push_back((c & 8 ? -mag : mag) * unit);
    }
    expect_nearest(v.x, v.y, v.n, levels, slack(amax));
    for (int i = 0; i < v.n; ++i) ASSERT_LE(std::fabs(v.x[i] - v.y[i]), 2 * unit) << i;
}

// ---- K-quants: nearest level under the stored sub-block scales ---------------------------------

std::vector<double> affine_levels(float ds, float dm, int nmax) {
    std::vector<double> l;
    for (int q = 0; q <= nmax; ++q) l.push_back(ds * float(q) - dm);  // as the dequantizer does
    return l;
}

void check_q2_k(const BlockView& v) {
    const auto& b = *static_cast<const BlockQ2_K*>(v.block);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 16; ++s) {
        const float ds = d * float(b.scales[s] & 0x0f), dm = dmin * float(b.scales[s] >> 4);
        expect_nearest(v.x + 16 * s, v.y + 16 * s, 16, affine_levels(ds, dm, 3),
                       slack(block_amax(v)));
    }
}

template <typename Block, int kNmax>
void check_q45_k(const BlockView& v) {
    const auto& b = *static_cast<const Block*>(v.block);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
        const ScaleMin sm = k4_scale_min(b.scales, s);
        expect_nearest(v.x + 32 * s, v.y + 32 * s, 32,
                       affine_levels(d * float(sm.scale), dmin * float(sm.min), kNmax),
                       slack(block_amax(v)));
    }
}

std::vector<double> symmetric_levels(float dl, int qneg, int qpos) {
    std::vector<double> l;
    for (int q = -qneg; q <= qpos; ++q) l.push_back(dl * float(q));
    return l;
}

void check_q3_k(const BlockView& v) {
    const auto& b = *static_cast<const BlockQ3_K*>(v.block);
    const float d = fp16_to_fp32(b.d);
    for (int s = 0; s < 16; ++s) {
        expect_nearest(v.x + 16 * s, v.y + 16 * s, 16,
                       symmetric_levels(d * float(q3k_scale(b.scales, s) - 32), 4, 3),
                       slack(block_amax(v)));
    }
}

void check_q6_k(const BlockView& v) {
    const auto& b = *static_cast<const BlockQ6_K*>(v.block);
    const float d = fp16_to_fp32(b.d);
    for (int s = 0; s < 16; ++s) {
        expect_nearest(v.x + 16 * s, v.y + 16 * s, 16,
                       symmetric_levels(d * float(b.scales[s]), 32, 31), slack(block_amax(v)));
    }
}

// F16 / BF16: one rounding per element.
void check_f16(const BlockView& v) {
    ASSERT_LE(std::fabs(v.x[0] - v.y[0]), fp16_rounding(v.x[0]) + 1e-37);
}
void check_bf16(const BlockView& v) {
    ASSERT_LE(std::fabs(v.x[0] - v.y[0]), std::fabs(v.x[0]) * 0x1p-8 + 1e-38);
}
void check_f32(const BlockView& v) {
    ASSERT_EQ(v.x[0], v.y[0]);
}

// ---- the table ---------------------------------------------------------------------------------

enum class Idempotence {
    kBytes,   // quantize(dequantize(b)) == b whenever b's scale did not underflow to 0
    kValues,  // Q8_K: same values to the last bit or two: d = 1 / (-127 / max) moves by an
              // ulp, and when +max and -max tie the codes may all flip sign
    kNone,    // the scale search may pick another scale for the dequantized values
};

struct Format {
    TensorType type;
    void (*check_block)(const BlockView&);
    // Relative RMS error on N(0, 1) rows: measured (comment) plus a margin of about 15%; F16 and
    // BF16 use their per-element rounding bounds.
    double gaussian_rel_rms;
    Idempotence idempotence;
    // A constant block must come back within one rounding of its stored scale: relative
    // `scale_rounding`, or for fp16 subnormal scales 2^-25 absolute, times the largest
    // |code x sub-block multiplier| (`max_code_product`) the format can store a value with.
    double scale_rounding;
    int max_code_product;
};

// Gaussian bounds are the measured figures (the test prints them) plus about 15%:
// Q8_0 5.39e-3, Q8_1 5.33e-3, Q4_0 8.48e-2, Q5_0 4.23e-2, Q4_1 7.85e-2, Q5_1 3.69e-2,
// Q8_K 7.06e-3, IQ4_NL 7.72e-2, IQ4_XS 7.67e-2, MXFP4 1.15e-1, Q2_K 2.64e-1, Q3_K 1.42e-1,
// Q4_K 6.97e-2, Q5_K 3.45e-2, Q6_K 1.69e-2 (F16 2.1e-4 and BF16 1.7e-3 measured).
// Q8_1 is not idempotent in bytes: its s is d * sum(qs) with d unrounded, and a second pass
// stores it from the rounded d.
constexpr double kFp16 = 0x1p-11;
constexpr auto kNone = Idempotence::kNone;
constexpr auto kBytes = Idempotence::kBytes;
const Format kFormats[] = {
    {TensorType::F32, check_f32, 0, kBytes, 0, 0},
    {TensorType::F16, check_f16, 0x1p-11, kBytes, kFp16, 1},
    {TensorType::BF16, check_bf16, 0x1p-8, kBytes, 0x1p-8, 0},
    {TensorType::Q8_0, check_q8<BlockQ8_0>, 6.2e-3, kBytes, kFp16, 127},
    {TensorType::Q8_1, check_q8_1_sum, 6.2e-3, kNone, kFp16, 127},
    {TensorType::Q4_0, check_symmetric_legacy<BlockQ4_0, 8>, 9.8e-2, kBytes, kFp16, 8},
    {TensorType::Q5_0, check_symmetric_legacy<BlockQ5_0, 16>, 4.9e-2, kBytes, kFp16, 16},
    {TensorType::Q4_1, check_affine_legacy<BlockQ4_1, 16>, 9.0e-2, kNone, kFp16, 15},
    {TensorType::Q5_1, check_affine_legacy<BlockQ5_1, 32>, 4.3e-2, kNone, kFp16, 31},
    {TensorType::Q8_K, check_q8_k, 8.2e-3, Idempotence::kValues, 1e-7, 0},
    {TensorType::IQ4_NL, check_iq4_nl, 8.9e-2, kNone, kFp16, 127},
    {TensorType::IQ4_XS, check_iq4_xs, 8.9e-2, kNone, kFp16, 32 * 127},
    {TensorType::MXFP4, check_mxfp4, 1.33e-1, kBytes, 0, 0},
    {TensorType::Q2_K, check_q2_k, 3.0e-1, kNone, kFp16, 15 * 3},
    {TensorType::Q3_K, check_q3_k, 1.64e-1, kNone, kFp16, 32 * 4},
    {TensorType::Q4_K, check_q45_k<BlockQ4_K, 15>, 8.0e-2, kNone, kFp16, 63 * 15},
    {TensorType::Q5_K, check_q45_k<BlockQ5_K, 31>, 4.0e-2, kNone, kFp16, 63 * 31},
    {TensorType::Q6_K, check_q6_k, 1.95e-2, kNone, kFp16, 128 * 32},
};

// gtest prints a parameter on failure: the type name says which format.
void PrintTo(const Format& f, std::ostream* os) {
    *os << tensor_type_name(f.type);
}

class QuantRoundTrip : public ::testing::TestWithParam<Format> {};

std::string format_name(const ::testing::TestParamInfo<Format>& info) {
    return std::string(tensor_type_name(info.param.type));
}

// Blocks per test row: several, so that block stepping is exercised.
int64_t row_length(TensorType t) {
    return 8 * std::max(test::block_size(t), 32);
}

TEST_P(QuantRoundTrip, EveryElementWithinTheFormatBound) {
    const Format& f = GetParam();
    std::mt19937 rng(uint32_t(f.type) * 7919 + 1);
    const int64_t n = row_length(f.type);
    const int bs = test::block_size(f.type), bb = test::block_bytes(f.type);
    for (Pattern p : test::kAllPatterns) {
        for (float scale : {1.0f, 3e-3f, 250.0f}) {
            SCOPED_TRACE(std::string(test::pattern_name(p)) + " scale " + std::to_string(scale));
            const std::vector<float> x = test::make_values(p, size_t(n), rng, scale);
            const test::QuantBuffer q = test::quantize(f.type, x);
            const std::vector<float> y = test::dequantize(f.type, q, n);
            for (int64_t b = 0; b < n / bs; ++b) {
                SCOPED_TRACE("block " + std::to_string(b));
                f.check_block({x.data() + b * bs, y.data() + b * bs, q.bytes() + b * bb, bs});
                if (::testing::Test::HasFatalFailure()) return;
            }
        }
    }
}

TEST_P(QuantRoundTrip, GaussianRowsMeetTheRmsBound) {
    const Format& f = GetParam();
    std::mt19937 rng(uint32_t(f.type) * 31 + 5);
    test::ErrorStats stats;
    for (int row = 0; row < 16; ++row) {
        const std::vector<float> x =
            test::make_values(Pattern::kGaussian, size_t(row_length(f.type)), rng);
        const std::vector<float> y =
            test::dequantize(f.type, test::quantize(f.type, x), int64_t(x.size()));
        stats.add(x.data(), y.data(), x.size());
    }
    std::printf("  %-6s relative RMS error on N(0,1): %.4e (bound %.1e)\n",
                std::string(tensor_type_name(f.type)).c_str(), stats.rel_rms(), f.gaussian_rel_rms);
    EXPECT_LE(stats.rel_rms(), f.gaussian_rel_rms);
}

TEST_P(QuantRoundTrip, ZeroAndConstantBlocks) {
    const Format& f = GetParam();
    const int64_t n = row_length(f.type);
    const std::vector<float> zeros(size_t(n), 0.0f);
    for (float v : test::dequantize(f.type, test::quantize(f.type, zeros), n)) ASSERT_EQ(v, 0.0f);
    if (f.type == TensorType::MXFP4) return;  // E2M1 has 3 significant levels: see the bound test
    for (float c : {1.0f, -0.37f, 1234.5f, 2e-3f}) {
        const std::vector<float> x(size_t(n), c);
        const double tol = 2 * (std::fabs(c) * f.scale_rounding + f.max_code_product * 0x1p-25);
        for (float v : test::dequantize(f.type, test::quantize(f.type, x), n)) {
            ASSERT_NEAR(v, c, tol) << c;
        }
    }
}

// Quantizing a whole row equals quantizing its blocks one by one.
TEST_P(QuantRoundTrip, BlocksAreIndependent) {
    const Format& f = GetParam();
    std::mt19937 rng(99);
    const int64_t n = row_length(f.type);
    const int bs = test::block_size(f.type), bb = test::block_bytes(f.type);
    const std::vector<float> x = test::make_values(Pattern::kMixedScales, size_t(n), rng);
    const test::QuantBuffer whole = test::quantize(f.type, x);
    for (int64_t b = 0; b < n / bs; ++b) {
        const std::vector<float> part(x.begin() + b * bs, x.begin() + (b + 1) * bs);
        const test::QuantBuffer one = test::quantize(f.type, part);
        ASSERT_EQ(std::memcmp(one.bytes(), whole.bytes() + b * bb, size_t(bb)), 0) << b;
    }
}

// Only for the formats that guarantee it (instantiated below with those alone).
class QuantRequantization : public ::testing::TestWithParam<Format> {};

TEST_P(QuantRequantization, RequantizingADequantizedRowChangesNothing) {
    const Format& f = GetParam();
    std::mt19937 rng(4242);
    const int64_t n = row_length(f.type);
    const int bs = test::block_size(f.type), bb = test::block_bytes(f.type);
    for (Pattern p : test::kAllPatterns) {
        SCOPED_TRACE(test::pattern_name(p));
        const test::QuantBuffer q1 = test::quantize(f.type, test::make_values(p, size_t(n), rng));
        const std::vector<float> y1 = test::dequantize(f.type, q1, n);
        const test::QuantBuffer q2 = test::quantize(f.type, y1);
        const std::vector<float> y2 = test::dequantize(f.type, q2, n);
        for (int64_t b = 0; b < n / bs; ++b) {
            const uint8_t* b1 = q1.bytes() + b * bb;
            const uint8_t* b2 = q2.bytes() + b * bb;
            if (f.idempotence == Idempotence::kValues) {
                for (int i = 0; i < bs; ++i) {
                    const float a = y1[size_t(b * bs + i)], c = y2[size_t(b * bs + i)];
                    ASSERT_NEAR(a, c, std::fabs(a) * 2 * FLT_EPSILON) << b;
                }
                continue;
            }
            // A block whose every value was 0 after the first pass (its scale underflowed)
            // may store different codes for the same zeros; its values must still agree.
            bool all_zero = true;
            for (int i = 0; i < bs; ++i) all_zero = all_zero && y1[size_t(b * bs + i)] == 0;
            if (!all_zero) {
                ASSERT_EQ(std::memcmp(b1, b2, size_t(bb)), 0) << "block " << b;
            }
            for (int i = 0; i < bs; ++i) ASSERT_EQ(y1[size_t(b * bs + i)], y2[size_t(b * bs + i)]);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, QuantRoundTrip, ::testing::ValuesIn(kFormats), format_name);

std::vector<Format> idempotent_formats() {
    std::vector<Format> out;
    for (const Format& f : kFormats) {
        if (f.idempotence != Idempotence::kNone) out.push_back(f);
    }
    return out;
}
INSTANTIATE_TEST_SUITE_P(IdempotentFormats, QuantRequantization,
                         ::testing::ValuesIn(idempotent_formats()), format_name);

}  // namespace
}  // namespace strata::quant
