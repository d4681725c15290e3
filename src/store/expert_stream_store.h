// The expert-stream store: every tensor resident except the routed experts, whose slices (one
// expert's gate, up and down rows inside the fused `_exps` tensors) are read from the model file
// with direct I/O when the router picks them, into an expert cache of fixed-size entries.
//
// How a layer goes:
//  1. The engine routes the batch and calls prepare_experts(layer, choices): the store counts the
//     routing (co-activation statistics, expert frequencies), pins the chosen experts that are
//     cached, and submits reads for the union of the missing ones at once (many in flight), each
//     into an entry evicted by the cache policy. A prompt batch thus reads every selected expert
//     of a layer once.
//  2. acquire_expert(layer, e) waits for e's reads (a hit when they were done already) and hands
//     out views into its entry; release_expert unpins it.
//  3. Speculation for the next layer, after the demand reads are submitted: the experts that the
//     engine's early guess (the next layer's router applied to the current hidden state, through
//     hint_experts) and the co-activation statistics (which experts of layer L+1 followed the
//     ones chosen in layer L, counted once per token) name, at most `prefetch_limit` reads in
//     flight, into entries that hold nothing pinned. A wrong guess costs bandwidth only — and
//     when decoding is bound by the disk, bandwidth is the whole cost: a right guess saves only
//     the overlap with the (short) compute of one layer, a wrong one costs a whole read and may
//     evict an expert that would have hit. So speculation runs only while its guesses prove
//     right at least kMinPrefetchAccuracy of the time (a decaying count of guesses used and
//     wasted); below that one guess in kProbeEvery layers keeps measuring.
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
#include <tuple>
#include <vector>

#include "io/aligned_buffer.h"
#include "io/direct_reader.h"
#include "model/model_info.h"
#include "plan/plan.h"
#include "store/coactivation.h"
#include "store/expert_cache_policy.h"
#include "store/resident_store.h"
#include "store/tensor_views.h"
#include "store/weight_store.h"
#include "util/counter_fields.h"

namespace strata {

inline constexpr double kMinPrefetchAccuracy = 0.9;
inline constexpr uint32_t kProbeEvery = 32;

struct ExpertStreamConfig {
    uint64_t cache_entries = 0;  // experts the cache holds (all layers together); >= 2
    CachePolicy policy = CachePolicy::Lru;
    bool prefetch = true;
    uint32_t prefetch_limit = 0;  // speculative reads in flight at most; 0: n_expert_used
    std::string stats_path;       // co-activation statistics kept here; empty: not kept
    bool warm = true;             // fill the cache at open with the experts the statistics favour
};

// Per layer and for the whole run.
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

class ExpertStreamStore final : public WeightStore {
  public:
    static Result<std::unique_ptr<ExpertStreamStore>> open(const ModelInfo& info,
                                                           const ExpertStreamConfig& config,
                                                           const ResidentLoadOptions& options = {});
    ~ExpertStreamStore() override;

    const LayerView& globals() const override { return views_.globals; }
    Result<const LayerView*> acquire_layer(int layer) override;
    void release_layer(int) override {}
    Result<ExpertView> acquire_expert(int layer, int expert) override;
    void release_expert(int layer, int expert) override;
    void prepare_experts(int layer, std::span<const int32_t> choices, int k) override;
    const TensorView* early_router(int layer) const override;
    void hint_experts(int layer, std::span<const int32_t> experts) override;
    const StoreStats& stats() const override { return stats_; }
    void reset_stats() override;
    std::string mode_name() const override { return "expert-stream"; }

    const ExpertStreamStats& totals() const { return total_; }
    const std::vector<ExpertStreamStats>& layer_stats() const { return per_layer_; }
    uint64_t resident_bytes() const { return resident_bytes_; }
    uint64_t entry_bytes() const { return entry_bytes_; }
    size_t entries() const { return entries_.size(); }
    const CoactivationStats& coactivation() const { return coact_; }
    // Writes the statistics to config.stats_path now (also done on destruction).
    Result<void> save_statistics() const;
    // Warnings from open (statistics file ignored, ...), for the caller to show.
    const std::vector<std::string>& warnings() const { return warnings_; }

