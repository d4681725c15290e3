// The CPU attention's two ways of sharing a decode step between threads give the same bits: one
// task per KV head and share of its query heads (each reading the head's keys and values), and,
// with more threads than KV heads, the context split over positions (each key and value read
// once, the scores gathered and softmaxed by the last chunk of a head). Checked on fresh random
// caches of several head shapes, contexts and thread counts; and the split is really taken.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_cache.h"
#include "engine_test_support.h"
#include "util/thread_pool.h"

namespace strata::cpu {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

TEST(CpuAttention, DecodeSplitOverPositionsKeepsTheBits) {
    struct Shape {
        int n_head, n_head_kv, hd_k, hd_v;
    };
    for (const Shape sh : {Shape{8, 2, 64, 64}, Shape{12, 1, 128, 128}, Shape{6, 3, 96, 80}}) {
        const ModelHparams hp = test::attention_hparams(sh.n_head, sh.n_head_kv, sh.hd_k, sh.hd_v);
        const int n_ctx = 700, layer = 1;
        auto kv = KvCache::create(hp, n_ctx, KvType::F16);
        ASSERT_TRUE(kv) << kv.error().message;
        std::mt19937 rng(uint32_t(sh.n_head * 131 + sh.hd_k));
        const size_t dk = size_t(sh.n_head_kv * sh.hd_k), dv = size_t(sh.n_head_kv * sh.hd_v);
        for (int p = 0; p < n_ctx; ++p) {
            const std::vector<float> k = randn(dk, rng), v = randn(dv, rng);
            kv->store(layer, p, k.data(), v.data());
        }
        const AttentionShape s{sh.n_head, sh.n_head_kv, sh.hd_k, sh.hd_v,
                               1.0f / std::sqrt(float(sh.hd_k))};
        const AttentionShape widest{sh.n_head / sh.n_head_kv, 1, sh.hd_k, sh.hd_v, 1.0f};
        for (int threads : {4, 7}) {
            ThreadPool pool(threads);
            DecodeScratch shared;
            reserve_attention_scratch(*kv, widest, sh.n_head, sh.n_head_kv, 1, shared, pool);
            for (int64_t pos0 : {0, 1, 63, 64, 65, 300, 699}) {
                SCOPED_TRACE("heads " + std::to_string(sh.n_head) + "/" +
                             std::to_string(sh.n_head_kv) + " threads " + std::to_string(threads) +
                             " pos0 " + std::to_string(pos0));
                const std::vector<float> q = randn(size_t(sh.n_head * sh.hd_k), rng);
                std::vector<float> by_heads(size_t(sh.n_head * sh.hd_v), -1.0f);
                std::vector<float> by_positions(by_heads.size(), -2.0f);
                attention(*kv, layer, s, q.data(), 1, pos0, by_heads.data(), pool);
                attention(*kv, layer, s, q.data(), 1, pos0, by_positions.data(), pool, &shared);
                for (size_t i = 0; i < by_heads.size(); ++i) {
                    ASSERT_EQ(std::bit_cast<uint32_t>(by_heads[i]),
                              std::bit_cast<uint32_t>(by_positions[i]))
                        << "output " << i;
                }
                // The split ran: it leaves every head's weights in the shared scores.
                ASSERT_GE(shared.scores.size(), size_t(sh.n_head) * size_t(pos0 + 1));
                double sum = 0;
                for (int64_t p = 0; p <= pos0; ++p) sum += shared.scores[size_t(p)];
                EXPECT_NEAR(sum, 1.0, 1e-5);
            }
        }
    }
}

}  // namespace
}  // namespace strata::cpu
