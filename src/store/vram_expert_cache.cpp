#include "store/vram_expert_cache.h"

#include <algorithm>
#include <cstddef>
#include <string>

namespace strata {

Result<std::unique_ptr<VramExpertCache>> VramExpertCache::create(
    ExpertEntryMemory& memory, int n_layer, int n_expert, uint32_t entries, uint64_t entry_bytes,
    uint32_t prefetch_per_layer, VramExpertStats& stats) {
    if (n_layer <= 0 || n_expert <= 0 || entries == 0) {
        return err("a GPU expert cache needs experts and entries (", std::to_string(n_layer),
                   " layers of ", std::to_string(n_expert), " experts, ", std::to_string(entries),
                   " entries)");
    }
    std::unique_ptr<VramExpertCache> c(new VramExpertCache(memory, stats));
    const size_t keys = size_t(n_layer) * size_t(n_expert);
    entries = uint32_t(std::min<size_t>(entries, keys));
    STRATA_TRY(memory.reserve_expert_entries(entry_bytes, entries));
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
    c->ring_place_.assign(entries, -1);
    c->guess_.assign(entries, 0);
    c->served_.assign(entries, 0);
    // The ring holds two layers' guesses: those of the layer about to run, which its GPU work
    // reads, and the next one's, copied meanwhile.
    const uint32_t ring = 2 * prefetch_per_layer;
    if (ring > 0 && entries >= 2 * ring) {
        c->per_layer_ = prefetch_per_layer;
        for (uint32_t i = 0; i < ring; ++i) {
            const uint32_t e = entries - ring + i;
            c->ring_.push_back(e);
            c->ring_place_[e] = int32_t(i);
        }
    }
    return c;
}

void VramExpertCache::collect_landed() {
    // One copy engine runs the loads in the order they were queued: the first still in flight
    // ends the search.
    size_t landed = 0;
    while (landed < in_flight_.size() && memory_.expert_entry_ready(in_flight_[landed])) {
        loading_[in_flight_[landed]] = 0;
        ++landed;
    }
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + long(landed));
    if (landed > 0) victim_known_ = false;  // a landed entry may be evicted now
}

size_t VramExpertCache::policy_victim() {
    if (!victim_known_) {
        candidates_.clear();
        for (size_t e = 0; e < key_of_.size(); ++e) {
            if (!loading_[e] && ring_place_[e] < 0 && !served_[e]) candidates_.push_back(e);
        }
        victim_ = candidates_.empty() ? SIZE_MAX : policy_.victim(candidates_, key_of_);
        victim_known_ = true;
    }
    return victim_;
}

bool VramExpertCache::copy_room() {
    if (in_flight_.size() < kMaxLoadsInFlight) return true;
    collect_landed();
    return in_flight_.size() < kMaxLoadsInFlight;
}

Result<void> VramExpertCache::load(size_t entry, size_t k, const ExpertView& host) {
    if (key_of_[entry] != SIZE_MAX) entry_of_[key_of_[entry]] = -1;
    key_of_[entry] = SIZE_MAX;
    STRATA_ASSIGN(views_[entry], memory_.load_expert_entry(uint32_t(entry), host));
    key_of_[entry] = k;
    entry_of_[k] = int32_t(entry);
    loading_[entry] = 1;
    in_flight_.push_back(uint32_t(entry));
    policy_.used(entry);
    victim_known_ = false;
    return {};
}

size_t VramExpertCache::route(int layer, std::span<const int> experts,
                              std::vector<const ExpertView*>& views) {
    if (!in_flight_.empty()) collect_landed();
    loads_this_layer_ = 0;
    victim_known_ = false;  // the counts change now
    for (uint32_t e : served_list_) served_[e] = 0;
    served_list_.clear();
    served_ring_.clear();
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
        served_[size_t(e)] = 1;
        served_list_.push_back(uint32_t(e));
        if (ring_place_[size_t(e)] < 0) continue;
        served_ring_.push_back(uint32_t(e));
        if (guess_[size_t(e)]) {
            guess_[size_t(e)] = 0;
            judge(true);
            ++stats_.prefetch_hits;
        }
    }
    stats_.requests += experts.size();
    stats_.hits += served;
    if (!ring_.empty()) settle_guesses(layer);
    return served;
}

