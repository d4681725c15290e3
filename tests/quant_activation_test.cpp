// Activation quantization (quantize_row_activations): the 8-bit formats the reference engine's
// x86 CPU backend converts activations to before a quantized dot product. Q8_0 / Q8_1 are held
// against a model of the AVX2 instruction sequence that backend runs (max of |x|, 127 / amax,
// multiply, round to nearest even, convert, saturating packs); Q8_K against its definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"
#include "quant_test_util.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STRATA_TEST_AVX2_MODEL 1
#endif

namespace strata::quant {
namespace {

struct Q8Reference {
    float d = 0;
    int8_t q[kQK] = {};
    int sum = 0;
};

#if defined(STRATA_TEST_AVX2_MODEL)
// One 32-value block through the AVX2 instructions themselves.
__attribute__((target("avx2"))) Q8Reference avx2_q8_block(const float* x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 amax8 = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign, v[k]));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, amax8);
    const float amax = *std::max_element(lanes, lanes + 8);
    Q8Reference r;
    r.d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    for (int k = 0; k < 4; ++k) {
        const __m256 rounded =
            _mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        alignas(32) int32_t ints[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(ints), _mm256_cvtps_epi32(rounded));
        for (int j = 0; j < 8; ++j) {
            r.q[8 * k + j] = int8_t(std::clamp(ints[j], -128, 127));  // the saturating packs
            r.sum += ints[j];
        }
    }
    return r;
}
#endif

// Blocks that exercise the rounding: Gaussian ones, and ones scaled so that 127 / amax is
// exactly 1 and values sit on or next to halves.
std::vector<float> activation_rows(std::mt19937& rng, int blocks) {
    std::vector<float> x = test::make_values(test::Pattern::kGaussian, size_t(32 * blocks), rng);
    std::uniform_int_distribution<int> code(-126, 125);
    for (int b = 0; b < blocks; b += 4) {
        float* blk = x.data() + 32 * b;
        blk[0] = 127.0f;  // amax 127: id = 1, values are their own codes
        for (int j = 1; j < 32; ++j) {
            const float half = float(code(rng)) + 0.5f;
            blk[j] = j % 3 == 0 ? half : std::nextafter(half, j % 3 == 1 ? 1e9f : -1e9f);
        }
    }
    return x;
}

TEST(QuantActivations, Q8_0AndQ8_1MatchTheAvx2InstructionSequence) {
#if defined(STRATA_TEST_AVX2_MODEL)
    if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
    std::mt19937 rng(77);
    const int blocks = 4096;
    const std::vector<float> x = activation_rows(rng, blocks);
    std::vector<BlockQ8_0> q0(static_cast<size_t>(blocks));
    std::vector<BlockQ8_1> q1(static_cast<size_t>(blocks));
    quantize_row_activations(TensorType::Q8_0, x.data(), q0.data(), int64_t(x.size()));
    quantize_row_activations(TensorType::Q8_1, x.data(), q1.data(), int64_t(x.size()));
    for (int b = 0; b < blocks; ++b) {
        const Q8Reference r = avx2_q8_block(x.data() + 32 * b);
        ASSERT_EQ(q0[size_t(b)].d, fp32_to_fp16(r.d)) << b;
        ASSERT_EQ(std::memcmp(q0[size_t(b)].qs, r.q, 32), 0) << b;
        ASSERT_EQ(q1[size_t(b)].d, fp32_to_fp16(r.d)) << b;
        ASSERT_EQ(std::memcmp(q1[size_t(b)].qs, r.q, 32), 0) << b;
        ASSERT_EQ(q1[size_t(b)].s, fp32_to_fp16(r.d * float(r.sum))) << b;
    }
#else
    GTEST_SKIP() << "the AVX2 model needs x86-64";
#endif
}

