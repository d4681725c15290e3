// Routing traces and the expert-cache policies: a trace survives its file, a bad file is an
// error; the locality generator keeps experts at the rate it is asked to; the engine replays a
// forced trace exactly (the store sees those experts); and the policy simulation gives the
// hit rates worked out by hand on small traces.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include "engine/engine.h"
#include "engine/routing_trace.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "runtime/backend_factory.h"
#include "store/expert_cache_policy.h"
#include "store/model_store.h"
#include "test_support.h"

namespace strata {
namespace {

using engine::RoutingTrace;

TEST(RoutingTrace, SavesLoadsAndRefusesBadFiles) {
    test::TempDir dir;
    const RoutingTrace t = engine::make_local_trace(3, 16, 2, 50, 0.5, 1.0, 7);
    ASSERT_EQ(t.tokens(), 50u);
    ASSERT_TRUE(t.save(dir.file("t.trace")));
    auto back = RoutingTrace::load(dir.file("t.trace"));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->ids, t.ids);
    EXPECT_EQ(back->n_expert, 16);
    EXPECT_EQ(back->choices(50 + 3, 1)[0], t.choices(3, 1)[0]);  // repeats past its end

    std::ofstream(dir.file("bad1")) << "hello";
    std::ofstream(dir.file("bad2")) << "strata-routing-trace 1 2 4 2 1\n0 1 2 9\n";
    std::ofstream(dir.file("bad3")) << "strata-routing-trace 1 2 4 2 2\n0 1 2 3\n";
    for (const char* f : {"bad1", "bad2", "bad3", "missing"}) {
        EXPECT_FALSE(RoutingTrace::load(dir.file(f))) << f;
    }
}

TEST(RoutingTrace, LocalityTraceKeepsExpertsAtTheAskedRate) {
    const RoutingTrace t = engine::make_local_trace(4, 64, 4, 2000, 0.7, 1.0, 1);
    EXPECT_EQ(t.ids, engine::make_local_trace(4, 64, 4, 2000, 0.7, 1.0, 1).ids);  // seeded
    size_t kept = 0, total = 0;
    for (size_t tok = 1; tok < t.tokens(); ++tok) {
        for (int l = 0; l < 4; ++l) {
            const auto prev = t.choices(int64_t(tok - 1), l), cur = t.choices(int64_t(tok), l);
            for (int32_t e : cur) {
                kept += std::find(prev.begin(), prev.end(), e) != prev.end();
                EXPECT_EQ(std::count(cur.begin(), cur.end(), e), 1);  // no repeats
            }
            total += cur.size();
        }
    }
    // At least the kept share, plus the chance of redrawing a previous expert.
    EXPECT_GT(double(kept) / double(total), 0.68);
    EXPECT_LT(double(kept) / double(total), 0.85);
}

TEST(ExpertCachePolicy, SimulationMatchesHandWorkedTraces) {
    // Three keys cycled through a cache of two: LRU always evicts the next one needed.
    std::vector<std::vector<uint32_t>> cyclic;
    for (int i = 0; i < 30; ++i) cyclic.push_back({uint32_t(i % 3)});
    EXPECT_DOUBLE_EQ(simulate_hit_rate(cyclic, 3, 2, CachePolicy::Lru), 0.0);
    // A popular key between rare ones: LFU keeps it, LRU loses it to the rare stream.
    std::vector<std::vector<uint32_t>> skewed;
    for (uint32_t i = 0; i < 40; ++i) {
        skewed.push_back({0});
        skewed.push_back({1 + i % 8});
        skewed.push_back({1 + (i + 4) % 8});
    }
    const double lru = simulate_hit_rate(skewed, 9, 2, CachePolicy::Lru);
    const double lfu = simulate_hit_rate(skewed, 9, 2, CachePolicy::Lfu);
    EXPECT_DOUBLE_EQ(lru, 0.0);
    EXPECT_GT(lfu, 0.3);
    // Everything fits: only first uses miss.
    EXPECT_DOUBLE_EQ(simulate_hit_rate(skewed, 9, 9, CachePolicy::Lru), 1.0 - 9.0 / 120.0);
}

TEST(ExpertRouting, EngineReplaysAForcedTraceThroughTheStore) {
    const std::string path = test::synth_test_model("tiny-qwen3moe", TensorType::Q8_0);
    auto file = read_gguf(path);
    ASSERT_TRUE(file);
    auto info = load_model_info(std::move(*file));
    ASSERT_TRUE(info);
    const auto& hp = *info->hparams;
    auto trace = std::make_shared<RoutingTrace>(engine::make_local_trace(
        int(hp.n_layer), int(hp.n_expert), int(hp.n_expert_used), 12, 0.5, 1.0, 3));
    ExpertCacheConfig cfg;
    cfg.cache_entries = 4;
    cfg.prefetch = false;
    auto store = ModelStore::open(*info, expert_stream_layout(*info, cfg));
    ASSERT_TRUE(store);
    (*store)->expert_cache()->record_trace();
    engine::EngineOptions opt;
    opt.threads = 2;
    opt.n_ctx = 32;
    opt.forced_routing = trace;
    auto e = engine::Engine::create(hp, **store, opt, make_backend);
    ASSERT_TRUE(e) << e.error().message;
    std::vector<float> logits;
    for (int32_t tok = 0; tok < 12; ++tok) {
        ASSERT_TRUE((*e)->eval({&tok, 1}, engine::LogitsWanted::Last, logits));
    }
    const auto& seen = (*store)->expert_cache()->trace();
    ASSERT_EQ(seen.size(), 12u * hp.n_layer);
    for (size_t i = 0; i < seen.size(); ++i) {
        const int layer = int(i % hp.n_layer);
        std::vector<uint32_t> want;
        for (int32_t x : trace->choices(int64_t(i / hp.n_layer), layer)) {
            want.push_back(uint32_t(layer) * hp.n_expert + uint32_t(x));
        }
        std::sort(want.begin(), want.end());
        EXPECT_EQ(seen[i], want) << "token " << i / hp.n_layer << " layer " << layer;
    }

    // A trace of another shape is refused.
    opt.forced_routing = std::make_shared<RoutingTrace>(
        engine::make_local_trace(int(hp.n_layer) + 1, int(hp.n_expert), 2, 4, 0.5, 1.0, 3));
    EXPECT_FALSE(engine::Engine::create(hp, **store, opt, make_backend));
}

}  // namespace
}  // namespace strata
