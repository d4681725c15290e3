// make_plan (plan/plan.h) on synthetic model shapes and a hand-built profile (RAM 10 GB/s, disk
// 1.5 GB/s): the mode it picks, where every tensor goes, that the budget holds, the sizes of the
// streaming machinery, and the speed limit against the formula computed here from the tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "model/kv_layout.h"
#include "plan/plan.h"
#include "plan/plan_layers.h"
#include "plan_test_support.h"
#include "util/units.h"

namespace strata {
namespace {

constexpr uint64_t GiB = 1ull << 30;
constexpr double kRam = 10e9, kDisk = 1.5e9;

const ModelInfo& llama8b() {
    static const ModelInfo info = test::synthetic_model_info("8b", "Q4_K_M");
    return info;
}
const ModelInfo& mixtral() {
    static const ModelInfo info = test::synthetic_model_info("mixtral-10g", "Q4_K_M");
    return info;
}
const ModelInfo& qwen3moe() {
    static const ModelInfo info = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    return info;
}

Budgets ram(uint64_t bytes) {
    Budgets b;
    b.ram = bytes;
    b.ram_from_flag = true;
    return b;
}

PlanOptions ctx(uint32_t n_ctx) {
    PlanOptions o;
    o.n_ctx = n_ctx;
    o.disk = 0;
    return o;
}

Plan plan_or_fail(const ModelInfo& m, const Budgets& b, const PlanOptions& o) {
    auto p = make_plan(m, test::plan_profile(), b, o);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    return p.ok() ? std::move(*p) : Plan{};
}

bool is_dense_ffn_weight(TensorRole r) {
    return r == TensorRole::FfnGate || r == TensorRole::FfnUp || r == TensorRole::FfnDown;
}

// The speed limit from the tensors and their tiers, as the design states it.
double expected_limit(const ModelInfo& m, const Plan& p, double hit_rate = 0) {
    double ram_bytes = 0, disk_bytes = 0;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const double b = m.info(m.tensors[i]).n_bytes * m.tensors[i].reads_per_token;
        (p.tensors[i].tier == Tier::Disk ? disk_bytes : ram_bytes) += b;
    }
    ram_bytes += disk_bytes * hit_rate;
    disk_bytes *= 1 - hit_rate;
    return 1.0 / (ram_bytes / kRam + disk_bytes / kDisk);
}

void expect_memory_adds_up(const ModelInfo& m, const Plan& p) {
    uint64_t resident = 0, cached = 0;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const uint64_t b = m.info(m.tensors[i]).n_bytes;
        if (p.tensors[i].use == TensorUse::Resident) resident += b;
        if (p.tensors[i].use == TensorUse::Cached) cached += b;
    }
    const MemoryPlan& mem = p.memory;
    EXPECT_EQ(mem.resident_weights, resident);
    EXPECT_EQ(mem.cached_weights, cached);
    EXPECT_EQ(mem.slots, p.stream.slots * p.stream.slot_bytes);
    EXPECT_EQ(mem.total, mem.resident_weights + mem.cached_weights + mem.expert_cache + mem.slots +
                             mem.kv_cache + mem.activations + mem.io_buffers + mem.baseline +
                             mem.slack);
    EXPECT_EQ(mem.model() + mem.process(), mem.total);
    // The lines besides the weights are there: the engine, the process and its slack.
    EXPECT_GT(mem.activations, 0u);
    EXPECT_GT(mem.baseline, 0u);
    EXPECT_EQ(mem.slack, kSlackBytes + mem.budget / kSlackPerBudget);
    EXPECT_LE(mem.total, mem.budget);
    EXPECT_EQ(mem.budget, p.budgets.ram);
}

TEST(PlanPlacement, ModelThatFitsIsResidentAtRamSpeed) {
    const ModelInfo& m = llama8b();
    const Plan p = plan_or_fail(m, ram(16 * GiB), ctx(4096));
    EXPECT_EQ(p.mode, PlanMode::Resident);
    EXPECT_FALSE(p.mode_forced);
    for (const TensorPlacement& t : p.tensors) {
        EXPECT_EQ(t.tier, Tier::Ram);
        EXPECT_EQ(t.use, TensorUse::Resident);
    }
    // 8B: 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes x 4096 positions = 512 MiB.
    EXPECT_EQ(p.memory.kv_cache, 512ull << 20);
    EXPECT_EQ(p.memory.resident_weights, m.totals.bytes);
    EXPECT_EQ(p.stream.slots, 0u);
    expect_memory_adds_up(m, p);
    EXPECT_EQ(p.bound, Tier::Ram);
    EXPECT_DOUBLE_EQ(p.traffic(Tier::Disk).bytes_per_token, 0);
    EXPECT_NEAR(p.tokens_per_second, kRam / m.totals.bytes_per_token, 1e-9 * p.tokens_per_second);
    EXPECT_EQ(p.layers.size(), 32u);
}

