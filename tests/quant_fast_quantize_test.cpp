// The fast quantizers (fast_quantize.h) against the scalar reference (quantize_row): on every
// path this machine runs, every type with a fast encoder must give the reference's bytes, bit
// for bit, on fresh random data full of awkward sub-blocks (zeros, -0, constants, outliers,
// values of one sign, fp16-subnormal and near-overflow scales, float subnormals, and values that
// land exactly on rounding ties), mixed within each super-block so that the SIMD lanes of one
// pass take different branches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/fast_quantize.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace strata::quant {
namespace {

using T = TensorType;

constexpr T kFastTypes[] = {T::Q2_K, T::Q3_K,   T::Q4_K,   T::Q5_K,
                            T::Q6_K, T::IQ4_NL, T::IQ4_XS, T::Q8_0};

// Kinds of 16-element pieces a row is made of.
enum class Piece {
    kGaussian,
    kZero,
    kNegativeZero,
    kConstant,
    kOutlier,   // Gaussian with one value 50x larger
    kHalves,    // multiples of 0.5 of a small range: many codes sit exactly on ties
    kPositive,  // all one sign (the affine formats' minimum is then 0)
    kNegative,
    kTwoValues,
    kSparse,     // mostly zeros
    kSubnormal,  // float subnormals
    // Exact ties: with a largest value of top * 2^k, the first scale a search tries is 2^k (for
    // the K-quants: top the last code, or minus the most negative one; for IQ4: 127), and the
    // values sit exactly halfway between two codes (K-quants: j + 0.5; IQ4: between two grid
    // values) under it.
    kCodeTies,
    kGridTies,
    kCount,
};

// A scale for a piece: mostly ordinary weights, sometimes tiny (fp16-subnormal super-block
// scales) or large (near the fp16 range of the super-block scale).
float random_scale(std::mt19937& rng) {
    std::uniform_int_distribution<int> kind(0, 9);
    std::uniform_real_distribution<float> u(0, 1);
    switch (kind(rng)) {
        case 0:
            return std::pow(10.0f, -9 + 4 * u(rng));  // 1e-9 .. 1e-5
        case 1:
            return std::pow(10.0f, 2 + 2.5f * u(rng));  // 1e2 .. 3e4
        default:
            return std::pow(10.0f, -3 + 3 * u(rng));  // 1e-3 .. 1
    }
}

// The ties of a row: one power of two and one top value for all its tie pieces, so that the
// pieces of a sub-block agree on them.
struct Ties {
    float unit;
    int top;  // 3, 15, 31 (Q2_K, Q4_K, Q5_K last code) or -4, -32 (Q3_K, Q6_K first code)
};

void fill_piece(Piece p, float scale, const Ties& ties, std::mt19937& rng, float* x) {
    std::normal_distribution<float> normal(0, 1);
    std::uniform_int_distribution<int> small(-6, 6), index(0, 15);
    std::uniform_real_distribution<float> u(0, 1);
    for (int i = 0; i < 16; ++i) x[i] = normal(rng) * scale;
    switch (p) {
        case Piece::kGaussian:
        case Piece::kCount:
            break;
        case Piece::kZero:
            for (int i = 0; i < 16; ++i) x[i] = 0;
            break;
        case Piece::kNegativeZero:
            for (int i = 0; i < 16; ++i) x[i] = i % 3 == 0 ? -0.0f : 0.0f;
            break;
        case Piece::kConstant: {
            const float c = (u(rng) < 0.5f ? -1 : 1) * scale;
            for (int i = 0; i < 16; ++i) x[i] = c;
            break;
        }
        case Piece::kOutlier:
            x[index(rng)] *= 50;
            break;
        case Piece::kHalves:
            for (int i = 0; i < 16; ++i) x[i] = 0.5f * float(small(rng));
            break;
        case Piece::kPositive:
            for (int i = 0; i < 16; ++i) x[i] = std::fabs(x[i]) + 0.1f * scale;
            break;
        case Piece::kNegative:
            for (int i = 0; i < 16; ++i) x[i] = -std::fabs(x[i]);
            break;
        case Piece::kTwoValues:
            for (int i = 0; i < 16; ++i) x[i] = i % 2 ? scale : -0.5f * scale;
            break;
        case Piece::kSparse:
            for (int i = 0; i < 16; ++i) x[i] = u(rng) < 0.85f ? 0.0f : x[i];
            break;
        case Piece::kSubnormal:
            for (int i = 0; i < 16; ++i) x[i] = float(small(rng)) * 1e-40f;
            break;
        case Piece::kCodeTies: {
            const int top = ties.top, n = std::abs(top);
            std::uniform_int_distribution<int> code(0, n - 1);
            for (int i = 0; i < 16; ++i) {
                const float half = float(code(rng)) + 0.5f;  // between two codes
                x[i] = (top > 0 ? half : -half) * ties.unit;
            }
            x[0] = float(top) * ties.unit;
            if (top > 0) x[1] = 0;  // the affine formats' minimum at code 0
            break;
        }
        case Piece::kGridTies: {
            std::uniform_int_distribution<int> k(0, 14);
            for (int i = 0; i < 16; ++i) {
                const int j = k(rng);  // halfway between grid values j and j + 1
                x[i] = 0.5f * float(kIq4nlValues[j] + kIq4nlValues[j + 1]) * ties.unit;
            }
            x[0] = -127.0f * ties.unit;
            break;
        }
    }
}

// n values (a multiple of 16); each 16-element piece of a random kind, a quarter Gaussian.
std::vector<float> awkward_row(std::mt19937& rng, size_t n) {
    std::uniform_int_distribution<int> kind(0, 2 * int(Piece::kCount)), exponent(-20, 10),
        top(0, 4);
    const int tops[] = {3, 15, 31, -4, -32};
    const Ties ties{std::ldexp(1.0f, exponent(rng)), tops[top(rng)]};
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i += 16) {
        const int k = kind(rng);
        const Piece p = k >= int(Piece::kCount) ? Piece::kGaussian : Piece(k);
        fill_piece(p, random_scale(rng), ties, rng, x.data() + i);
    }
    return x;
}

