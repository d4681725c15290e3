// The operations gpt-oss adds, each against a scalar reference on fresh random data: the softmax
// with a sink logit, the clamped SwiGLU, attention with per-head sinks over a sliding window whose
// keys and values live in a ring smaller than the context, the router's softmax over its top k,
// and the KV sizes the plan counts for windowed layers.
//
// Tolerances. The softmax and SwiGLU use the engine's polynomial exponential (2 ulp), after
// rounding their argument to float (an error of |argument| 2^-24 relative): a few 1e-7 relative
// plus that. Attention rounds queries, keys and values to F16 (the cache type) in the reference
// too, and only the weights' F16 rounding for the value product (2^-11 relative) and summation
// order remain: outputs are averages of unit-variance values, so 2e-3 absolute. A wrong mask, a
// wrong slot of the ring or a missing sink moves outputs by tenths.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_cache.h"
#include "backend/cpu/ops.h"
#include "engine/routing.h"
#include "engine_test_support.h"
#include "model/kv_layout.h"
#include "quant/float_formats.h"
#include "util/thread_pool.h"

namespace strata {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float sigma = 1.0f) {
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

float f16_round(float x) {
    return quant::fp16_to_fp32(quant::fp32_to_fp16(x));
}

TEST(GptOssOps, SoftmaxWithSinkMatchesScalar) {
    std::mt19937 rng(11);
    for (int n : {1, 7, 8, 33, 300}) {
        for (float sink : {-3.0f, 0.0f, 2.5f, 40.0f}) {
            std::vector<float> x = randn(size_t(n), rng, 3.0f);
            if (n > 4) x[2] = -std::numeric_limits<float>::infinity();  // a masked position
            double max = sink;
            for (float v : x) max = std::max(max, double(v));
            double sum = std::exp(double(sink) - max);
            for (float v : x) sum += std::exp(double(v) - max);
            std::vector<float> got = x;
            cpu::softmax(got.data(), n, sink);
            double total = 0;
            for (int i = 0; i < n; ++i) {
                const double gap = double(x[size_t(i)]) - max;
                const double want = std::exp(gap) / sum;
                if (std::isinf(gap)) {
                    EXPECT_EQ(got[size_t(i)], 0.0f);
                    continue;
                }
                // x - max is rounded to float first: its error of |gap| 2^-24 scales want.
                EXPECT_NEAR(got[size_t(i)], want, want * (3e-7 + 1.2e-7 * std::fabs(gap)) + 1e-30)
                    << "n " << n << " i " << i;
                total += got[size_t(i)];
            }
            // The sink's share is missing from the row: it weighs no value.
            EXPECT_NEAR(total, 1.0 - std::exp(double(sink) - max) / sum, 1e-5);
        }
    }
    // Without a sink the bits are those of the plain softmax.
    std::vector<float> a = randn(100, rng), b = a;
    cpu::softmax(a.data(), 100);
    cpu::softmax(b.data(), 100, -std::numeric_limits<float>::infinity());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]));
    }
}

TEST(GptOssOps, SwigluOaiMatchesScalar) {
    std::mt19937 rng(5);
    // Gates and ups wide enough to cross both clamps (limit 7) often.
    const size_t n = 100000;
    const std::vector<float> gate = randn(n, rng, 6.0f), up = randn(n, rng, 6.0f);
    std::vector<float> got(n);
    ThreadPool pool(3);
    cpu::swiglu_oai(gate.data(), up.data(), got.data(), int64_t(n), kSwigluOaiAlpha,
                    kSwigluOaiLimit, pool);
    int clamped = 0;
    for (size_t i = 0; i < n; ++i) {
        const double g = std::min(double(gate[i]), 7.0);
        const double u = std::clamp(double(up[i]), -7.0, 7.0);
        clamped += gate[i] > 7.0f || std::fabs(up[i]) > 7.0f;
        const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
        ASSERT_NEAR(got[i], want, 2e-6 * std::fabs(want) + 1e-6)
            << "gate " << gate[i] << " up " << up[i];
    }
    EXPECT_GT(clamped, int(n / 10));
    // In place (out = gate), as the experts run it.
    std::vector<float> in_place = gate;
    cpu::swiglu_oai(in_place.data(), up.data(), in_place.data(), int64_t(n), kSwigluOaiAlpha,
                    kSwigluOaiLimit);
    EXPECT_EQ(in_place, got);
}

