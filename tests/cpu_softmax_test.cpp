// The CPU softmax (attention's weights) against a double-precision softmax: its exponential is
// the engine's own vectorizable polynomial, so its accuracy is checked here on fresh random rows
// of every scale attention produces, with masked (-inf) tails and extreme gaps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"

namespace strata::cpu {
namespace {

std::vector<double> reference_softmax(const std::vector<float>& x) {
    double max = -std::numeric_limits<double>::infinity();
    for (float v : x) max = std::max(max, double(v));
    std::vector<double> out(x.size());
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += out[i] = std::exp(double(x[i]) - max);
    for (double& v : out) v /= sum;
    return out;
}

float max_of(const std::vector<float>& x) {
    return *std::max_element(x.begin(), x.end());
}

TEST(CpuSoftmax, MatchesDoublePrecisionWithinAFewUlps) {
    std::mt19937 rng(4242u);
    for (float spread : {0.01f, 1.0f, 10.0f, 40.0f, 200.0f}) {
        for (int64_t n : {1, 3, 17, 64, 1000}) {
            std::normal_distribution<float> nd(0.0f, spread);
            std::vector<float> x(static_cast<size_t>(n));
            for (float& v : x) v = nd(rng);
            // A masked tail, as attention gives positions after the query's.
            const int64_t visible = std::max<int64_t>(1, n - n / 4);
            for (int64_t i = visible; i < n; ++i)
                x[size_t(i)] = -std::numeric_limits<float>::infinity();
            const std::vector<double> want = reference_softmax(x);
            std::vector<float> got = x;
            softmax(got.data(), n);
            double total = 0;
            for (int64_t i = 0; i < n; ++i) {
                const double w = want[size_t(i)], g = got[size_t(i)];
                total += g;
                if (i >= visible) {
                    EXPECT_EQ(g, 0.0) << "masked position " << i;
                } else if (w > 1e-30) {
                    // e^x within 2 ulp of e^(x rounded), the sum and the division within a few
                    // more; x - max is rounded to float, which moves e^x by |x - max| ulp.
                    const double gap = double(max_of(x)) - double(x[size_t(i)]);
                    EXPECT_NEAR(g, w, (6e-7 + 1.2e-7 * gap) * w)
                        << "spread " << spread << " n " << n << " i " << i;
                } else {
                    EXPECT_LE(g, 1e-30) << "spread " << spread << " n " << n << " i " << i;
                }
            }
            EXPECT_NEAR(total, 1.0, 1e-5);
        }
    }
}

TEST(CpuSoftmax, EqualScoresGiveEqualWeightsAndHugeGapsGiveOneHot) {
    std::vector<float> x(37, 5.0f);
    softmax(x.data(), int64_t(x.size()));
    for (float v : x) EXPECT_FLOAT_EQ(v, 1.0f / 37.0f);
    std::vector<float> y = {0.0f, -1000.0f, 1000.0f, -std::numeric_limits<float>::infinity()};
    softmax(y.data(), int64_t(y.size()));
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(y[2], 1.0f);
    EXPECT_EQ(y[3], 0.0f);
}

}  // namespace
}  // namespace strata::cpu