TEST(PlanPlacement, DenseModelInHalfItsSizeStreamsFfnAndCachesWhatFits) {
    const ModelInfo& m = llama8b();
    const uint64_t budget = m.totals.bytes / 2;
    const Plan p = plan_or_fail(m, ram(budget), ctx(4096));
    ASSERT_EQ(p.mode, PlanMode::FfnStream);
    // Every non-FFN tensor resident; FFN weights cached or streamed a whole layer at a time.
    std::map<int, TensorUse> layer_use;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const ModelTensor& t = m.tensors[i];
        const TensorPlacement& pl = p.tensors[i];
        if (!is_dense_ffn_weight(t.role)) {
            EXPECT_EQ(pl.use, TensorUse::Resident) << m.info(t).name;
            EXPECT_EQ(pl.tier, Tier::Ram) << m.info(t).name;
            continue;
        }
        EXPECT_NE(pl.use, TensorUse::Resident) << m.info(t).name;
        EXPECT_EQ(pl.tier, pl.use == TensorUse::Streamed ? Tier::Disk : Tier::Ram);
        auto [it, fresh] = layer_use.emplace(t.layer, pl.use);
        if (!fresh) {
            EXPECT_EQ(it->second, pl.use) << "layer " << t.layer << " split";
        }
    }
    EXPECT_GT(p.stream.cached_layers, 0u);
    EXPECT_GT(p.stream.streamed_layers, 0u);
    EXPECT_EQ(p.stream.cached_layers + p.stream.streamed_layers, 32u);
    expect_memory_adds_up(m, p);

    // Tight: one more cached layer would not fit.
    uint64_t largest_ffn = 0;
    for (const LayerPlan& l : p.layers) largest_ffn = std::max(largest_ffn, l.ffn_bytes);
    EXPECT_LT(p.memory.budget - p.memory.total, largest_ffn);

    // Slots: lookahead + 1, each the largest layer's FFN widened to 4 KiB blocks (3 tensors, at
    // most two partial blocks each).
    EXPECT_GE(p.stream.lookahead, 1u);
    EXPECT_LE(p.stream.lookahead, kMaxLookahead);
    EXPECT_EQ(p.stream.slots, p.stream.lookahead + 1);
    EXPECT_GE(p.stream.slot_bytes, largest_ffn);
    EXPECT_LE(p.stream.slot_bytes, largest_ffn + 3 * 2 * 4096);
    EXPECT_EQ(p.stream.block_size, 4096u);
    // The lookahead covers the longest gap, as derived in plan.h.
    EXPECT_GE(p.stream.lookahead * p.stream.layer_read_seconds, p.stream.longest_gap_seconds);

    // Cached layers are spread over the depth, not bunched at the front.
    std::vector<int> cached;
    for (const LayerPlan& l : p.layers) {
        if (l.ffn_use == TensorUse::Cached) cached.push_back(l.layer);
    }
    ASSERT_GE(cached.size(), 2u);
    EXPECT_EQ(cached.front(), 0);
    EXPECT_GE(cached.back(), 16);

    EXPECT_EQ(p.bound, Tier::Disk);
    EXPECT_NEAR(p.tokens_per_second, expected_limit(m, p), 1e-9 * p.tokens_per_second);
    EXPECT_NEAR(p.traffic(Tier::Ram).bandwidth, kRam, 1);
    EXPECT_NEAR(p.traffic(Tier::Disk).bandwidth, kDisk, 1);
    EXPECT_GT(p.traffic(Tier::Disk).stored_bytes, 0u);
}

TEST(PlanPlacement, MoreBudgetCachesMoreAndRaisesTheLimit) {
    const ModelInfo& m = llama8b();
    double last = 0;
    uint32_t last_cached = 0;
    for (uint64_t gib = 2; gib <= 4; ++gib) {
        const Plan p = plan_or_fail(m, ram(gib * GiB), ctx(4096));
        ASSERT_EQ(p.mode, PlanMode::FfnStream) << gib;
        expect_memory_adds_up(m, p);
        EXPECT_GE(p.stream.cached_layers, last_cached);
        EXPECT_GT(p.tokens_per_second, last);
        last = p.tokens_per_second;
        last_cached = p.stream.cached_layers;
    }
}

