// MoE routing on the GPU (backend/cuda/moe_route.h) against the engine's host routing
// (engine::route_token): the same experts in the same order, the same weights to float
// rounding, for routers of several sizes, every k and both weight modes; equal logits go to the
// lower expert id first. And the weighted sum of the chosen experts' outputs in choice order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/moe_route.h"
#include "cuda/device_buffers.h"
#include "engine/routing.h"
#include "gpu/gpu.h"
#include "test_support.h"

namespace strata {
namespace {

// n tokens of router logits: distinct values (a shuffled grid 0.013 apart, so no two experts
// are close enough for float rounding to swap them), except token 0, whose experts 1 and 2
// tie for the top.
std::vector<float> logits_for(int64_t n, int n_expert, std::mt19937& rng) {
    std::vector<float> out;
    std::vector<int> order(static_cast<size_t>(n_expert));
    for (int64_t t = 0; t < n; ++t) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int i = 0; i < n_expert; ++i) out.push_back(0.013f * float(order[size_t(i)]) - 2.0f);
        if (t == 0 && n_expert >= 3) {
            out[1] = out[2] = 0.013f * float(n_expert) - 1.0f;
        }
    }
    return out;
}

TEST(CudaMoeRoute, ChoosesTheHostsExpertsWithItsWeights) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(11);
    const int64_t n = 37;
    for (const int n_expert : {4, 8, 60, 128, 256, 1024}) {
        for (const int k : {1, 2, 4, 8, 32}) {
            if (k > n_expert) continue;
            for (const bool norm : {false, true}) {
                SCOPED_TRACE(std::to_string(n_expert) + " experts, k " + std::to_string(k) +
                             (norm ? ", renormalised" : ""));
                const std::vector<float> logits = logits_for(n, n_expert, rng);
                const gpu::DeviceBuffer dl =
                    test::upload(logits.data(), logits.size() * sizeof(float));
                const gpu::DeviceBuffer dc =
                    gpu::DeviceBuffer::allocate(sizeof(int32_t) * size_t(n * k)).value();
                const gpu::DeviceBuffer dw =
                    gpu::DeviceBuffer::allocate(sizeof(float) * size_t(n * k)).value();
                cuda::route_top_k(reinterpret_cast<const float*>(dl.data()), n, n_expert, k, norm,
                                  reinterpret_cast<int32_t*>(dc.data()),
                                  reinterpret_cast<float*>(dw.data()), nullptr);
                const auto got_c = test::download<int32_t>(dc.data(), size_t(n * k));
                const auto got_w = test::download<float>(dw.data(), size_t(n * k));
                const engine::MoeConfig cfg{n_expert, k, norm, ExpertGating::Softmax, nullptr, 0};
                for (int64_t t = 0; t < n; ++t) {
                    std::vector<int32_t> c(static_cast<size_t>(k));
                    std::vector<float> w(static_cast<size_t>(k));
                    engine::route_token(&logits[size_t(t * n_expert)], cfg, c.data(), w.data());
                    for (int j = 0; j < k; ++j) {
                        ASSERT_EQ(got_c[size_t(t * k + j)], c[size_t(j)])
                            << "token " << t << " choice " << j;
                        EXPECT_NEAR(got_w[size_t(t * k + j)], w[size_t(j)], 2e-6 * w[size_t(j)])
                            << "token " << t << " choice " << j;
                    }
                }
            }
        }
    }
}

TEST(CudaMoeRoute, SumsTheWeightedSlotsInChoiceOrder) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    const int k = 6;
    const int64_t n = 3, d = 1000;
    std::vector<float> y(size_t(n * k * d)), w(size_t(n * k));
    for (float& v : y) v = nd(rng);
    for (float& v : w) v = std::abs(nd(rng));
    const gpu::DeviceBuffer dy = test::upload(y.data(), y.size() * sizeof(float));
    const gpu::DeviceBuffer dw = test::upload(w.data(), w.size() * sizeof(float));
    const gpu::DeviceBuffer dout =
        gpu::DeviceBuffer::allocate(sizeof(float) * size_t(n * d)).value();
    cuda::sum_weighted_slots(reinterpret_cast<const float*>(dy.data()),
                             reinterpret_cast<const float*>(dw.data()), k, n, d,
                             reinterpret_cast<float*>(dout.data()), nullptr);
    const auto got = test::download<float>(dout.data(), size_t(n * d));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < d; ++i) {
            // The host backend's arithmetic: each product rounded, then added in choice order.
            volatile float v = y[size_t(t * k * d + i)] * w[size_t(t * k)];
            for (int j = 1; j < k; ++j) {
                volatile float p = y[size_t((t * k + j) * d + i)] * w[size_t(t * k + j)];
                v = v + p;
            }
            ASSERT_EQ(got[size_t(t * d + i)], v) << "token " << t << " element " << i;
        }
    }
}

}  // namespace
}  // namespace strata