    // Records every batch's union of keys (layer * n_expert + expert) from now on: the routing
    // trace simulate_hit_rate replays, and the input of the cache-policy benchmark.
    void record_trace() { tracing_ = true; }
    const std::vector<std::vector<uint32_t>>& trace() const { return trace_; }

    // Test hook: fills entry `i`'s buffer with garbage and clears its readiness, as a stale or
    // mispredicted slot would be, without telling the map.
    void poison_entry_for_test(size_t i);

  private:
    struct Piece {  // one of an expert's three matrices, as found in the file
        size_t tensor;
        TensorRole role;
        uint64_t base;         // offset of expert 0's slice (or of the per-expert tensor)
        uint64_t slice_bytes;  // bytes per expert
        bool fused;
        std::vector<uint64_t> per_expert;  // old layout: file offset per expert; empty if fused
        size_t entry_offset;               // where its widened read lands in an entry
    };
    struct Entry {
        int layer = -1, expert = -1;
        std::vector<uint64_t> pending;  // tags not yet waited for
        std::vector<size_t> slice;      // per piece: where its bytes start in its widened read
        bool held = false;              // in the current batch's union, or acquired: not evictable
        bool fresh_demand = false;      // read for the demand of the current batch: a miss
        bool speculative = false;       // read by prefetch and not acquired yet
        bool valid = false;             // every read completed

        // Empty again, keeping the vectors' memory (a decode step allocates nothing).
        void reset() {
            layer = expert = -1;
            pending.clear();
            slice.clear();
            held = fresh_demand = speculative = valid = false;
        }
    };

    ExpertStreamStore() = default;
    Result<void> layout(const ModelInfo& info);
    int find(int layer, int expert) const;
    Result<size_t> claim_entry(int layer);
    Result<void> start_reads(size_t entry, int layer, int expert, bool speculative);
    Result<void> finish_reads(size_t entry);
    void prefetch(int layer, std::span<const int32_t> candidates);
    void note_guess(bool used);
    void warm_up();
    uint64_t expert_offset(const Piece& p, int expert) const;

    ExpertStreamConfig config_;
    int n_layer_ = 0, n_expert_ = 0, n_used_ = 0;
    std::vector<TensorInfo> tensor_infos_;
    AlignedBuffer resident_;
    BoundViews views_;
    uint64_t resident_bytes_ = 0;
    std::vector<std::vector<Piece>> pieces_;  // per layer: gate, up, down (empty: dense layer)
    size_t entry_bytes_ = 0;
    AlignedBuffer pool_;
    std::vector<Entry> entries_;
    std::vector<int32_t> where_;  // layer * n_expert + expert -> entry, or -1
    ExpertCachePolicy policy_;
    std::vector<size_t> candidates_, key_of_;  // claim_entry's scratch
    CoactivationStats coact_;
    uint64_t identity_ = 0;
    std::vector<int32_t> hinted_;  // the engine's early guess for the next layer
    // prepare_experts' scratch, kept so that a decode step allocates nothing
    std::vector<char> in_union_;
    std::vector<int32_t> prefetch_candidates_;
    CoactivationStats::Prediction predicted_;
    int hinted_layer_ = -1;
    uint32_t speculative_in_flight_ = 0;
    double guesses_used_ = 0, guesses_wasted_ = 0;  // decaying counts (prefetch accuracy)
    uint64_t prepares_ = 0;
    std::unique_ptr<DirectReader> reader_;
    uint64_t next_tag_ = 1;
    StoreStats stats_;
    ExpertStreamStats total_;
    std::vector<ExpertStreamStats> per_layer_;
    std::vector<std::string> warnings_;
    bool tracing_ = false;
    std::vector<std::vector<uint32_t>> trace_;
};

// The store configuration an expert-stream plan asks for: the cache holds the plan's expert
// cache and its slots, in whole experts.
ExpertStreamConfig expert_stream_config(const Plan& plan);

}  // namespace strata