TEST(PlanPlacement, MoeWhoseExpertsDoNotFitStreamsExperts) {
    for (const ModelInfo* model : {&mixtral(), &qwen3moe()}) {
        const ModelInfo& m = *model;
        const uint32_t n_used = m.hparams->n_expert_used;
        const Plan p = plan_or_fail(m, ram(m.totals.bytes / 2), ctx(4096));
        ASSERT_EQ(p.mode, PlanMode::ExpertStream) << m.file.path;
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            const ModelTensor& t = m.tensors[i];
            const bool expert = t.is_routed_expert();
            EXPECT_EQ(p.tensors[i].tier, expert ? Tier::Disk : Tier::Ram) << m.info(t).name;
            EXPECT_EQ(p.tensors[i].use, expert ? TensorUse::Streamed : TensorUse::Resident);
        }
        const ExpertCachePlan& c = p.expert_cache;
        EXPECT_EQ(c.experts, uint64_t{m.hparams->n_layer} * m.hparams->n_expert);
        EXPECT_EQ(c.experts_per_slot, n_used);
        EXPECT_GT(c.capacity, 0u);
        EXPECT_LT(c.capacity, c.experts);
        EXPECT_DOUBLE_EQ(c.hit_rate, static_cast<double>(c.capacity) / c.experts);
        // One expert of one layer (gate + up + down slices), the largest layer's: the K-quant
        // mixes give ffn_down more bits in some layers.
        uint64_t expert_bytes = 0;
        for (const auto& [layer, totals] : m.by_layer) {
            expert_bytes = std::max(expert_bytes, totals.expert_bytes / m.hparams->n_expert);
        }
        EXPECT_GE(c.expert_bytes, expert_bytes);
        EXPECT_LE(c.expert_bytes, expert_bytes + 3 * 2 * 4096);
        EXPECT_EQ(p.stream.slots, 2u);
        EXPECT_EQ(p.stream.lookahead, 1u);
        EXPECT_EQ(p.stream.slot_bytes, n_used * c.expert_bytes);
        EXPECT_EQ(p.memory.expert_cache, c.capacity * c.expert_bytes);
        expect_memory_adds_up(m, p);
        // Tight: one more expert would not fit.
        EXPECT_LT(p.memory.budget - p.memory.total, c.expert_bytes);
        EXPECT_NEAR(p.tokens_per_second, expected_limit(m, p, c.hit_rate),
                    1e-9 * p.tokens_per_second);
    }
}

TEST(PlanPlacement, MoeThatFitsIsResident) {
    const Plan p = plan_or_fail(mixtral(), ram(16 * GiB), ctx(4096));
    EXPECT_EQ(p.mode, PlanMode::Resident);
    EXPECT_EQ(p.memory.resident_weights, mixtral().totals.bytes);
}

