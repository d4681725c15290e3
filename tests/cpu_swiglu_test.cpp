// The CPU SwiGLU activation (silu(gate) * up, every FFN's and expert's) against double
// precision: its exponential is the engine's vectorizable polynomial, so its accuracy is checked
// here on fresh random values of every scale, both signs, zeros, and the tails where silu is 0
// or the identity; the pooled form gives the same bits as the plain one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "util/thread_pool.h"

namespace strata::cpu {
namespace {

double reference(float g, float u) {
    return double(g) / (1.0 + std::exp(-double(g))) * double(u);
}

TEST(CpuSwiglu, MatchesDoublePrecisionWithinAFewUlps) {
    std::mt19937 rng(777u);
    std::vector<float> gate, up;
    for (float spread : {1e-3f, 0.5f, 3.0f, 20.0f, 120.0f}) {
        std::normal_distribution<float> nd(0.0f, spread);
        for (int i = 0; i < 5000; ++i) {
            gate.push_back(nd(rng));
            up.push_back(nd(rng));
        }
    }
    for (float g :
         {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 104.0f, -104.0f, 300.0f, -300.0f}) {
        gate.push_back(g);
        up.push_back(1.5f);
    }
    std::vector<float> out(gate.size());
    swiglu(gate.data(), up.data(), out.data(), int64_t(gate.size()));
    for (size_t i = 0; i < gate.size(); ++i) {
        const double want = reference(gate[i], up[i]);
        // e^x within 2 ulp of e^(x rounded); the sum, the division and the product a few more,
        // and e^x moves by |x| ulp of x's rounding. Where e^g is below the normal floats
        // (g < -87.3) it counts as 0: silu(g) is then within |g| 2^-126 of 0.
        const double gu = std::fabs(double(gate[i]) * double(up[i]));
        const double tol =
            (8e-7 + 1.2e-7 * std::fabs(double(gate[i]))) * std::fabs(want) + gu * 1.2e-38 + 1e-37;
        EXPECT_NEAR(out[i], want, tol) << "gate " << gate[i] << " up " << up[i];
    }
}

TEST(CpuSwiglu, ThePoolGivesTheSameBitsAndOutMayBeGate) {
    std::mt19937 rng(31u);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    constexpr size_t n = 100003;  // several tasks and a ragged end
    std::vector<float> gate(n), up(n);
    for (float& v : gate) v = nd(rng);
    for (float& v : up) v = nd(rng);
    std::vector<float> plain(n);
    swiglu(gate.data(), up.data(), plain.data(), int64_t(n));
    ThreadPool pool(2);
    std::vector<float> pooled = gate;
    swiglu(pooled.data(), up.data(), pooled.data(), int64_t(n), pool);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(pooled[i], plain[i]) << i;
}

}  // namespace
}  // namespace strata::cpu