std::vector<QuantizePath> paths_here() {
    std::vector<QuantizePath> out;
    for (QuantizePath p : kAllQuantizePaths) {
        if (p != QuantizePath::scalar && quantize_path_runs_here(p)) out.push_back(p);
    }
    return out;
}

// Quantizes x with the reference and with path p and compares block by block; on a difference,
// names the first block that differs and prints its input.
void expect_reference_bytes(QuantizePath p, T t, const std::vector<float>& x) {
    const int64_t n = int64_t(x.size());
    const test::QuantBuffer want = test::quantize(t, x);
    test::QuantBuffer got(want.size());
    std::memset(got.data(), 0xa5, got.size());
    quantize_row_on(p, t, x.data(), got.data(), n);
    const size_t bb = size_t(test::block_bytes(t)), bs = size_t(test::block_size(t));
    for (size_t off = 0; off < want.size(); off += bb) {
        if (std::memcmp(want.bytes() + off, got.bytes() + off, bb) == 0) continue;
        const size_t block = off / bb;
        std::string values;
        for (size_t i = block * bs; i < (block + 1) * bs; ++i) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%.9g", i % 16 ? " " : "\n  ", double(x[i]));
            values += buf;
        }
        ADD_FAILURE() << tensor_type_name(t) << " on " << quantize_path_name(p) << ": block "
                      << block << " of " << want.size() / bb << " differs; its values:" << values;
        return;
    }
}

TEST(QuantFastQuantize, EveryPathHasAnEncoderForEveryFastType) {
    EXPECT_EQ(best_quantize_path() == QuantizePath::scalar, paths_here().empty());
    for (QuantizePath p : paths_here()) {
        for (T t : kFastTypes) EXPECT_TRUE(has_fast_quantizer(p, t)) << tensor_type_name(t);
        EXPECT_FALSE(has_fast_quantizer(p, T::F16));
    }
    std::printf("  fast quantize paths here:");
    for (QuantizePath p : paths_here()) std::printf(" %s", quantize_path_name(p).data());
    std::printf(" (best: %s)\n", quantize_path_name(best_quantize_path()).data());
}

TEST(QuantFastQuantize, AwkwardRowsGiveTheReferenceBytes) {
    if (paths_here().empty()) GTEST_SKIP() << "no SIMD quantize path on this CPU";
    std::mt19937 rng(20240611);
    for (T t : kFastTypes) {
        SCOPED_TRACE(std::string(tensor_type_name(t)));
        // Rows of 1..32 super-blocks; for IQ4_NL and Q8_0 (blocks of 32) also block counts that
        // leave a tail after the eight-block groups.
        std::uniform_int_distribution<int> super_blocks(1, 32), extra(0, 7);
        for (int row = 0; row < 40; ++row) {
            size_t n = size_t(super_blocks(rng)) * 256;
            if (test::block_size(t) == 32) n += size_t(extra(rng)) * 32;
            const std::vector<float> x = awkward_row(rng, n);
            for (QuantizePath p : paths_here()) expect_reference_bytes(p, t, x);
            if (::testing::Test::HasFailure()) return;
        }
    }
}

// The synthetic weights' own distribution, in volume: what synth writes must be the same file.
TEST(QuantFastQuantize, GaussianRowsGiveTheReferenceBytes) {
    if (paths_here().empty()) GTEST_SKIP() << "no SIMD quantize path on this CPU";
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0, 1);
    for (T t : kFastTypes) {
        SCOPED_TRACE(std::string(tensor_type_name(t)));
        std::vector<float> x(256 * 256);
        for (float& v : x) v = normal(rng) * 0.02f;
        for (QuantizePath p : paths_here()) expect_reference_bytes(p, t, x);
    }
}

// The round-trip tests' patterns at their scales, and the extremes of the float range.
TEST(QuantFastQuantize, PatternsAndExtremeMagnitudesGiveTheReferenceBytes) {
    if (paths_here().empty()) GTEST_SKIP() << "no SIMD quantize path on this CPU";
    std::mt19937 rng(31337);
    for (T t : kFastTypes) {
        SCOPED_TRACE(std::string(tensor_type_name(t)));
        for (test::Pattern pattern : test::kAllPatterns) {
            for (float scale : {1.0f, 3e-3f, 250.0f, 1e-30f, 1e-20f, 1e15f}) {
                SCOPED_TRACE(std::string(test::pattern_name(pattern)) + " scale " +
                             std::to_string(scale));
                const std::vector<float> x = test::make_values(pattern, 8 * 256, rng, scale);
                for (QuantizePath p : paths_here()) expect_reference_bytes(p, t, x);
            }
        }
    }
}

// Paths without an encoder of their own for a type hand it to quantize_row.
TEST(QuantFastQuantize, OtherTypesGoThroughTheReference) {
    std::mt19937 rng(5);
    const std::vector<float> x = awkward_row(rng, 1024);
    for (QuantizePath p : kAllQuantizePaths) {
        if (!quantize_path_runs_here(p)) continue;
        for (T t : {T::F16, T::BF16, T::Q4_0, T::Q5_1, T::MXFP4}) {
            expect_reference_bytes(p, t, x);
        }
    }
}

}  // namespace
}  // namespace strata::quant