TEST(PlanPlacement, TooSmallBudgetNamesTheMinimum) {
    const ModelInfo& m = llama8b();
    // The minimum of streaming FFN layers only: resident tensors, KV cache, two slots, the
    // engine, the process, I/O buffers, and the slack of a budget that small.
    const Plan two_slots = plan_or_fail(m, ram(3 * GiB), [] {
        PlanOptions o = ctx(4096);
        o.slots = 2;
        return o;
    }());
    const MemoryPlan& t = two_slots.memory;
    const uint64_t need = t.resident_weights + t.kv_cache + 2 * two_slots.stream.slot_bytes +
                          t.activations + t.io_buffers + t.baseline;
    uint64_t minimum = need;
    while (minimum < need + kSlackBytes + minimum / kSlackPerBudget) ++minimum;

    // Exactly the minimum of streaming FFN layers works, with everything else resident.
    const Plan at_minimum = plan_or_fail(m, ram(minimum), ctx(4096));
    EXPECT_EQ(at_minimum.mode, PlanMode::FfnStream);
    EXPECT_EQ(at_minimum.stream.slots, 2u);
    EXPECT_EQ(at_minimum.stream.cached_layers, 0u);
    EXPECT_EQ(at_minimum.memory.total, minimum);
    EXPECT_FALSE(at_minimum.deep.embedding_rows || at_minimum.deep.head_rows ||
                 at_minimum.deep.whole_layers);
    // One byte less: deeper streaming. With this small vocabulary the tables are smaller than
    // their row buffers would be, so they stay resident and attention streams: whole layers.
    const Plan below = plan_or_fail(m, ram(minimum - 1), ctx(4096));
    EXPECT_TRUE(below.deep.whole_layers);
    EXPECT_FALSE(below.deep.embedding_rows || below.deep.head_rows);
    EXPECT_EQ(below.memory.row_buffers, 0u);
    EXPECT_LE(below.memory.total, minimum - 1);

    // Below even that, the error names the smallest minimum and its parts.
    auto small = make_plan(m, test::plan_profile(), ram(600ull << 20), ctx(4096));
    ASSERT_FALSE(small.ok());
    const std::string& e = small.error().message;
    EXPECT_NE(e.find("600.00 MiB is too small for this model"), std::string::npos) << e;
    EXPECT_NE(e.find("KV cache (512.00 MiB for 4096 tokens)"), std::string::npos) << e;
    EXPECT_NE(e.find("2 slots of a whole layer"), std::string::npos) << e;
    EXPECT_NE(e.find("--ram"), std::string::npos) << e;
    // A shorter context needs less.
    EXPECT_TRUE(make_plan(m, test::plan_profile(), ram(600ull << 20), ctx(1024)).ok());

    auto moe = make_plan(mixtral(), test::plan_profile(), ram(GiB / 4), ctx(4096));
    ASSERT_FALSE(moe.ok());
    EXPECT_NE(moe.error().message.find("everything but the routed experts"), std::string::npos)
        << moe.error().message;
    EXPECT_NE(moe.error().message.find("2 slots of 2 experts"), std::string::npos)
        << moe.error().message;
}

TEST(PlanPlacement, ForcedModes) {
    const ModelInfo& m = llama8b();
    PlanOptions o = ctx(4096);

    o.mode = PlanMode::Resident;
    Plan p = plan_or_fail(m, ram(16 * GiB), o);
    EXPECT_EQ(p.mode, PlanMode::Resident);
    EXPECT_TRUE(p.mode_forced);
    auto too_small = make_plan(m, test::plan_profile(), ram(3 * GiB), o);
    ASSERT_FALSE(too_small.ok());
    EXPECT_NE(too_small.error().message.find("too small for resident mode"), std::string::npos);

    // ffn-stream with room for everything: every layer cached, nothing read from disk.
    o.mode = PlanMode::FfnStream;
    p = plan_or_fail(m, ram(16 * GiB), o);
    EXPECT_EQ(p.mode, PlanMode::FfnStream);
    EXPECT_EQ(p.stream.cached_layers, 32u);
    EXPECT_EQ(p.stream.slots, 0u);
    EXPECT_DOUBLE_EQ(p.traffic(Tier::Disk).bytes_per_token, 0);
    // ... and with too little it streams as the automatic choice would.
    const Plan forced = plan_or_fail(m, ram(3 * GiB), o);
    const Plan automatic = plan_or_fail(m, ram(3 * GiB), ctx(4096));
    EXPECT_EQ(forced.stream.cached_layers, automatic.stream.cached_layers);
    EXPECT_DOUBLE_EQ(forced.tokens_per_second, automatic.tokens_per_second);

    o.mode = PlanMode::ExpertStream;
    auto dense = make_plan(m, test::plan_profile(), ram(3 * GiB), o);
    ASSERT_FALSE(dense.ok());
    EXPECT_NE(dense.error().message.find("mixture-of-experts"), std::string::npos);

    // A MoE model forced to ffn-stream streams whole FFN layers, experts included.
    o.mode = PlanMode::FfnStream;
    p = plan_or_fail(mixtral(), ram(4 * GiB), o);
    EXPECT_EQ(p.mode, PlanMode::FfnStream);
    EXPECT_GT(p.stream.streamed_layers, 0u);
    expect_memory_adds_up(mixtral(), p);
}