// Attention of n_head heads for the query at query_pos over positions first..query_pos of the
// F16-rounded history, with the head's sink in the denominator.
std::vector<float> reference_attention(const std::vector<std::vector<float>>& keys,
                                       const std::vector<std::vector<float>>& values,
                                       const float* q, int64_t query_pos, int64_t window,
                                       const std::vector<float>& sinks, int n_head, int n_head_kv,
                                       int hd) {
    const int group = n_head / n_head_kv;
    const int64_t first = window > 0 ? std::max<int64_t>(0, query_pos - window + 1) : 0;
    std::vector<float> out(size_t(n_head * hd), 0.0f);
    for (int h = 0; h < n_head; ++h) {
        const int kvh = h / group;
        std::vector<double> score;
        double max = sinks.empty() ? -INFINITY : double(sinks[size_t(h)]);
        for (int64_t p = first; p <= query_pos; ++p) {
            double s = 0;
            for (int d = 0; d < hd; ++d) {
                s += double(f16_round(q[h * hd + d])) *
                     double(keys[size_t(p)][size_t(kvh * hd + d)]);
            }
            s /= std::sqrt(double(hd));
            score.push_back(s);
            max = std::max(max, s);
        }
        double sum = sinks.empty() ? 0.0 : std::exp(double(sinks[size_t(h)]) - max);
        for (double s : score) sum += std::exp(s - max);
        for (int64_t p = first; p <= query_pos; ++p) {
            const double w = std::exp(score[size_t(p - first)] - max) / sum;
            for (int d = 0; d < hd; ++d) {
                out[size_t(h * hd + d)] += float(w * values[size_t(p)][size_t(kvh * hd + d)]);
            }
        }
    }
    return out;
}

// A sequence evaluated in batches of up to max_batch tokens: each batch's keys and values are
// stored, then its queries attend. Layer 0 is windowed (its cache a ring of window + max_batch
// slots, far fewer than the positions the test goes through), layer 1 sees the whole context.
TEST(GptOssOps, AttentionWithSinksOverAWindowInARing) {
    const int n_head = 8, n_head_kv = 2, hd = 64;
    ModelHparams hp = test::attention_hparams(n_head, n_head_kv, hd, hd);
    hp.n_swa = 16;
    hp.swa_layers = {1, 0};
    const uint32_t n_ctx = 256, max_batch = 8;
    auto kv = cpu::KvCache::create(hp, n_ctx, KvType::F16, {}, max_batch);
    ASSERT_TRUE(kv) << kv.error().message;
    EXPECT_EQ(kv->positions(0), 24u);
    EXPECT_EQ(kv->positions(1), n_ctx);
    EXPECT_EQ(kv->bytes(), kv_cache_bytes(hp, n_ctx, KvType::F16, max_batch));

    std::mt19937 rng(3);
    const std::vector<float> sinks = randn(size_t(n_head), rng, 2.0f);
    const size_t width = size_t(n_head_kv * hd);
    std::vector<std::vector<std::vector<float>>> keys(2), values(2);  // [layer][position]
    ThreadPool pool(3);
    cpu::DecodeScratch shared;
    const cpu::AttentionShape widest{n_head / n_head_kv, 1, hd, hd, 1.0f};
    cpu::reserve_attention_scratch(*kv, widest, n_head, n_head_kv, max_batch, shared, pool);
    int64_t pos0 = 0;
    // Prompt-sized batches, then decode steps, past several turns of the ring.
    for (int64_t n : {8, 3, 8, 5, 1, 1, 8, 8, 1, 7, 1, 1, 1, 8, 8, 8, 2, 1, 1}) {
        const std::vector<float> q = randn(size_t(n * n_head * hd), rng);
        for (int layer = 0; layer < 2; ++layer) {
            for (int64_t t = 0; t < n; ++t) {
                std::vector<float> k = randn(width, rng), v = randn(width, rng);
                kv->store(layer, pos0 + t, k.data(), v.data());
                for (float& x : k) x = f16_round(x);
                for (float& x : v) x = f16_round(x);
                keys[size_t(layer)].push_back(k);
                values[size_t(layer)].push_back(v);
            }
            cpu::AttentionShape s{n_head, n_head_kv, hd, hd, 1.0f / std::sqrt(float(hd))};
            s.sinks = sinks.data();
            s.window = layer == 0 ? hp.n_swa : 0;
            std::vector<float> out(size_t(n * n_head * hd), -7.0f);
            cpu::attention(*kv, layer, s, q.data(), n, pos0, out.data(), pool, &shared);
            for (int64_t t = 0; t < n; ++t) {
                SCOPED_TRACE("layer " + std::to_string(layer) + " position " +
                             std::to_string(pos0 + t));
                const std::vector<float> want = reference_attention(
                    keys[size_t(layer)], values[size_t(layer)], q.data() + t * n_head * hd,
                    pos0 + t, s.window, sinks, n_head, n_head_kv, hd);
                for (size_t i = 0; i < want.size(); ++i) {
                    ASSERT_NEAR(out[size_t(t * n_head * hd) + i], want[i], 2e-3) << "output " << i;
                }
            }
        }
        pos0 += n;
    }
    EXPECT_GT(pos0, 3 * 24);  // the ring went round three times
}

