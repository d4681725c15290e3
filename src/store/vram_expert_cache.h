// The GPU level of the expert cache: VRAM in front of RAM (the host arena, or the expert cache's
// entries read from disk) in front of NVMe.
//
// A plan that keeps routed experts in RAM for the CPU beside a GPU gives what GPU memory is left
// to this level (GpuMemoryPlan::expert_cache): entries of one expert each. After the engine routes
// a batch in such a layer, the chosen experts that have an entry here are computed by the GPU
// while the CPU computes the rest, and the two partial sums are added on the GPU. So every hit
// takes its weights' bytes off the CPU's memory bus (and, for experts read from disk, off the
// disk), and the CPU's share of the step shrinks by the hit rate.
//
// What gets an entry is decided by the same policy machinery as the RAM level
// (store/expert_cache_policy.h), in LFU mode: every batch's choices count towards their
// (layer, expert) frequencies, aged so that they follow what the router does lately; an expert
// that missed here is offered, and loaded when an entry is free or its frequency beats that of
// the entry the policy would evict (and it was chosen at least kMinLoadFrequency times). Loads are
// copies from host memory on the GPU's copy engine, beside compute
// (ExpertEntryMemory::load_expert_entry); an entry serves once its copy has landed, never waited
// for on the decode path. At most kMaxLoadsPerLayer loads start per layer and kMaxLoadsInFlight are
// in flight, so the bus is never flooded: a new expert takes some tokens to earn its place, as a
// popular one keeps it.
//
// Prefetch (Tuning::gpu_expert_prefetch guesses a layer, backend/tuning.h: 4 unless asked
// otherwise): a few entries (two layers' worth of guesses) stand apart from the policy's as
// a ring. While layer L computes, the engine guesses the experts layer L+1 will choose (its router
// applied to L's input, then the co-activation statistics: experts of L+1 that followed L's
// choices) and prefetch() copies those the level lacks into the ring's next entries. When L+1
// chooses one and its copy has landed, the GPU computes it, as a hit; an expert served so that is
// chosen more often than the policy's victim moves into the policy's part (the two entries swap
// roles: no copy). A wrong or late guess costs bus and RAM bandwidth only, never the CPU's work
// nor a popular entry; guesses run only while at least kMinVramPrefetchAccuracy of them serve (a
// decaying count; below it one layer in kVramPrefetchProbeEvery keeps measuring). The host's part
// costs the step little: the guess is computed in one pass with the layer's own router, and the
// copies are queued by the calling thread while the CPU's workers start on the layer's experts
// (the `beside` work of Backend::experts).
// Measured on a 16-core host beside an H100 (Qwen3-30B-A3B shape, the level's default room),
// 4 guesses a layer served 64% of the time and raised its hit rate from 10% to 40%.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "model/expert_entry_memory.h"
#include "store/expert_cache_policy.h"
#include "store/store_report.h"
#include "util/result.h"

namespace strata {

inline constexpr uint32_t kMaxLoadsPerLayer = 2;
inline constexpr uint32_t kMaxLoadsInFlight = 16;
// An expert chosen fewer times than this lately is not loaded, even into a free entry: once is
// what most experts are chosen, and loading each would fill the bus with copies that rarely pay.
inline constexpr uint32_t kMinLoadFrequency = 2;
inline constexpr double kMinVramPrefetchAccuracy = 0.4;
inline constexpr uint32_t kVramPrefetchProbeEvery = 32;

class VramExpertCache {
  public:
    // `entries` entries of `entry_bytes` (at least expert_entry_bytes of every expert it will be
    // offered) in `memory` (a GPU backend's), for a model of n_layer x n_expert routed experts; up
    // to `prefetch_per_layer` guesses a layer (0: none) in a ring of twice that many entries, when
    // that leaves the policy at least as many. What it does is counted into `stats`.
    static Result<std::unique_ptr<VramExpertCache>> create(ExpertEntryMemory& memory, int n_layer,
                                                           int n_expert, uint32_t entries,
                                                           uint64_t entry_bytes,
                                                           uint32_t prefetch_per_layer,
                                                           VramExpertStats& stats);

