#include "engine/vram_expert_cache.h"

#include <algorithm>
#include <cstddef>
#include <string>

namespace strata::engine {

Result<std::unique_ptr<VramExpertCache>> VramExpertCache::create(Backend& gpu, int n_layer,
                                                                 int n_expert, uint32_t entries,
                                                                 uint64_t entry_bytes) {
    if (n_layer <= 0 || n_expert <= 0 || entries == 0) {
        return err("a GPU expert cache needs experts and entries (", std::to_string(n_layer),
                   " layers of ", std::to_string(n_expert), " experts, ", std::to_string(entries),
                   " entries)");
    }
    std::unique_ptr<VramExpertCache> c(new VramExpertCache(gpu));
    const size_t keys = size_t(n_layer) * size_t(n_expert);
    entries = uint32_t(std::min<size_t>(entries, keys));
    STRATA_TRY(gpu.reserve_expert_entries(entry_bytes, entries));
    c->n_layer_ = n_layer;
    c->n_expert_ = n_expert;
    c->entry_bytes_ = entry_bytes;
    // Counts age over every key's choices, not the entries': the level is small beside the
    // experts, and a newcomer must show it is chosen more often than the one it would evict
    // over more than a few tokens, or the level churns (loads that never pay back).
    c->policy_.reset(CachePolicy::Lfu, entries, keys, keys * ExpertCachePolicy::kAgingFactor);
    c->key_of_.assign(entries, SIZE_MAX);
    c->entry_of_.assign(keys, -1);
    c->views_.resize(entries);
    c->loading_.assign(entries, 0);
    c->in_flight_.reserve(entries);
    c->candidates_.reserve(entries);
    return c;
}

void VramExpertCache::collect_landed() {
    // One copy engine runs the loads in the order they were queued: the first still in flight
    // ends the search.
    size_t landed = 0;
    while (landed < in_flight_.size() && gpu_.expert_entry_ready(in_flight_[landed])) {
        loading_[in_flight_[landed]] = 0;
        ++landed;
    }
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + long(landed));
}

size_t VramExpertCache::route(int layer, std::span<const int> experts,
                              std::vector<const ExpertView*>& views) {
    if (!in_flight_.empty()) collect_landed();
    loads_this_layer_ = 0;
    views.assign(experts.size(), nullptr);
    size_t served = 0;
    for (size_t i = 0; i < experts.size(); ++i) {
        const size_t k = key(layer, experts[i]);
        policy_.chosen(k);
        const int32_t e = entry_of_[k];
        if (e < 0 || loading_[size_t(e)]) continue;
        policy_.used(size_t(e));
        views[i] = &views_[size_t(e)];
        ++served;
    }
    return served;
}

Result<bool> VramExpertCache::offer(int layer, int expert, const ExpertView& host) {
    const size_t k = key(layer, expert);
    if (entry_of_[k] >= 0 || loads_this_layer_ >= kMaxLoadsPerLayer ||
        policy_.frequency(k) < kMinLoadFrequency) {
        return false;
    }
    if (in_flight_.size() >= kMaxLoadsInFlight) {
        collect_landed();
        if (in_flight_.size() >= kMaxLoadsInFlight) return false;
    }
    candidates_.clear();
    for (size_t e = 0; e < key_of_.size(); ++e) {
        if (!loading_[e]) candidates_.push_back(e);
    }
    if (candidates_.empty()) return false;
    const size_t victim = policy_.victim(candidates_, key_of_);
    // A full level takes a newcomer only when it is chosen more often than what it would evict.
    if (key_of_[victim] != SIZE_MAX && policy_.frequency(k) <= policy_.frequency(key_of_[victim])) {
        return false;
    }
    if (key_of_[victim] != SIZE_MAX) entry_of_[key_of_[victim]] = -1;
    key_of_[victim] = SIZE_MAX;
    STRATA_ASSIGN(views_[victim], gpu_.load_expert_entry(uint32_t(victim), host));
    key_of_[victim] = k;
    entry_of_[k] = int32_t(victim);
    loading_[victim] = 1;
    in_flight_.push_back(uint32_t(victim));
    policy_.used(victim);
    ++loads_this_layer_;
    return true;
}

}  // namespace strata::engine