// A decode step split over positions (more threads than KV heads) gives the bits of the split
// over heads with sinks too.
TEST(GptOssOps, DecodeSplitOverPositionsKeepsTheBitsWithSinks) {
    const int n_head = 8, n_head_kv = 2, hd = 64, n_ctx = 300;
    const ModelHparams hp = test::attention_hparams(n_head, n_head_kv, hd, hd);
    auto kv = cpu::KvCache::create(hp, n_ctx, KvType::F16);
    ASSERT_TRUE(kv);
    std::mt19937 rng(9);
    for (int p = 0; p < n_ctx; ++p) {
        const std::vector<float> k = randn(size_t(n_head_kv * hd), rng),
                                 v = randn(size_t(n_head_kv * hd), rng);
        kv->store(1, p, k.data(), v.data());
    }
    const std::vector<float> sinks = randn(size_t(n_head), rng, 2.0f);
    cpu::AttentionShape s{n_head, n_head_kv, hd, hd, 1.0f / std::sqrt(float(hd))};
    s.sinks = sinks.data();
    ThreadPool pool(5);
    cpu::DecodeScratch shared;
    cpu::reserve_attention_scratch(*kv, {n_head / n_head_kv, 1, hd, hd, 1.0f}, n_head, n_head_kv, 1,
                                   shared, pool);
    for (int64_t pos0 : {0, 64, 299}) {
        const std::vector<float> q = randn(size_t(n_head * hd), rng);
        std::vector<float> by_heads(size_t(n_head * hd)), by_positions(by_heads.size());
        cpu::attention(*kv, 1, s, q.data(), 1, pos0, by_heads.data(), pool);
        cpu::attention(*kv, 1, s, q.data(), 1, pos0, by_positions.data(), pool, &shared);
        EXPECT_EQ(by_heads, by_positions) << "pos0 " << pos0;
        double sum = 0;  // the first head's weights: short of 1 by its sink's share
        for (int64_t p = 0; p <= pos0; ++p) sum += shared.scores[size_t(p)];
        EXPECT_LT(sum, 1.0 - 1e-4);
    }
}

TEST(GptOssOps, RouterSoftmaxesItsTopKAlone) {
    std::mt19937 rng(21);
    const int n_expert = 32, k = 4;
    for (int trial = 0; trial < 50; ++trial) {
        const std::vector<float> logits = randn(size_t(n_expert), rng, 2.0f);
        engine::MoeConfig cfg{n_expert, k, false, nullptr, 0, ExpertGating::SoftmaxTopK};
        std::vector<int32_t> choice(static_cast<size_t>(k));
        std::vector<float> weight(static_cast<size_t>(k));
        engine::route_token(logits.data(), cfg, choice.data(), weight.data());
        std::vector<int32_t> order(static_cast<size_t>(n_expert));
        for (int i = 0; i < n_expert; ++i) order[size_t(i)] = i;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            return logits[size_t(a)] > logits[size_t(b)];
        });
        double sum = 0;
        for (int i = 0; i < k; ++i) sum += std::exp(double(logits[size_t(order[size_t(i)])]));
        for (int i = 0; i < k; ++i) {
            ASSERT_EQ(choice[size_t(i)], order[size_t(i)]);
            EXPECT_NEAR(weight[size_t(i)], std::exp(double(logits[size_t(order[size_t(i)])])) / sum,
                        1e-6);
        }
    }
}

TEST(GptOssOps, WindowedLayersHoldARingOfTheWindowAndABatch) {
    ModelHparams hp = test::attention_hparams(8, 2, 64, 64, 4);
    hp.n_swa = 128;
    hp.swa_layers = {1, 0, 1, 0};
    EXPECT_EQ(kv_layer_positions(hp, 0, 131072, 512), 640u);
    EXPECT_EQ(kv_layer_positions(hp, 1, 131072, 512), 131072u);
    EXPECT_EQ(kv_layer_positions(hp, 2, 300, 512), 300u);  // never more than the context
    // Two full layers and two rings: far less than four full layers.
    EXPECT_EQ(kv_cache_bytes(hp, 131072, KvType::F16, 512),
              2 * kv_layer_bytes(hp, 1, 131072, KvType::F16, 512) +
                  2 * kv_layer_bytes(hp, 0, 131072, KvType::F16, 512));
    EXPECT_EQ(kv_layer_bytes(hp, 0, 131072, KvType::F16, 512), 2u * 640 * 128 * 2);
}

}  // namespace
}  // namespace strata
