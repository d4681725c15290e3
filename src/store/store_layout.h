// Where the store keeps each tensor, assembled from the plan: the one description every store
// set-up is made from. A tensor lives in the resident arena, streams with its layer through the
// slot ring, or streams expert by expert through the expert cache; the ring and the cache are
// sized here too. `store_layout(info, plan)` follows Plan::tensors (tier, use, unit), so the
// store streams exactly what the plan counted as streamed; the other builders are the fixed
// set-ups of experiments and tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_info.h"
#include "model/streamable.h"
#include "plan/plan.h"
#include "store/expert_cache.h"
#include "store/slot_ring.h"

namespace strata {

enum class Residence : uint8_t {
    Arena,        // read at open, held for the whole run
    Slot,         // read with its layer's group into the slot ring before the layer runs
    ExpertCache,  // read expert by expert into the expert cache when the router picks it
    Rows,         // token embedding / LM head: read by rows (store/row_stream.h)
};

struct StoreLayout {
    std::vector<Residence> tensors;  // parallel to ModelInfo::tensors
    SlotRingConfig ring;
    ExpertCacheConfig experts;
    uint64_t head_chunk_bytes = kHeadChunkBytes;  // LM head read by rows: bytes per chunk
    bool mapped = false;  // the naive baseline: the whole file memory-mapped, no streaming
    // Where the arena lives: host RAM, or a GPU's memory when the plan puts the weights there.
    MemoryPlace arena_place;
    // With the arena on a GPU, its tensors that stay in host RAM instead (the CPU's layers of a
    // plan split between the two), parallel to `tensors`; empty: none. rope_freqs stays there
    // always: the host reads it.
    std::vector<bool> on_host;
    // Page-lock the host arena of such a store (Arena::pin_for_gpu): the GPU ships the CPU's
    // routed experts from it per prompt batch.
    bool pin_host = false;
    std::string mode = "resident";  // what the store calls itself: the plan's mode, "mmap", ...

    bool any(Residence r) const;
};

// Every tensor in the arena.
StoreLayout resident_layout(const ModelInfo& info);
// The whole file memory-mapped (strata bench --baseline).
StoreLayout mapped_layout(const ModelInfo& info);
// The FFN groups (model/streamable.h, StreamSet::LayerFfn) of the layers flagged in
// `stream_layers` through the slot ring, the rest in the arena.
StoreLayout layer_stream_layout(const ModelInfo& info, const std::vector<bool>& stream_layers,
                                const SlotRingConfig& ring);
// Every routed expert through the expert cache, the rest in the arena.
StoreLayout expert_stream_layout(const ModelInfo& info, const ExpertCacheConfig& experts);
// What the plan says: its streamed tensors by their unit, the ring of its slots and lookahead,
// an expert cache of its capacity plus its slots in whole experts.
StoreLayout store_layout(const ModelInfo& info, const Plan& plan);

}  // namespace strata
