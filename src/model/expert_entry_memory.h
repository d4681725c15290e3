// Where the GPU level of the expert cache keeps its entries, as the level sees it: a backend
// that keeps such memory hands this out (Backend::expert_entry_memory), and the store's level
// (store/vram_expert_cache.h) fills and serves it without knowing which backend it belongs to.
#pragma once

#include <cstdint>

#include "model/tensor_view.h"
#include "util/result.h"

namespace strata {

// Memory for the GPU level of the expert cache (store/vram_expert_cache.h): entries of one routed
// expert each, filled from host memory on a copy engine beside compute. An entry holds the
// expert's gate, up and down matrices and its bias rows where it has them, each at an offset
// aligned to kExpertEntryAlign (expert_entry_bytes). A backend that keeps them hands it out
// (Backend::expert_entry_memory); the level sees only this.
class ExpertEntryMemory {
  public:
    virtual ~ExpertEntryMemory() = default;
    // Allocates `entries` entries of `entry_bytes` once. An error where its memory does not hold
    // them.
    virtual Result<void> reserve_expert_entries(uint64_t entry_bytes, uint32_t entries) = 0;
    // Queues a copy of `from` (host memory, unchanged until the copy lands) into entry `entry`,
    // after every operation queued so far (which may still read the entry's old expert), and
    // returns the view of the entry, to compute with once expert_entry_ready says so.
    virtual Result<ExpertView> load_expert_entry(uint32_t entry, const ExpertView& from) = 0;
    // True once the entry's last copy has landed (never waits).
    virtual bool expert_entry_ready(uint32_t entry) = 0;
    // Waits until every copy queued has landed: their host memory may be reused after.
    virtual void wait_expert_loads() = 0;
};

}  // namespace strata
