// The expert cache must change nothing but where expert bytes come from (design invariant
// 1): bit-identical logits to a resident layout for any cache size, policy and prefetch, on
// fused and shared-expert layouts; its counters must add up against a recorded routing trace
// (hit rate equal to the cache-policy simulation of that trace, disk bytes = misses x expert
// bytes); a poisoned cache entry is read again, never computed with; the routing statistics file
// warms the next run, and a damaged one or another model's is ignored with a warning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/engine.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "store/coactivation.h"
#include "store/model_store.h"
#include "store/store_layout.h"
#include "test_support.h"

namespace strata {
namespace {

using Logits = std::vector<std::vector<float>>;

Logits run_tokens(const ModelInfo& info, WeightStore& store, int steps = 8,
                  const std::function<void()>& between = {}) {
    return test::greedy_logits(info, store, steps, between);
}

ModelInfo load_info(const std::string& path) {
    auto f = read_gguf(path);
    EXPECT_TRUE(f) << (f ? "" : f.error().message);
    auto info = load_model_info(std::move(*f));
    EXPECT_TRUE(info) << (info ? "" : info.error().message);
    return std::move(*info);
}

std::vector<std::string> moe_models() {
    std::vector<std::string> out{test::synth_test_model("tiny-qwen2moe", TensorType::Q8_0),
                                 test::synth_test_model("tiny-qwen3moe", TensorType::Q4_K)};
    if (test::have_testdata()) {
        for (const char* m : {"llama-moe-Q8_0", "llama-moe-Q4_K_M", "llama-moe-F16"}) {
            out.push_back(
                (test::testdata_dir() / "models/synthetic" / (std::string(m) + ".gguf")).string());
        }
    }
    return out;
}

TEST(ExpertStreamStore, GivesResidentLogitsForAnyCacheAndPrefetch) {
    for (const std::string& path : moe_models()) {
        SCOPED_TRACE(path);
        const ModelInfo info = load_info(path);
        auto resident = ModelStore::open(info, resident_layout(info));
        ASSERT_TRUE(resident) << resident.error().message;
        const Logits want = run_tokens(info, **resident);
        const uint64_t all = uint64_t(info.hparams->n_layer) * info.hparams->n_expert;
        struct Case {
            uint64_t entries;
            CachePolicy policy;
            bool prefetch;
        };
        for (const Case c :
             {Case{2, CachePolicy::Lru, false}, Case{3, CachePolicy::Lfu, true},
              Case{info.hparams->n_expert_used * 2u, CachePolicy::Lru, true},
              Case{all / 2, CachePolicy::Lfu, true}, Case{all, CachePolicy::Lru, false}}) {
            SCOPED_TRACE("entries " + std::to_string(c.entries) + " " +
                         std::string(cache_policy_name(c.policy)) +
                         (c.prefetch ? " prefetch" : ""));
            ExpertCacheConfig cfg;
            cfg.cache_entries = c.entries;
            cfg.policy = c.policy;
            cfg.prefetch = c.prefetch;
            auto store = ModelStore::open(info, expert_stream_layout(info, cfg));
            ASSERT_TRUE(store) << store.error().message;
            const Logits got = run_tokens(info, **store);
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
            const ExpertStreamStats& t = (*store)->expert_cache()->totals();
            EXPECT_EQ(t.hits + t.misses, t.requests);
            EXPECT_LE(t.prefetch_used, t.prefetches);
            EXPECT_GT(t.bytes_from_disk, 0u);
            EXPECT_EQ((*store)->stats().bytes_from_disk, t.bytes_from_disk);
            if (!c.prefetch) {
                EXPECT_EQ(t.prefetches, 0u);
            }
            if (c.entries >= all) {
                EXPECT_LE(t.misses, all);  // each expert read once at most
            }
        }
    }
}

// A resident store hands out every expert of a layer at once (what a backend that routes by
// itself reads): expert e's matrices are expert 0's moved by e strides. A store that streams the
// experts has no such stack.
TEST(ExpertStreamStore, OnlyAResidentStoreStacksItsExperts) {
    for (const std::string& path : moe_models()) {
        SCOPED_TRACE(path);
        const ModelInfo info = load_info(path);
        auto resident = ModelStore::open(info, resident_layout(info));
        ASSERT_TRUE(resident) << resident.error().message;
        for (int layer = 0; layer < int(info.hparams->n_layer); ++layer) {
            const auto stack = (*resident)->resident_experts(layer);
            ASSERT_TRUE(stack) << "layer " << layer;
            ASSERT_EQ(stack->n_expert, int(info.hparams->n_expert));
            for (int e = 0; e < stack->n_expert; ++e) {
                auto ev = (*resident)->acquire_expert(layer, e);
                ASSERT_TRUE(ev) << ev.error().message;
                EXPECT_EQ(ev->gate.data, stack->first.gate.data + size_t(e) * stack->gate_stride);
                EXPECT_EQ(ev->up.data, stack->first.up.data + size_t(e) * stack->up_stride);
                EXPECT_EQ(ev->down.data, stack->first.down.data + size_t(e) * stack->down_stride);
                EXPECT_EQ(ev->down.type, stack->first.down.type);
                EXPECT_TRUE((*resident)->release_expert(layer, e));
            }
        }
        ExpertCacheConfig cfg;
        cfg.cache_entries = 2;
        auto streaming = ModelStore::open(info, expert_stream_layout(info, cfg));
        ASSERT_TRUE(streaming) << streaming.error().message;
        EXPECT_FALSE((*streaming)->resident_experts(0));
    }
}

TEST(ExpertStreamStore, HitRateAndBytesMatchTheRecordedTrace) {
    for (const std::string& path : moe_models()) {
        SCOPED_TRACE(path);
        const ModelInfo info = load_info(path);
        const uint64_t all = uint64_t(info.hparams->n_layer) * info.hparams->n_expert;
        for (CachePolicy policy : {CachePolicy::Lru, CachePolicy::Lfu}) {
            ExpertCacheConfig cfg;
            cfg.cache_entries = std::max<uint64_t>(info.hparams->n_expert, all / 3);
            cfg.policy = policy;
            cfg.prefetch = false;
            auto store = ModelStore::open(info, expert_stream_layout(info, cfg));
            ASSERT_TRUE(store) << store.error().message;
            (*store)->expert_cache()->record_trace();
            run_tokens(info, **store, 16);
            const ExpertStreamStats& t = (*store)->expert_cache()->totals();
            uint64_t keys = 0;
            for (const auto& b : (*store)->expert_cache()->trace()) keys += b.size();
            EXPECT_EQ(keys, t.requests);
            const double simulated = simulate_hit_rate(
                (*store)->expert_cache()->trace(), size_t(all), size_t(cfg.cache_entries), policy);
            EXPECT_DOUBLE_EQ(double(t.hits) / double(t.requests), simulated)
                << cache_policy_name(policy);
            // Every miss read one expert's three slices (their size depends on the layer in a
            // mixed-type file), nothing else was read.
            const auto resident = ModelStore::open(info, resident_layout(info));
            ASSERT_TRUE(resident);
            uint64_t misses = 0, bytes = 0;
            const auto& layers = (*store)->expert_cache()->layer_stats();
            for (size_t l = 0; l < layers.size(); ++l) {
                const auto ev = (*resident)->acquire_expert(int(l), 0);
                ASSERT_TRUE(ev);
                misses += layers[l].misses;
                bytes += layers[l].misses * expert_bytes(*ev);
                EXPECT_EQ(layers[l].bytes_from_disk, layers[l].misses * expert_bytes(*ev));
            }
            EXPECT_EQ(misses, t.misses);
            EXPECT_EQ(t.bytes_from_disk, bytes);
        }
    }
}

TEST(ExpertStreamStore, PoisonedEntriesAreReadAgainNotComputedWith) {
    for (const std::string& path : moe_models()) {
        SCOPED_TRACE(path);
        const ModelInfo info = load_info(path);
        auto resident = ModelStore::open(info, resident_layout(info));
        ASSERT_TRUE(resident);
        const Logits want = run_tokens(info, **resident);
        ExpertCacheConfig cfg;
        cfg.cache_entries = uint64_t(info.hparams->n_layer) * info.hparams->n_expert;
        auto store = ModelStore::open(info, expert_stream_layout(info, cfg));
        ASSERT_TRUE(store);
        ExpertCache& s = *(*store)->expert_cache();
        uint64_t misses_before = 0;
        const Logits got = run_tokens(info, **store, 8, [&] {
            misses_before = s.totals().misses;
            for (size_t i = 0; i < s.entries(); ++i) s.poison_entry_for_test(i);
        });
        for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
        EXPECT_GT(s.totals().misses, misses_before);  // the poisoned ones were read again
    }
}

// Without an expert cache (every expert resident), the store keeps the routing statistics
// itself: a run's choices are saved when the store closes and loaded by the next, which adds its
// own, so plans of the model learn its routing from resident runs too; a damaged file is ignored
// with a warning, as the cache does.
TEST(ExpertStreamStore, AResidentStoreKeepsTheRoutingStatistics) {
    const std::string path = test::synth_test_model("tiny-qwen2moe", TensorType::Q8_0);
    const ModelInfo info = load_info(path);
    test::TempDir dir;
    StoreLayout layout = resident_layout(info);
    layout.experts.stats_path = expert_statistics_path(dir.path().string(), info);
    {
        auto store = ModelStore::open(info, layout);
        ASSERT_TRUE(store) << store.error().message;
        EXPECT_EQ((*store)->expert_cache(), nullptr);
        EXPECT_TRUE((*store)->report().warnings.empty());
        run_tokens(info, **store);
    }  // saved on close
    ASSERT_TRUE(std::filesystem::exists(layout.experts.stats_path));
    const ModelHparams& hp = *info.hparams;
    CoactivationStats first;
    first.reset(int(hp.n_layer), int(hp.n_expert));
    ASSERT_TRUE(first.load(layout.experts.stats_path, model_identity(info)));
    EXPECT_GT(first.tokens_recorded(), 0u);
    uint64_t chosen = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        for (uint32_t e = 0; e < hp.n_expert; ++e) chosen += first.frequency(int(l), int(e));
    }
    EXPECT_EQ(chosen % hp.n_expert_used, 0u);  // k choices a token, each counted once
    EXPECT_GT(chosen, 0u);
    {
        auto store = ModelStore::open(info, layout);
        ASSERT_TRUE(store) << store.error().message;
        run_tokens(info, **store, 2);
    }
    CoactivationStats second;
    second.reset(int(hp.n_layer), int(hp.n_expert));
    ASSERT_TRUE(second.load(layout.experts.stats_path, model_identity(info)));
    EXPECT_GT(second.tokens_recorded(), first.tokens_recorded());  // the next run added its own
    {
        std::ofstream(layout.experts.stats_path, std::ios::trunc) << "not statistics";
        auto store = ModelStore::open(info, layout);
        ASSERT_TRUE(store) << store.error().message;
        EXPECT_EQ((*store)->report().warnings.size(), 1u);
    }
}

TEST(ExpertStreamStore, StatisticsWarmTheNextRunAndBadFilesAreIgnored) {
    const std::string a_path = test::synth_test_model("tiny-qwen2moe", TensorType::Q8_0);
    const std::string b_path = test::synth_test_model("tiny-qwen2moe", TensorType::Q8_0, 2);
    const ModelInfo a = load_info(a_path), b = load_info(b_path);
    test::TempDir dir;
    const std::string stats = expert_statistics_path(dir.path().string(), a);
    EXPECT_NE(stats, expert_statistics_path(dir.path().string(), b));
    ExpertCacheConfig cfg;
    cfg.cache_entries = 8;
    cfg.stats_path = stats;
    {
        auto store = ModelStore::open(a, expert_stream_layout(a, cfg));
        ASSERT_TRUE(store);
        EXPECT_TRUE((*store)->report().warnings.empty());
        run_tokens(a, **store);
    }  // saved on close
    ASSERT_TRUE(std::filesystem::exists(stats));
    {
        auto store = ModelStore::open(a, expert_stream_layout(a, cfg));
        ASSERT_TRUE(store);
        EXPECT_TRUE((*store)->report().warnings.empty());
        EXPECT_GT((*store)->routing_statistics().tokens_recorded(), 0u);
        run_tokens(a, **store, 2);
        EXPECT_GT((*store)->expert_cache()->totals().hits, 0u);  // warmed with the favourites
    }
    // Another model's statistics under b's name: ignored.
    const std::string b_stats = expert_statistics_path(dir.path().string(), b);
    std::filesystem::copy_file(stats, b_stats);
    ExpertCacheConfig bcfg = cfg;
    bcfg.stats_path = b_stats;
    bcfg.warm = true;
    {
        auto store = ModelStore::open(b, expert_stream_layout(b, bcfg));
        ASSERT_TRUE(store);
        ASSERT_EQ((*store)->report().warnings.size(), 1u);
        EXPECT_NE((*store)->report().warnings[0].find("another model"), std::string::npos);
        EXPECT_EQ((*store)->routing_statistics().tokens_recorded(), 0u);
    }
    // A damaged file: ignored, and replaced by good statistics at the end of the run.
    {
        std::fstream f(stats, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-3, std::ios::end);
        f.put('\x55');
    }
    {
        auto store = ModelStore::open(a, expert_stream_layout(a, cfg));
        ASSERT_TRUE(store);
        ASSERT_EQ((*store)->report().warnings.size(), 1u);
        EXPECT_NE((*store)->report().warnings[0].find("damaged"), std::string::npos);
        run_tokens(a, **store, 2);
    }
    {
        std::ofstream(stats, std::ios::trunc) << "not statistics";
        auto store = ModelStore::open(a, expert_stream_layout(a, cfg));
        ASSERT_TRUE(store);
        ASSERT_EQ((*store)->report().warnings.size(), 1u);
        EXPECT_NE((*store)->report().warnings[0].find("not an expert statistics file"),
                  std::string::npos);
    }
}

// Named one by one, not through ExpertStreamStats::fields(), so that the test does not share a
// mistake with the list it checks.
TEST(ExpertStreamStats, SumAndDifferenceCoverEveryField) {
    ExpertStreamStats a;
    a.requests = 1;
    a.hits = 2;
    a.waits = 3;
    a.misses = 4;
    a.prefetches = 5;
    a.prefetch_used = 6;
    a.prefetch_skipped = 7;
    a.bytes_requested = 8;
    a.bytes_from_disk = 9;
    a.prefetch_bytes = 10;
    a.stall_seconds = 11.5;
    ExpertStreamStats b;
    b.requests = 100;
    b.hits = 200;
    b.waits = 300;
    b.misses = 400;
    b.prefetches = 500;
    b.prefetch_used = 600;
    b.prefetch_skipped = 700;
    b.bytes_requested = 800;
    b.bytes_from_disk = 900;
    b.prefetch_bytes = 1000;
    b.stall_seconds = 1100.25;

    ExpertStreamStats sum = a;
    sum += b;
    EXPECT_EQ(sum.requests, 101u);
    EXPECT_EQ(sum.hits, 202u);
    EXPECT_EQ(sum.waits, 303u);
    EXPECT_EQ(sum.misses, 404u);
    EXPECT_EQ(sum.prefetches, 505u);
    EXPECT_EQ(sum.prefetch_used, 606u);
    EXPECT_EQ(sum.prefetch_skipped, 707u);
    EXPECT_EQ(sum.bytes_requested, 808u);
    EXPECT_EQ(sum.bytes_from_disk, 909u);
    EXPECT_EQ(sum.prefetch_bytes, 1010u);
    EXPECT_EQ(sum.stall_seconds, 1111.75);

    const ExpertStreamStats d = sum - a;
    EXPECT_EQ(d.requests, b.requests);
    EXPECT_EQ(d.hits, b.hits);
    EXPECT_EQ(d.waits, b.waits);
    EXPECT_EQ(d.misses, b.misses);
    EXPECT_EQ(d.prefetches, b.prefetches);
    EXPECT_EQ(d.prefetch_used, b.prefetch_used);
    EXPECT_EQ(d.prefetch_skipped, b.prefetch_skipped);
    EXPECT_EQ(d.bytes_requested, b.bytes_requested);
    EXPECT_EQ(d.bytes_from_disk, b.bytes_from_disk);
    EXPECT_EQ(d.prefetch_bytes, b.prefetch_bytes);
    EXPECT_EQ(d.stall_seconds, b.stall_seconds);
}

TEST(ExpertStreamStore, ADenseModelHasNoExpertCache) {
    const ModelInfo info = load_info(test::synth_test_model("tiny", TensorType::Q8_0));
    const StoreLayout layout = expert_stream_layout(info, ExpertCacheConfig{});
    EXPECT_FALSE(layout.any(Residence::ExpertCache));
    StreamReader reader;
    StoreStats stats;
    const CoactivationStats routing;
    auto cache = ExpertCache::create(info, {}, ExpertCacheConfig{}, reader, stats, routing);
    ASSERT_FALSE(cache);
    EXPECT_NE(cache.error().message.find("mixture-of-experts"), std::string::npos);
}

}  // namespace
}  // namespace strata
