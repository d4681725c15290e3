// The GPU level of the expert cache's bookkeeping (store/vram_expert_cache.h), on any machine:
// its entries live in an ExpertEntryMemory that here only records the copies asked of it and
// lets the test say when they land, so every rule of the level is checked where no GPU is (the
// CUDA tests check the same level end to end on a device, against the CPU's logits).
//
// The rules: an entry serves only once its copy has landed; a miss is loaded only when chosen
// kMinLoadFrequency times lately and more often than the entry it evicts, never one the last
// route served, at most kMaxLoadsPerLayer a layer and kMaxLoadsInFlight in flight; guesses go
// to a ring of their own, serve as hits when chosen, join the policy's part when they beat its
// victim, and stop (but for probes) while fewer than kMinVramPrefetchAccuracy of them serve.
#include "store/vram_expert_cache.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata {
namespace {

constexpr int kLayers = 4;
constexpr int kExperts = 16;
constexpr uint64_t kEntryBytes = 3 * kExpertEntryAlign;

// Entries of kEntryBytes in a host array standing for device memory; a load lands when the test
// says so.
class RecordingEntries final : public ExpertEntryMemory {
  public:
    Result<void> reserve_expert_entries(uint64_t entry_bytes, uint32_t entries) override {
        memory.assign(size_t(entry_bytes) * entries, std::byte{0});
        landed.assign(entries, 1);
        return {};
    }
    Result<ExpertView> load_expert_entry(uint32_t entry, const ExpertView& from) override {
        copies.push_back({entry, from.gate.data});
        landed[entry] = 0;
        ExpertView to = from;
        const std::byte* at = memory.data() + size_t(entry) * kEntryBytes;
        for (TensorView* v : {&to.gate, &to.up, &to.down}) {
            v->data = at;
            at += expert_entry_piece(*v);
        }
        return to;
    }
    bool expert_entry_ready(uint32_t entry) override { return landed[entry] != 0; }
    void wait_expert_loads() override { land_all(); }
    void land_all() { landed.assign(landed.size(), 1); }
    // The entry the view points into.
    size_t entry_of(const ExpertView* v) const {
        return size_t(v->gate.data - memory.data()) / kEntryBytes;
    }

    struct Copy {
        uint32_t entry;
        const std::byte* from;  // the host gate: says which expert it was
    };
    std::vector<Copy> copies;
    std::vector<std::byte> memory;
    std::vector<char> landed;
};

// A host expert per (layer, expert), one F32 row per matrix of 64 values (256 bytes, one
// aligned piece each), its gate at a distinct address.
class HostExperts {
  public:
    HostExperts() : bytes_(size_t(kLayers * kExperts) * 256) {}
    ExpertView view(int layer, int expert) const {
        TensorView t;
        t.type = TensorType::F32;
        t.ne = {64, 1, 1, 1};
        t.row_bytes = 256;
        t.data = bytes_.data() + size_t(layer * kExperts + expert) * 256;
        ExpertView ev;
        ev.gate = ev.up = ev.down = t;
        return ev;
    }
    const std::byte* gate_of(int layer, int expert) const { return view(layer, expert).gate.data; }

  private:
    std::vector<std::byte> bytes_;
};

struct Level {
    RecordingEntries memory;
    HostExperts host;
    VramExpertStats stats;
    std::unique_ptr<VramExpertCache> cache;
    std::vector<const ExpertView*> views;

