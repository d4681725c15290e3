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
// copies from host memory on the GPU's copy engine, beside compute (Backend::load_expert_entry); an
// entry serves once its copy has landed, never waited for on the decode path. At most
// kMaxLoadsPerLayer loads start per layer and kMaxLoadsInFlight are in flight, so the bus is never
// flooded: a new expert takes some tokens to earn its place, as a popular one keeps it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "store/expert_cache_policy.h"
#include "util/counter_fields.h"
#include "util/result.h"

namespace strata::engine {

inline constexpr uint32_t kMaxLoadsPerLayer = 2;
inline constexpr uint32_t kMaxLoadsInFlight = 16;
// An expert chosen fewer times than this lately is not loaded, even into a free entry: once is
// what most experts are chosen, and loading each would fill the bus with copies that rarely pay.
inline constexpr uint32_t kMinLoadFrequency = 2;

// What the level did (EngineStats): chosen experts (once per batch and layer) it was asked for,
// those it had (computed by the GPU), loads into it and their bytes.
struct VramExpertStats {
    uint64_t requests = 0;
    uint64_t hits = 0;
    uint64_t loads = 0;
    uint64_t load_bytes = 0;
    static constexpr auto fields() {
        using S = VramExpertStats;
        return std::make_tuple(&S::requests, &S::hits, &S::loads, &S::load_bytes);
    }
    VramExpertStats& operator+=(const VramExpertStats& o) { return add_fields(*this, o); }
    VramExpertStats operator-(const VramExpertStats& o) const { return subtract_fields(*this, o); }
};
static_assert(lists_every_field<VramExpertStats>());

class VramExpertCache {
  public:
    // `entries` entries of `entry_bytes` (at least expert_entry_bytes of every expert it will be
    // offered) in `gpu`'s memory, for a model of n_layer x n_expert routed experts.
    static Result<std::unique_ptr<VramExpertCache>> create(Backend& gpu, int n_layer, int n_expert,
                                                           uint32_t entries, uint64_t entry_bytes);

    Backend& gpu() const { return gpu_; }
    uint32_t entries() const { return uint32_t(key_of_.size()); }
    uint64_t entry_bytes() const { return entry_bytes_; }

    // A batch of `layer` chose `experts` (each once): counts them, and returns the view of each
    // one this level serves now (ready), null for the others; the number served.
    size_t route(int layer, std::span<const int> experts, std::vector<const ExpertView*>& views);
    // An expert the level did not serve (of the layer just routed, or the next layer's guess),
    // in host memory at `host` (unchanged until the copy lands, see Backend::load_expert_entry):
    // loaded when the policy takes it and the limits allow. True when a load started.
    Result<bool> offer(int layer, int expert, const ExpertView& host);

  private:
    VramExpertCache(Backend& gpu) : gpu_(gpu) {}
    size_t key(int layer, int expert) const {
        return size_t(layer) * size_t(n_expert_) + size_t(expert);
    }
    // Entries whose copies have landed become ready; the count of those still loading shrinks.
    void collect_landed();

    Backend& gpu_;
    int n_layer_ = 0, n_expert_ = 0;
    uint64_t entry_bytes_ = 0;
    ExpertCachePolicy policy_;
    std::vector<size_t> key_of_;       // per entry: its key, SIZE_MAX when empty
    std::vector<int32_t> entry_of_;    // per key: its entry, or -1
    std::vector<ExpertView> views_;    // per entry
    std::vector<char> loading_;        // per entry: its copy not yet seen landed
    std::vector<uint32_t> in_flight_;  // entries loading
    std::vector<size_t> candidates_;   // offer's scratch
    uint32_t loads_this_layer_ = 0;    // since the last route()
};

}  // namespace strata::engine
