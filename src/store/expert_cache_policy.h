// Which expert-cache entry gives way when a new expert must be read.
//
//  - Lru: the entry used longest ago.
//  - Lfu: the entry whose (layer, expert) was chosen least often, with aging — every count is
//    halved each time the counts have grown by as many choices as there are cache entries times
//    kAgingFactor — so the frequencies follow what the router does lately (a frequency-recency
//    mix); ties go to the entry used longest ago.
//
// Measured with `strata_bench_expert_cache` on a Mixtral-shaped model (12 layers x 8 experts,
// top-2): on a trace with temporal locality LRU beats LFU once the cache holds more than one
// token's working set (n_layer x n_used experts): 70% against 48% at a quarter of the experts,
// 81% against 73% at half. Below that working set LRU gets nothing — each token cycles through
// more experts than fit, and LRU evicts exactly the ones the next token needs — while LFU keeps
// the popular ones (5.5% against 0% at a tenth). So the default, default_cache_policy(), is LRU
// for a cache larger than the working set and LFU for a smaller one; --cache-policy overrides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace strata {

enum class CachePolicy : uint8_t { Lru, Lfu };

std::string_view cache_policy_name(CachePolicy p);  // "lru", "lfu"
Result<CachePolicy> parse_cache_policy(std::string_view name);
// The measured choice: LRU when `entries` hold more than one token's `working_set` of experts
// (n_layer x n_used), LFU otherwise.
CachePolicy default_cache_policy(uint64_t entries, uint64_t working_set);

class ExpertCachePolicy {
  public:
    static constexpr uint64_t kAgingFactor = 8;

    // Counts age every `aging_period` choices (0: entries x kAgingFactor).
    void reset(CachePolicy policy, size_t entries, size_t keys, uint64_t aging_period = 0);
    CachePolicy policy() const { return policy_; }
    // The key was chosen by the router (counted whether or not it was cached).
    void chosen(size_t key);
    // The entry was used now.
    void used(size_t entry);
    // How often the key was chosen lately (the LFU's aged count; counted under either policy).
    uint32_t frequency(size_t key) const { return key < count_.size() ? count_[key] : 0; }
    // The entry to evict among `candidates` (entries that may go), given the key each holds
    // (SIZE_MAX: empty, always taken first).
    size_t victim(std::span<const size_t> candidates, std::span<const size_t> key_of_entry) const;

  private:
    CachePolicy policy_ = CachePolicy::Lru;
    uint64_t tick_ = 0;
    std::vector<uint64_t> last_use_;  // per entry
    std::vector<uint32_t> count_;     // per key
    uint64_t since_aging_ = 0, aging_period_ = 1;
};

// Hit rate of a cache of `capacity` entries under `policy` over a routing trace: batches of keys
// (layer * n_expert + expert), each the union one layer of one batch of tokens chose, all
// present together. It does what the expert cache does without prefetch — members
// already cached held, missing ones placed in ascending order, then all used — so on a trace the
// store recorded it gives the store's hit rate exactly.
double simulate_hit_rate(const std::vector<std::vector<uint32_t>>& batches, size_t keys,
                         size_t capacity, CachePolicy policy);

}  // namespace strata