void VramExpertCache::judge(bool used) {
    (used ? used_ : wasted_) += 1;
    if (used_ + wasted_ > 64) {  // decay: the accuracy of recent guesses
        used_ /= 2;
        wasted_ /= 2;
    }
}

void VramExpertCache::settle_guesses(int layer) {
    for (uint32_t e : ring_) {
        if (guess_[e] && key_of_[e] != SIZE_MAX && layer_of(key_of_[e]) == layer) {
            guess_[e] = 0;  // not chosen, or its copy had not landed
            judge(false);
        }
    }
    for (uint32_t e : served_ring_) {
        const size_t victim = policy_victim();
        if (victim == SIZE_MAX) return;
        if (key_of_[victim] != SIZE_MAX &&
            policy_.frequency(key_of_[e]) <= policy_.frequency(key_of_[victim])) {
            continue;
        }
        // The two entries swap roles; the victim, emptied, is the ring's now.
        if (key_of_[victim] != SIZE_MAX) entry_of_[key_of_[victim]] = -1;
        key_of_[victim] = SIZE_MAX;
        const int32_t place = ring_place_[e];
        ring_[size_t(place)] = uint32_t(victim);
        ring_place_[victim] = place;
        ring_place_[e] = -1;
        victim_known_ = false;
    }
}

Result<bool> VramExpertCache::offer(int layer, int expert, const ExpertView& host) {
    const size_t k = key(layer, expert);
    if (entry_of_[k] >= 0 || loads_this_layer_ >= kMaxLoadsPerLayer ||
        policy_.frequency(k) < kMinLoadFrequency || !copy_room()) {
        return false;
    }
    const size_t victim = policy_victim();
    if (victim == SIZE_MAX) return false;
    // A full level takes a newcomer only when it is chosen more often than what it would evict.
    if (key_of_[victim] != SIZE_MAX && policy_.frequency(k) <= policy_.frequency(key_of_[victim])) {
        return false;
    }
    STRATA_TRY(load(victim, k, host));
    ++loads_this_layer_;
    ++stats_.loads;
    stats_.load_bytes += expert_entry_bytes(host);
    return true;
}

bool VramExpertCache::prefetch_wanted() {
    allowed_ = prefetched_ = 0;
    if (ring_.empty()) return false;
    const double judged = used_ + wasted_;
    if (judged < 8 || used_ >= kMinVramPrefetchAccuracy * judged) {
        allowed_ = per_layer_;
    } else if (++asked_ % kVramPrefetchProbeEvery == 0) {
        allowed_ = 1;  // a probe keeps the accuracy measured
    }
    return allowed_ > 0;
}

Result<bool> VramExpertCache::prefetch(int layer, int expert, const ExpertView& host) {
    const size_t k = key(layer, expert);
    if (prefetched_ >= allowed_ || entry_of_[k] >= 0 || !copy_room()) return false;
    // The ring's next entry whose copy is not still running.
    for (size_t i = 0; i < ring_.size(); ++i) {
        const uint32_t e = ring_[(ring_next_ + i) % ring_.size()];
        if (loading_[e]) continue;
        ring_next_ = (ring_next_ + i + 1) % ring_.size();
        if (guess_[e]) judge(false);  // its layer never ran since: wasted
        STRATA_TRY(load(e, k, host));
        guess_[e] = 1;
        ++prefetched_;
        ++stats_.prefetches;
        stats_.prefetch_bytes += expert_entry_bytes(host);
        return true;
    }
    return false;
}

}  // namespace strata