TEST(PlanPlacement, ForcedSlotsAndLookahead) {
    const ModelInfo& m = llama8b();
    PlanOptions o = ctx(4096);
    o.slots = 5;
    Plan p = plan_or_fail(m, ram(3 * GiB), o);
    EXPECT_EQ(p.stream.slots, 5u);
    EXPECT_EQ(p.stream.lookahead, 4u);
    EXPECT_TRUE(p.stream.slots_forced);
    EXPECT_FALSE(p.stream.lookahead_forced);
    expect_memory_adds_up(m, p);

    o.slots.reset();
    o.lookahead = 3;
    p = plan_or_fail(m, ram(3 * GiB), o);
    EXPECT_EQ(p.stream.slots, 4u);
    EXPECT_EQ(p.stream.lookahead, 3u);

    o.slots = 3;
    o.lookahead = 3;
    auto bad = make_plan(m, test::plan_profile(), ram(3 * GiB), o);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("--slots 3"), std::string::npos);
    o.lookahead.reset();
    o.slots = 1;
    EXPECT_FALSE(make_plan(m, test::plan_profile(), ram(3 * GiB), o).ok());
    o.slots.reset();
    o.lookahead = 0;
    EXPECT_FALSE(make_plan(m, test::plan_profile(), ram(3 * GiB), o).ok());
}

TEST(PlanPlacement, KvCacheFollowsContextAndType) {
    const ModelInfo& m = llama8b();
    PlanOptions o = ctx(8192);
    Plan p = plan_or_fail(m, ram(16 * GiB), o);
    EXPECT_EQ(p.n_ctx, 8192u);
    EXPECT_EQ(p.memory.kv_cache, 1ull << 30);
    o.kv_type = KvType::Q8_0;
    p = plan_or_fail(m, ram(16 * GiB), o);
    EXPECT_EQ(p.memory.kv_cache, kv_cache_bytes(*m.hparams, 8192, o.kv_type));
    EXPECT_LT(p.memory.kv_cache, 1ull << 30);
    // 0: the engine's default context (the training context, at most 4096).
    p = plan_or_fail(m, ram(16 * GiB), ctx(0));
    EXPECT_EQ(p.n_ctx, 4096u);
}

TEST(PlanPlacement, KvTypeTheModelCannotStoreHasNoPlan) {
    ModelInfo m = llama8b();
    m.hparams->head_dim_k = m.hparams->head_dim_v = 80;  // not whole Q8_0 blocks
    PlanOptions o = ctx(4096);
    o.kv_type = KvType::Q8_0;
    auto p = make_plan(m, test::plan_profile(), ram(16 * GiB), o);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("multiples of 32"), std::string::npos) << p.error().message;
    o.kv_type = KvType::F16;
    EXPECT_TRUE(make_plan(m, test::plan_profile(), ram(16 * GiB), o).ok());
}

TEST(PlanPlacement, UnrunnableModelHasNoPlan) {
    ModelInfo m = llama8b();
    m.problems.push_back("something is wrong");
    auto p = make_plan(m, test::plan_profile(), ram(16 * GiB), ctx(4096));
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("something is wrong"), std::string::npos);
}

TEST(PlanPlacement, DiskBandwidthPickAndFallback) {
    const ModelInfo& m = llama8b();
    HardwareProfile prof = test::plan_profile();
    DiskProfile& d = prof.disks[0];
    d.reads = {{4096, 32, 0.3e9, 0, 0, 0},
               {1u << 20, 1, 2.5e9, 0, 0, 0},  // queue depth 1: not what the store does
               {1u << 20, 4, 1.8e9, 0, 0, 0},
               {4u << 20, 16, 2.1e9, 0, 0, 0},    // the pick
               {16u << 20, 16, 3.0e9, 0, 0, 0}};  // blocks larger than the store reads
    auto p = make_plan(m, prof, ram(3 * GiB), ctx(4096));
    ASSERT_TRUE(p.ok());
    EXPECT_DOUBLE_EQ(p->traffic(Tier::Disk).bandwidth, 2.1e9);
    EXPECT_NE(p->traffic(Tier::Disk).bandwidth_source.find("4.00 MiB reads at queue depth 16"),
              std::string::npos)
        << p->traffic(Tier::Disk).bandwidth_source;
    auto has_note = [](const Plan& plan, const std::string& text) {
        return std::any_of(plan.notes.begin(), plan.notes.end(),
                           [&](const std::string& n) { return n.find(text) != std::string::npos; });
    };
    EXPECT_FALSE(has_note(*p, "assumed"));

    // Only shallow queues measured: the best with blocks >= 1 MiB.
    d.reads = {{4096, 32, 0.3e9, 0, 0, 0}, {2u << 20, 1, 1.2e9, 0, 0, 0}};
    p = make_plan(m, prof, ram(3 * GiB), ctx(4096));
    EXPECT_DOUBLE_EQ(p->traffic(Tier::Disk).bandwidth, 1.2e9);
    // Only small blocks: the best of any.
    d.reads = {{4096, 32, 0.3e9, 0, 0, 0}};
    p = make_plan(m, prof, ram(3 * GiB), ctx(4096));
    EXPECT_DOUBLE_EQ(p->traffic(Tier::Disk).bandwidth, 0.3e9);
    // Nothing measured, or no entry for the model's disk: assumed, and said so.
    d.reads.clear();
    p = make_plan(m, prof, ram(3 * GiB), ctx(4096));
    EXPECT_DOUBLE_EQ(p->traffic(Tier::Disk).bandwidth, kAssumedDiskBandwidth);
    EXPECT_TRUE(has_note(*p, "assumed: nothing was measured"));
    PlanOptions unknown = ctx(4096);
    unknown.disk = -1;
    p = make_plan(m, test::plan_profile(), ram(3 * GiB), unknown);
    EXPECT_DOUBLE_EQ(p->traffic(Tier::Disk).bandwidth, kAssumedDiskBandwidth);
    EXPECT_TRUE(has_note(*p, "assumed: the profile has no entry for the disk"));
}

