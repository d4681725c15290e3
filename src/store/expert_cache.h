// The expert cache: routed experts whose slices (one expert's gate, up and down rows inside the
// fused `_exps` tensors) a plan streams expert by expert are read from the model file with direct
// I/O when the router picks them, into a cache of fixed-size entries. It is the part of the store
// that serves those experts (store/model_store.h); the rest of the model is elsewhere.
//
// How a layer goes:
//  1. The engine routes the batch and hands it to the store (WeightStore::route_experts), which
//     calls prepare(layer, choices): the cache counts the chosen experts' frequencies, pins the
//     chosen experts that are cached, and submits reads for the union of the missing ones at
//     once (many in flight), each into an entry evicted by the cache policy. A prompt batch thus
//     reads every selected expert of a layer once.
//  2. acquire(layer, e) waits for e's reads (a hit when they were done already) and hands
//     out views into its entry; release unpins it.
//  3. Speculation for the next layer, after the demand reads are submitted: the store's guesses
//     for it (prefetch(layer + 1, candidates): the engine's early guess, the next layer's router
//     applied to the current hidden state, and the experts the co-activation statistics say
//     followed the ones chosen in layer L), at most `prefetch_limit` reads in flight, into entries
//     that hold nothing pinned. A wrong guess costs bandwidth only — and when decoding is bound by
//     the disk, bandwidth is the whole cost: a right guess saves only the overlap with the (short)
//     compute of one layer, a wrong one costs a whole read and may evict an expert that would have
//     hit. So speculation runs only while its guesses prove right at least kMinPrefetchAccuracy of
//     the time (a decaying count of guesses used and wasted); below that one guess in kProbeEvery
//     layers keeps measuring.
//
// Never computed with: an entry whose reads have not all completed (acquire waits for them), an
// entry whose read failed (it is emptied and the error returned), or an entry that was evicted
// and reused (the (layer, expert) -> entry map is cleared before reuse, and pinned entries are
// never evicted). The cache holds `cache_entries` experts; when every entry is pinned a demand
// read fails with an error instead of overwriting one in use.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/aligned_buffer.h"
#include "model/model_info.h"
#include "model/tensor_view.h"
#include "store/coactivation.h"
#include "store/expert_cache_policy.h"
#include "store/read_set.h"
#include "store/store_report.h"

namespace strata {

inline constexpr double kMinPrefetchAccuracy = 0.9;
inline constexpr uint32_t kProbeEvery = 32;

struct ExpertCacheConfig {
    uint64_t cache_entries = 0;  // experts the cache holds (all layers together); >= 2
    CachePolicy policy = CachePolicy::Lru;
    bool prefetch = true;
    uint32_t prefetch_limit = 0;  // speculative reads in flight at most; 0: n_expert_used
    std::string stats_path;       // the store's routing statistics kept here; empty: not kept
    bool warm = true;             // fill the cache at open with the experts the statistics favour
};

class ExpertCache {
  public:
    // `groups[layer]`: the routed-expert tensors (indices in info.tensors) of that layer the cache
    // serves; empty for a layer whose experts are elsewhere. `reader` and `store_stats` belong
    // to the store and outlive the cache; so do `routing`, the store's routing statistics, which
    // config.warm fills the cache from.
    static Result<std::unique_ptr<ExpertCache>> create(
        const ModelInfo& info, const std::vector<std::vector<size_t>>& groups,
        const ExpertCacheConfig& config, StreamReader& reader, StoreStats& store_stats,
        const CoactivationStats& routing);
    ~ExpertCache();
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    bool serves(int layer) const {
        return layer >= 0 && layer < n_layer_ && !pieces_[size_t(layer)].empty();
    }
    bool prefetching() const { return config_.prefetch; }

