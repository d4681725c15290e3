// What a store tells the front ends about its work: bytes served and read, time the engine
// waited, and the figures of the machinery a plan configured (slot ring, expert cache). `run`,
// `bench` and `serve` print it through WeightStore::report(), whatever the store's set-up.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "util/counter_fields.h"

namespace strata {

// Bytes the store moved to serve the engine, for run summaries and benchmarks.
struct StoreStats {
    uint64_t bytes_served = 0;     // weight bytes handed to the engine (resident or not)
    uint64_t bytes_from_disk = 0;  // of which read from the model file during the run
    double stall_seconds = 0;      // time the engine waited for the store
};

// The slot ring (layers streamed whole groups at a time).
struct SlotStats {
    uint64_t layer_loads = 0;                 // streamed layers asked for
    uint64_t hits = 0;                        // found in a slot, already read
    uint64_t waits = 0;                       // found in flight: waited for the rest of the read
    uint64_t misses = 0;                      // read on demand
    std::vector<double> layer_stall_seconds;  // per layer: time the engine waited for its group
};

// The expert cache, per layer and for the whole run.
struct ExpertStreamStats {
    uint64_t requests = 0;          // experts acquired
    uint64_t hits = 0;              // ready in the cache (read earlier, or prefetched and arrived)
    uint64_t waits = 0;             // in flight when asked for (prefetched or read for this layer)
    uint64_t misses = 0;            // read on demand
    uint64_t prefetches = 0;        // speculative reads issued
    uint64_t prefetch_used = 0;     // of which acquired before eviction
    uint64_t prefetch_skipped = 0;  // layers where speculation was held back (low accuracy)
    uint64_t bytes_requested = 0;   // bytes of the experts acquired (what reading every selected
                                    // expert from disk every time would cost)
    uint64_t bytes_from_disk = 0;
    uint64_t prefetch_bytes = 0;  // of bytes_from_disk, speculative
    double stall_seconds = 0;

    // Every field above, once: the arithmetic goes over this list (util/counter_fields.h), and
    // the build fails when a field is missing from it.
    static constexpr auto fields() {
        using S = ExpertStreamStats;
        return std::make_tuple(&S::requests, &S::hits, &S::waits, &S::misses, &S::prefetches,
                               &S::prefetch_used, &S::prefetch_skipped, &S::bytes_requested,
                               &S::bytes_from_disk, &S::prefetch_bytes, &S::stall_seconds);
    }
    ExpertStreamStats& operator+=(const ExpertStreamStats& o) { return add_fields(*this, o); }
    // What happened since `o`.
    ExpertStreamStats operator-(const ExpertStreamStats& o) const {
        return subtract_fields(*this, o);
    }
};
static_assert(lists_every_field<ExpertStreamStats>());

// What the GPU level of the expert cache did (store/vram_expert_cache.h): chosen experts (once per
// batch and layer) it was asked for, those it had (computed by the GPU), loads into it by the
// policy and their bytes, guesses copied ahead and their bytes, and of the hits those a guess
// brought.
struct VramExpertStats {
    uint64_t requests = 0;
    uint64_t hits = 0;
    uint64_t loads = 0;
    uint64_t load_bytes = 0;
    uint64_t prefetches = 0;
    uint64_t prefetch_bytes = 0;
    uint64_t prefetch_hits = 0;
    static constexpr auto fields() {
        using S = VramExpertStats;
        return std::make_tuple(&S::requests, &S::hits, &S::loads, &S::load_bytes, &S::prefetches,
                               &S::prefetch_bytes, &S::prefetch_hits);
    }
    VramExpertStats& operator+=(const VramExpertStats& o) { return add_fields(*this, o); }
    VramExpertStats operator-(const VramExpertStats& o) const { return subtract_fields(*this, o); }
};
static_assert(lists_every_field<VramExpertStats>());

struct StoreReport {
    std::string mode;             // "resident", "mmap", "ffn-stream", "expert-stream"
    uint64_t resident_bytes = 0;  // weight bytes held in memory for the whole run
    double load_seconds = 0;
    StoreStats totals;

    int slots = 0;  // the slot ring; 0: none
    uint64_t slot_bytes = 0;
    SlotStats slot_stats;

    uint64_t cache_entries = 0;  // the expert cache; 0: none
    uint64_t entry_bytes = 0;
    ExpertStreamStats experts;
    std::vector<ExpertStreamStats> expert_layers;

    uint32_t gpu_expert_entries = 0;  // the GPU level in front of it; 0: none
    VramExpertStats gpu_experts;

    std::vector<std::string> warnings;  // from open (statistics file ignored, ...)
};

}  // namespace strata