TEST(PlanLayers, WidenedBytes) {
    using plan_detail::widened_bytes;
    EXPECT_EQ(widened_bytes(0, 4096, 4096), 4096u);
    EXPECT_EQ(widened_bytes(100, 10, 4096), 4096u);
    EXPECT_EQ(widened_bytes(4090, 10, 4096), 8192u);
    EXPECT_EQ(widened_bytes(4096, 1, 4096), 4096u);
    EXPECT_EQ(widened_bytes(7, 0, 4096), 0u);
}

TEST(PlanLayers, BisectionOrderSpreadsEveryPrefix) {
    using plan_detail::bisection_order;
    EXPECT_EQ(bisection_order(8), (std::vector<int>{0, 4, 2, 6, 1, 5, 3, 7}));
    EXPECT_EQ(bisection_order(1), (std::vector<int>{0}));
    EXPECT_TRUE(bisection_order(0).empty());
    for (int n : {3, 5, 12, 32, 33, 48, 80}) {
        std::vector<int> order = bisection_order(n);
        ASSERT_EQ(order.size(), static_cast<size_t>(n));
        std::vector<int> sorted = order;
        std::sort(sorted.begin(), sorted.end());
        for (int i = 0; i < n; ++i) EXPECT_EQ(sorted[i], i);
        // The first four are near 0, n/4, n/2, 3n/4.
        if (n >= 8) {
            std::vector<int> first(order.begin(), order.begin() + 4);
            std::sort(first.begin(), first.end());
            for (int k = 0; k < 4; ++k) EXPECT_LE(std::abs(first[k] - k * n / 4), 1) << n;
        }
    }
}

TEST(PlanLayers, LookaheadCoversTheLongestGap) {
    using namespace plan_detail;
    ModelBytes mb;
    mb.layers.assign(4, LayerBytes{});
    for (LayerBytes& l : mb.layers) {
        l.resident = 1'000'000;
        l.resident_per_token = 1e6;
        l.stream = l.stream_widened = 100'000'000;
        l.stream_per_token = 1e8;
    }
    mb.non_layer_per_token = 0;
    // Nothing cached, a slow disk (1 s per layer, 0.101 s to compute one): one layer ahead.
    GapFigures g = compute_gaps(mb, {false, false, false, false}, 1e9, 1e8);
    EXPECT_DOUBLE_EQ(g.layer_read_seconds, 1.0);
    EXPECT_NEAR(g.longest_gap_seconds, 0.001, 1e-12);
    EXPECT_EQ(g.lookahead_needed, 1u);
    // Layers 0-2 cached: the gap before layer 3 is three whole layers plus its attention.
    g = compute_gaps(mb, {true, true, true, false}, 1e9, 1e8);
    EXPECT_NEAR(g.longest_gap_seconds, 0.304, 1e-12);
    EXPECT_EQ(g.lookahead_needed, 1u);
    // A disk 100 times faster must read 31 layers ahead to cover it.
    g = compute_gaps(mb, {true, true, true, false}, 1e9, 1e10);
    EXPECT_EQ(g.lookahead_needed, 31u);
    // Nothing streamed: nothing to cover.
    g = compute_gaps(mb, {true, true, true, true}, 1e9, 1e8);
    EXPECT_EQ(g.lookahead_needed, 0u);
}

}  // namespace
}  // namespace strata