    Result<ExpertView> acquire(int layer, int expert);
    void release(int layer, int expert);
    // `elsewhere` (empty, or n_expert flags): experts counted but not read (served elsewhere).
    void prepare(int layer, std::span<const int32_t> choices, std::span<const char> elsewhere = {});
    // Guesses of the experts `layer` (the next) will choose, best first: read ahead as far as
    // the accuracy of earlier guesses and the reads in flight allow (step 3 above).
    void prefetch(int layer, std::span<const int32_t> candidates);
    void reset_stats();

    const ExpertStreamStats& totals() const { return total_; }
    const std::vector<ExpertStreamStats>& layer_stats() const { return per_layer_; }
    uint64_t entry_bytes() const { return entry_bytes_; }
    size_t entries() const { return entries_.size(); }

    // Records every batch's union of keys (layer * n_expert + expert) from now on: the routing
    // trace simulate_hit_rate replays, and the input of the cache-policy benchmark.
    void record_trace() { tracing_ = true; }
    const std::vector<std::vector<uint32_t>>& trace() const { return trace_; }

    // Test hook: fills entry `i`'s buffer with garbage and clears its readiness, as a stale or
    // mispredicted slot would be, without telling the map.
    void poison_entry_for_test(size_t i);

  private:
    struct Piece {  // one of an expert's three matrices, as found in the file
        TensorInfo info;
        TensorRole role;
        uint64_t base;         // offset of expert 0's slice (or of the per-expert tensor)
        uint64_t slice_bytes;  // bytes per expert
        bool fused;
        std::vector<uint64_t> per_expert;  // old layout: file offset per expert; empty if fused
        size_t entry_offset;               // where its widened read lands in an entry
    };
    struct Entry {
        int layer = -1, expert = -1;
        ReadSet reads;              // reads not yet waited for
        std::vector<size_t> slice;  // per piece: where its bytes start in its widened read
        bool held = false;          // in the current batch's union, or acquired: not evictable
        bool fresh_demand = false;  // read for the demand of the current batch: a miss
        bool speculative = false;   // read by prefetch and not acquired yet
        bool valid = false;         // every read completed

        // Empty again, keeping the vectors' memory (a decode step allocates nothing).
        void reset() {
            layer = expert = -1;
            reads.forget();
            slice.clear();
            held = fresh_demand = speculative = valid = false;
        }
    };

    ExpertCache(StreamReader& reader, StoreStats& store_stats)
        : reader_(reader), store_stats_(store_stats) {}
    Result<void> layout(const ModelInfo& info, const std::vector<std::vector<size_t>>& groups);
    int find(int layer, int expert) const;
    Result<size_t> claim_entry(int layer);
    Result<void> start_reads(size_t entry, int layer, int expert, bool speculative);
    Result<void> finish_reads(size_t entry);
    void note_guess(bool used);
    void warm_up(const CoactivationStats& routing);
    uint64_t expert_offset(const Piece& p, int expert) const;

    StreamReader& reader_;
    StoreStats& store_stats_;
    ExpertCacheConfig config_;
    int n_layer_ = 0, n_expert_ = 0, n_used_ = 0;
    std::vector<std::vector<Piece>> pieces_;  // per layer: gate, up, down (empty: not served)
    size_t entry_bytes_ = 0;
    AlignedBuffer pool_;
    std::vector<Entry> entries_;
    std::vector<int32_t> where_;  // layer * n_expert + expert -> entry, or -1
    ExpertCachePolicy policy_;
    std::vector<size_t> candidates_, key_of_;  // claim_entry's scratch
    std::vector<char> in_union_;  // prepare's scratch, kept: a decode step allocates nothing
    uint32_t speculative_in_flight_ = 0;
    double guesses_used_ = 0, guesses_wasted_ = 0;  // decaying counts (prefetch accuracy)
    uint64_t prepares_ = 0;
    ExpertStreamStats total_;
    std::vector<ExpertStreamStats> per_layer_;
    bool tracing_ = false;
    std::vector<std::vector<uint32_t>> trace_;
};

}  // namespace strata