TEST(QuantActivations, TiesRoundToEvenUnlikeTheFileQuantizer) {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;  // id = 127 / 127 = 1 exactly
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 3.5f;
    x[4] = -0.5f;
    BlockQ8_0 act, file;
    quantize_row_activations(TensorType::Q8_0, x.data(), &act, 32);
    quantize_row(TensorType::Q8_0, x.data(), &file, 32);
    EXPECT_EQ(act.qs[1], 2);
    EXPECT_EQ(act.qs[2], -2);
    EXPECT_EQ(act.qs[3], 4);
    EXPECT_EQ(act.qs[4], 0);
    EXPECT_EQ(file.qs[1], 3);  // roundf: half away from zero
    EXPECT_EQ(file.qs[2], -3);
    EXPECT_EQ(file.qs[3], 4);
    EXPECT_EQ(file.qs[4], -1);
}

TEST(QuantActivations, DifferFromTheFileQuantizerOnlyInRareCodes) {
    std::mt19937 rng(11);
    const int blocks = 1 << 15;
    const std::vector<float> x =
        test::make_values(test::Pattern::kGaussian, size_t(32 * blocks), rng);
    std::vector<BlockQ8_0> act(static_cast<size_t>(blocks)), file(static_cast<size_t>(blocks));
    quantize_row_activations(TensorType::Q8_0, x.data(), act.data(), int64_t(x.size()));
    quantize_row(TensorType::Q8_0, x.data(), file.data(), int64_t(x.size()));
    int64_t differing = 0;
    for (int b = 0; b < blocks; ++b) {
        ASSERT_EQ(act[size_t(b)].d, file[size_t(b)].d);  // same d = amax / 127
        for (int j = 0; j < 32; ++j) {
            const int diff = act[size_t(b)].qs[j] - file[size_t(b)].qs[j];
            ASSERT_LE(std::abs(diff), 1);
            differing += diff != 0;
        }
    }
    const double fraction = double(differing) / (32.0 * blocks);
    std::printf("  Q8_0 codes where activation and file rounding differ: %lld of %d (%.2e)\n",
                static_cast<long long>(differing), 32 * blocks, fraction);
    EXPECT_GT(differing, 0);  // the two really are different rules
    EXPECT_LT(fraction, 1e-3);
}

// Q8_K by its definition: scale -127 / (value of largest magnitude), codes rounded half to even
// and capped at 127, d = 1 / scale, bsums the sums of each 16 codes.
TEST(QuantActivations, Q8_KFollowsItsDefinition) {
    std::mt19937 rng(21);
    for (test::Pattern p : test::kAllPatterns) {
        const std::vector<float> x = test::make_values(p, 4 * 256, rng);
        std::vector<BlockQ8_K> act(4), file(4);
        quantize_row_activations(TensorType::Q8_K, x.data(), act.data(), 1024);
        quantize_row(TensorType::Q8_K, x.data(), file.data(), 1024);
        ASSERT_EQ(std::memcmp(act.data(), file.data(), 4 * sizeof(BlockQ8_K)), 0);
        for (int b = 0; b < 4; ++b) {
            const float* xb = x.data() + 256 * b;
            float max = 0;
            for (int e = 0; e < 256; ++e) {
                if (std::fabs(xb[e]) > std::fabs(max)) max = xb[e];
            }
            const BlockQ8_K& k = act[size_t(b)];
            if (max == 0) {
                EXPECT_EQ(k.d, 0.0f);
                continue;
            }
            const float iscale = -127.0f / max;
            EXPECT_EQ(k.d, 1.0f / iscale);
            for (int e = 0; e < 256; ++e) {
                ASSERT_EQ(k.qs[e], std::min(127L, std::lrint(iscale * xb[e]))) << e;
            }
            for (int g = 0; g < 16; ++g) {
                int sum = 0;
                for (int l = 0; l < 16; ++l) sum += k.qs[16 * g + l];
                ASSERT_EQ(k.bsums[g], sum);
            }
        }
    }
}

TEST(QuantActivations, FloatActivationTypesAreThePlainConversions) {
    std::mt19937 rng(8);
    const std::vector<float> x = test::make_values(test::Pattern::kOutliers, 64, rng);
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        test::QuantBuffer a(quant_row_bytes(t, 64).value());
        quantize_row_activations(t, x.data(), a.data(), 64);
        const test::QuantBuffer b = test::quantize(t, x);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), b.size()), 0) << tensor_type_name(t);
    }
}

}  // namespace
}  // namespace strata::quant
