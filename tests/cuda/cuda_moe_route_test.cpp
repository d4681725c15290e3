// MoE routing on the GPU (backend/cuda/moe_route.h) against the engine's host routing
// (engine::route_token): the same experts in the same order, the same weights to float
// rounding, for routers of several sizes, every k and both weight modes; equal logits go to the
// lower expert id first; every gating with and without a selection bias, groups, renormalisation
// and scale. And the weighted sum of the chosen experts' outputs in choice order.
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
                cuda::RouteSpec spec;
                spec.norm_weights = norm;
                cuda::route_top_k(reinterpret_cast<const float*>(dl.data()), n, n_expert, k, spec,
                                  reinterpret_cast<int32_t*>(dc.data()),
                                  reinterpret_cast<float*>(dw.data()), nullptr);
                const auto got_c = test::download<int32_t>(dc.data(), size_t(n * k));
                const auto got_w = test::download<float>(dw.data(), size_t(n * k));
                const engine::MoeConfig cfg{n_expert, k, norm, nullptr, 0};
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

// Whether a token's choosing scores (and group scores) lie apart by a relative `gap` as the
// host computes them, so that the device's last-bit differences cannot reorder them.
bool well_separated(const std::vector<float>& logits, const engine::MoeConfig& c, float gap) {
    std::vector<float> chooser(logits.size());
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float l : logits) sum += std::exp(double(l - max));
    for (size_t i = 0; i < logits.size(); ++i) {
        float s = logits[i];
        if (c.gating == ExpertGating::Sigmoid) s = 1.0f / (1.0f + std::exp(-s));
        if (c.gating == ExpertGating::Softmax) s = float(std::exp(double(s - max)) / sum);
        chooser[i] = s + (c.selection_bias ? c.selection_bias[i] : 0.0f);
    }
    const auto apart = [&](std::vector<float> values) {
        std::sort(values.begin(), values.end());
        for (size_t i = 1; i < values.size(); ++i) {
            const float scale = std::max(std::abs(values[i]), std::abs(values[i - 1]));
            if (values[i] - values[i - 1] < gap * scale) return false;
        }
        return true;
    };
    std::vector<float> groups;
    if (c.n_group > 1) {
        const size_t per = logits.size() / size_t(c.n_group);
        for (size_t g = 0; g < size_t(c.n_group); ++g) {
            std::vector<float> m(chooser.begin() + long(g * per),
                                 chooser.begin() + long((g + 1) * per));
            std::sort(m.begin(), m.end(), std::greater<>());
            groups.push_back(m[0] + m[1]);
        }
    }
    return apart(chooser) && apart(groups);
}

TEST(CudaMoeRoute, RoutesEveryGatingBiasGroupingAndScaleAsTheHost) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(38);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    std::uniform_real_distribution<float> bias(-0.4f, 0.4f);
    const int64_t n = 19;
    struct Gating {
        ExpertGating host;
        cuda::RouteGating device;
    };
    for (const int n_expert : {16, 160, 256}) {
        for (const Gating g :
             {Gating{ExpertGating::Softmax, cuda::RouteGating::SoftmaxOfAll},
              Gating{ExpertGating::SoftmaxTopK, cuda::RouteGating::SoftmaxOfChosen},
              Gating{ExpertGating::Sigmoid, cuda::RouteGating::Sigmoid}}) {
            for (const bool biased : {false, true}) {
                for (const int groups : {0, 8}) {
                    for (const bool norm : {false, true}) {
                        for (const float scale : {1.0f, 2.5f}) {
                            const int k = n_expert >= 64 ? 8 : 2;
                            std::vector<float> b(static_cast<size_t>(n_expert));
                            for (float& x : b) x = bias(rng);
                            engine::MoeConfig c;
                            c.n_expert = n_expert;
                            c.n_used = k;
                            c.norm_weights = norm;
                            c.gating = g.host;
                            c.selection_bias = biased ? b.data() : nullptr;
                            c.n_group = groups;
                            c.n_group_used = groups ? 3 : 0;
                            c.weights_scale = scale;
                            SCOPED_TRACE(std::to_string(n_expert) + " experts, gating " +
                                         std::string(expert_gating_name(g.host)) +
                                         (biased ? ", biased" : "") + ", groups " +
                                         std::to_string(groups) + (norm ? ", norm" : "") +
                                         ", scale " + std::to_string(scale));
                            std::vector<float> logits;
                            for (int64_t t = 0; t < n; ++t) {
                                std::vector<float> row(static_cast<size_t>(n_expert));
                                do {
                                    for (float& x : row) x = logit(rng);
                                } while (!well_separated(row, c, 1e-5f));
                                logits.insert(logits.end(), row.begin(), row.end());
                            }
                            const gpu::DeviceBuffer dl =
                                test::upload(logits.data(), logits.size() * sizeof(float));
                            const gpu::DeviceBuffer db =
                                test::upload(b.data(), b.size() * sizeof(float));
                            const gpu::DeviceBuffer dc =
                                gpu::DeviceBuffer::allocate(sizeof(int32_t) * size_t(n * k))
                                    .value();
                            const gpu::DeviceBuffer dw =
                                gpu::DeviceBuffer::allocate(sizeof(float) * size_t(n * k)).value();
                            cuda::RouteSpec spec;
                            spec.gating = g.device;
                            spec.norm_weights = norm;
                            spec.selection_bias =
                                biased ? reinterpret_cast<const float*>(db.data()) : nullptr;
                            spec.n_group = c.n_group;
                            spec.n_group_used = c.n_group_used;
                            spec.scale = scale;
                            cuda::route_top_k(reinterpret_cast<const float*>(dl.data()), n,
                                              n_expert, k, spec,
                                              reinterpret_cast<int32_t*>(dc.data()),
                                              reinterpret_cast<float*>(dw.data()), nullptr);
                            const auto got_c = test::download<int32_t>(dc.data(), size_t(n * k));
                            const auto got_w = test::download<float>(dw.data(), size_t(n * k));
                            for (int64_t t = 0; t < n; ++t) {
                                std::vector<int32_t> hc(static_cast<size_t>(k));
                                std::vector<float> hw(static_cast<size_t>(k));
                                engine::route_token(&logits[size_t(t * n_expert)], c, hc.data(),
                                                    hw.data());
                                for (int j = 0; j < k; ++j) {
                                    ASSERT_EQ(got_c[size_t(t * k + j)], hc[size_t(j)])
                                        << "token " << t << " choice " << j;
                                    EXPECT_NEAR(got_w[size_t(t * k + j)], hw[size_t(j)],
                                                4e-6f * std::abs(hw[size_t(j)]) + 1e-30f)
                                        << "token " << t << " choice " << j;
                                }
                            }
                        }
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