    uint32_t entries() const { return uint32_t(key_of_.size()); }
    uint64_t entry_bytes() const { return entry_bytes_; }
    uint32_t prefetch_entries() const { return uint32_t(ring_.size()); }

    // A batch of `layer` chose `experts` (each once): counts them, and returns the view of each
    // one this level serves now (ready), null for the others; the number served.
    size_t route(int layer, std::span<const int> experts, std::vector<const ExpertView*>& views);
    // An expert the level did not serve (of the layer just routed), in host memory at `host`
    // (unchanged until the copy lands, see ExpertEntryMemory::load_expert_entry): loaded when the
    // policy takes it and the limits allow. True when a load started. Call it only once the GPU's
    // work of the layer routed last is queued: the entry it takes may be one that work reads.
    Result<bool> offer(int layer, int expert, const ExpertView& host);

    // Whether to guess the next layer's experts now (asked once a layer, before its prefetch()
    // calls, which it allows: a probe is counted).
    bool prefetch_wanted();
    // A guess that `layer` (the next) will choose `expert`, in host memory at `host` (unchanged
    // until the copy lands): copied into the ring unless the level has it or the layer's
    // guesses or the loads in flight are at their limits. True when a copy started. The same
    // rule as offer(): only once the GPU's work of the layer routed last is queued.
    Result<bool> prefetch(int layer, int expert, const ExpertView& host);

  private:
    VramExpertCache(ExpertEntryMemory& memory, VramExpertStats& stats)
        : memory_(memory), stats_(stats) {}
    size_t key(int layer, int expert) const {
        return size_t(layer) * size_t(n_expert_) + size_t(expert);
    }
    int layer_of(size_t key) const { return int(key / size_t(n_expert_)); }
    // Entries whose copies have landed become ready; the count of those still loading shrinks.
    void collect_landed();
    // Room for one more copy: fewer than kMaxLoadsInFlight still loading.
    bool copy_room();
    // The entry the policy evicts next among its own that are neither loading nor served by the
    // last route(), SIZE_MAX when none: found once, kept until an entry lands, loads or changes
    // part, or the next route() (offers of a layer mostly ask the same question).
    size_t policy_victim();
    // `entry` forgets its expert and takes `host`'s for `k`, loading.
    Result<void> load(size_t entry, size_t k, const ExpertView& host);
    // After a route: the ring's entries it served join the policy's part when their expert beats
    // the policy's victim (never one this route served), and the guesses for `layer` that did not
    // serve count as wasted.
    void settle_guesses(int layer);
    void judge(bool used);

    ExpertEntryMemory& memory_;
    VramExpertStats& stats_;
    int n_layer_ = 0, n_expert_ = 0;
    uint64_t entry_bytes_ = 0;
    ExpertCachePolicy policy_;
    std::vector<size_t> key_of_;       // per entry: its key, SIZE_MAX when empty
    std::vector<int32_t> entry_of_;    // per key: its entry, or -1
    std::vector<ExpertView> views_;    // per entry
    std::vector<char> loading_;        // per entry: its copy not yet seen landed
    std::vector<uint32_t> in_flight_;  // entries loading
    std::vector<size_t> candidates_;   // policy_victim()'s scratch
    size_t victim_ = SIZE_MAX;
    bool victim_known_ = false;
    uint32_t loads_this_layer_ = 0;  // since the last route()
    // Prefetch: the ring's entries in the order they are reused; per entry its place there or
    // -1 (a policy entry), whether it holds a guess not yet judged, and whether the last route()
    // served it.
    std::vector<uint32_t> ring_;
    std::vector<int32_t> ring_place_;
    std::vector<char> guess_, served_;
    // The entries the last route() served, and those of them in the ring.
    std::vector<uint32_t> served_list_, served_ring_;
    size_t ring_next_ = 0;
    uint32_t per_layer_ = 0, allowed_ = 0, prefetched_ = 0;  // this layer's guesses: allowed, made
    double used_ = 0, wasted_ = 0;                           // decaying counts of judged guesses
    uint64_t asked_ = 0;                                     // prefetch_wanted() calls
};

}  // namespace strata
