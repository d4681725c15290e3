#include "store/expert_cache_policy.h"

#include <algorithm>
#include <limits>

namespace strata {

std::string_view cache_policy_name(CachePolicy p) {
    return p == CachePolicy::Lru ? "lru" : "lfu";
}

Result<CachePolicy> parse_cache_policy(std::string_view name) {
    if (name == "lru") return CachePolicy::Lru;
    if (name == "lfu") return CachePolicy::Lfu;
    return err("unknown cache policy '" + std::string(name) + "' (lru or lfu)");
}

CachePolicy default_cache_policy(uint64_t entries, uint64_t working_set) {
    return entries > working_set ? CachePolicy::Lru : CachePolicy::Lfu;
}

void ExpertCachePolicy::reset(CachePolicy policy, size_t entries, size_t keys,
                              uint64_t aging_period) {
    policy_ = policy;
    tick_ = 0;
    last_use_.assign(entries, 0);
    count_.assign(keys, 0);
    since_aging_ = 0;
    aging_period_ = std::max<uint64_t>(1, aging_period ? aging_period : entries * kAgingFactor);
}

void ExpertCachePolicy::chosen(size_t key) {
    if (key >= count_.size()) return;
    if (count_[key] < std::numeric_limits<uint32_t>::max()) ++count_[key];
    if (++since_aging_ >= aging_period_) {
        for (uint32_t& c : count_) c /= 2;
        since_aging_ = 0;
    }
}

void ExpertCachePolicy::used(size_t entry) {
    if (entry < last_use_.size()) last_use_[entry] = ++tick_;
}

size_t ExpertCachePolicy::victim(std::span<const size_t> candidates,
                                 std::span<const size_t> key_of_entry) const {
    size_t best = SIZE_MAX;
    uint64_t best_count = 0, best_use = 0;
    for (size_t e : candidates) {
        const size_t key = key_of_entry[e];
        if (key == SIZE_MAX) return e;
        const uint64_t use = last_use_[e];
        const uint64_t count = policy_ == CachePolicy::Lfu && key < count_.size() ? count_[key] : 0;
        if (best == SIZE_MAX || count < best_count || (count == best_count && use < best_use)) {
            best = e;
            best_count = count;
            best_use = use;
        }
    }
    return best;
}

double simulate_hit_rate(const std::vector<std::vector<uint32_t>>& batches, size_t keys,
                         size_t capacity, CachePolicy policy) {
    if (capacity == 0) return 0;
    ExpertCachePolicy p;
    p.reset(policy, capacity, keys);
    std::vector<size_t> key_of(capacity, SIZE_MAX);
    std::vector<size_t> entry_of(keys, SIZE_MAX);
    std::vector<bool> held(capacity, false);
    std::vector<size_t> candidates;
    uint64_t hits = 0, total = 0;
    for (const std::vector<uint32_t>& batch : batches) {
        std::fill(held.begin(), held.end(), false);
        for (uint32_t key : batch) p.chosen(key);
        for (uint32_t key : batch) {
            if (entry_of[key] != SIZE_MAX) {
                held[entry_of[key]] = true;
                ++hits;
            }
        }
        total += batch.size();
        for (uint32_t key : batch) {
            if (entry_of[key] != SIZE_MAX) continue;
            candidates.clear();
            for (size_t c = 0; c < capacity; ++c) {
                if (!held[c]) candidates.push_back(c);
            }
            if (candidates.empty()) break;  // the union is larger than the cache
            const size_t e = p.victim(candidates, key_of);
            if (key_of[e] != SIZE_MAX) entry_of[key_of[e]] = SIZE_MAX;
            key_of[e] = key;
            entry_of[key] = e;
            held[e] = true;
            p.used(e);
        }
        for (uint32_t key : batch) {
            if (entry_of[key] != SIZE_MAX) p.used(entry_of[key]);
        }
    }
    return total ? double(hits) / double(total) : 0;
}

}  // namespace strata