    Level(uint32_t entries, uint32_t prefetch) {
        auto c = VramExpertCache::create(memory, kLayers, kExperts, entries, kEntryBytes, prefetch,
                                         stats);
        EXPECT_TRUE(c) << (c ? "" : c.error().message);
        if (c) cache = std::move(*c);
    }
    size_t route(int layer, std::vector<int> experts) {
        return cache->route(layer, experts, views);
    }
    bool offer(int layer, int expert) {
        auto r = cache->offer(layer, expert, host.view(layer, expert));
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r && *r;
    }
    bool prefetch(int layer, int expert) {
        auto r = cache->prefetch(layer, expert, host.view(layer, expert));
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r && *r;
    }
};

TEST(VramExpertCache, LoadsWhatIsChosenOftenAndServesItOnlyOnceLanded) {
    Level l(4, 0);
    ASSERT_TRUE(l.cache);
    EXPECT_EQ(l.cache->prefetch_entries(), 0u);
    EXPECT_EQ(l.route(0, {3}), 0u);
    EXPECT_FALSE(l.offer(0, 3));  // chosen once: not yet
    EXPECT_EQ(l.route(0, {3}), 0u);
    EXPECT_TRUE(l.offer(0, 3));  // twice: into a free entry
    ASSERT_EQ(l.memory.copies.size(), 1u);
    EXPECT_EQ(l.memory.copies[0].from, l.host.gate_of(0, 3));
    EXPECT_FALSE(l.offer(0, 3));        // it has an entry now
    EXPECT_EQ(l.route(0, {3, 5}), 0u);  // still loading: not served
    l.memory.land_all();
    EXPECT_EQ(l.route(0, {5, 3}), 1u);
    ASSERT_EQ(l.views.size(), 2u);
    EXPECT_EQ(l.views[0], nullptr);
    ASSERT_NE(l.views[1], nullptr);
    EXPECT_EQ(l.memory.entry_of(l.views[1]), l.memory.copies[0].entry);
    EXPECT_EQ(l.stats.requests, 6u);
    EXPECT_EQ(l.stats.hits, 1u);
    EXPECT_EQ(l.stats.loads, 1u);
    EXPECT_EQ(l.stats.load_bytes, kEntryBytes);
}

TEST(VramExpertCache, AFullLevelTakesOnlyWhatIsChosenMoreOftenThanItsVictim) {
    Level l(2, 0);
    ASSERT_TRUE(l.cache);
    for (int i = 0; i < 3; ++i) l.route(1, {0, 1});
    EXPECT_TRUE(l.offer(1, 0));
    EXPECT_TRUE(l.offer(1, 1));
    l.memory.land_all();
    for (int i = 0; i < 2; ++i) l.route(1, {0, 2});  // 2 chosen less often than 1 so far
    EXPECT_FALSE(l.offer(1, 2));
    l.route(1, {0, 2});
    l.route(1, {0, 2});  // now 2 was chosen more often than 1
    EXPECT_TRUE(l.offer(1, 2));
    ASSERT_EQ(l.memory.copies.size(), 3u);
    const uint32_t of_one = l.memory.copies[1].entry;
    EXPECT_EQ(l.memory.copies[2].entry, of_one);  // 1's entry, not 0's (served this route)
    l.memory.land_all();
    EXPECT_EQ(l.route(1, {0, 1, 2}), 2u);
    EXPECT_EQ(l.views[1], nullptr);
}

TEST(VramExpertCache, BoundsTheLoadsOfALayerAndInFlight) {
    Level l(64, 0);
    ASSERT_TRUE(l.cache);
    std::vector<int> all(kExperts);
    for (int e = 0; e < kExperts; ++e) all[size_t(e)] = e;
    for (int layer = 0; layer < kLayers; ++layer) {
        l.route(layer, all);
        l.route(layer, all);
    }
    size_t started = 0;
    for (int layer = 0; layer < kLayers; ++layer) {
        l.route(layer, all);
        size_t this_layer = 0;
        for (int e = 0; e < kExperts; ++e) this_layer += l.offer(layer, e);
        EXPECT_LE(this_layer, kMaxLoadsPerLayer);
        started += this_layer;
    }
    EXPECT_EQ(started, size_t(kMaxLoadsPerLayer) * kLayers);
    // Nothing lands: the in-flight bound stops the loads however many layers go by.
    for (int round = 0; round < 20; ++round) {
        for (int layer = 0; layer < kLayers; ++layer) {
            l.route(layer, all);
            for (int e = 0; e < kExperts; ++e) l.offer(layer, e);
        }
    }
    EXPECT_EQ(l.memory.copies.size(), size_t(kMaxLoadsInFlight));
}

TEST(VramExpertCache, GuessesGoToTheRingAndServeWhenChosen) {
    Level l(16, 2);  // 8 for the policy, a ring of 2 layers x 2 guesses
    ASSERT_TRUE(l.cache);
    EXPECT_EQ(l.cache->prefetch_entries(), 4u);
    EXPECT_EQ(Level(7, 2).cache->prefetch_entries(), 0u);  // too small to spare a ring
    l.route(0, {1, 2});
    ASSERT_TRUE(l.cache->prefetch_wanted());
    EXPECT_TRUE(l.prefetch(1, 7));
    EXPECT_TRUE(l.prefetch(1, 8));
    EXPECT_FALSE(l.prefetch(1, 9));  // two a layer
    ASSERT_EQ(l.memory.copies.size(), 2u);
    for (const RecordingEntries::Copy& c : l.memory.copies) EXPECT_GE(c.entry, 12u);  // the ring
    l.memory.land_all();
    EXPECT_EQ(l.route(1, {7, 3}), 1u);  // 7 guessed right, 8 wrong
    ASSERT_NE(l.views[0], nullptr);
    EXPECT_EQ(l.memory.entry_of(l.views[0]), l.memory.copies[0].entry);
    EXPECT_EQ(l.stats.prefetches, 2u);
    EXPECT_EQ(l.stats.prefetch_hits, 1u);
    EXPECT_EQ(l.stats.prefetch_bytes, 2 * kEntryBytes);
    // A guess still loading does not serve.
    ASSERT_TRUE(l.cache->prefetch_wanted());
    EXPECT_TRUE(l.prefetch(2, 4));
    EXPECT_EQ(l.route(2, {4}), 0u);
}

TEST(VramExpertCache, AServedGuessJoinsThePolicysPartWithoutACopy) {
    Level l(8, 1);  // 6 for the policy, a ring of 2
    ASSERT_TRUE(l.cache);
    ASSERT_EQ(l.cache->prefetch_entries(), 2u);
    l.route(0, {0});
    ASSERT_TRUE(l.cache->prefetch_wanted());
    ASSERT_TRUE(l.prefetch(1, 5));
    const uint32_t entry = l.memory.copies.back().entry;
    l.memory.land_all();
    EXPECT_EQ(l.route(1, {5}), 1u);  // served; the policy's part had an empty entry to give
    // Guesses for the next layers cycle through the ring; 5's entry is no longer in it.
    for (int round = 0; round < 4; ++round) {
        l.route(2, {0});
        ASSERT_TRUE(l.cache->prefetch_wanted());
        ASSERT_TRUE(l.prefetch(3, 10 + round));
        l.memory.land_all();
        EXPECT_EQ(l.route(3, {10 + round}), 1u);
    }
    for (size_t i = 1; i < l.memory.copies.size(); ++i) EXPECT_NE(l.memory.copies[i].entry, entry);
    EXPECT_EQ(l.route(1, {5}), 1u);
    EXPECT_EQ(l.memory.entry_of(l.views[0]), entry);
}

TEST(VramExpertCache, WrongGuessesStopTheGuessingButForProbes) {
    Level l(16, 2);
    ASSERT_TRUE(l.cache);
    int layer = 0;
    int wanted = 0, asked = 0;
    for (int step = 0; step < 200; ++step) {
        l.route(layer, {0});
        const int next = (layer + 1) % kLayers;
        ++asked;
        if (l.cache->prefetch_wanted()) {
            ++wanted;
            l.prefetch(next, 14);  // never chosen
            l.prefetch(next, 15);
        }
        l.memory.land_all();
        layer = next;
    }
    // The first few judged guesses let it run; then one layer in kVramPrefetchProbeEvery.
    EXPECT_LT(wanted, 20 + asked / int(kVramPrefetchProbeEvery));
    EXPECT_GT(wanted, asked / int(kVramPrefetchProbeEvery) / 2);
    EXPECT_EQ(l.stats.prefetch_hits, 0u);
}

}  // namespace
}  // namespace strata
