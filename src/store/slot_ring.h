// The slot ring: the tensors a plan streams by layer (a layer's FFN group: dense FFN,
// shared-expert and, when a plan streams a mixture-of-experts model that way, routed-expert
// weights) are read with direct I/O into a ring of slot buffers just before they are needed.
//
// Each slot holds one layer's group, every tensor read widened to the disk's block size into its
// own aligned part of the slot and sliced (GGUF aligns tensors to 32 bytes only). When the engine
// asks for layer L, the ring makes sure L is in a slot (a hit when a prefetch already brought it,
// a wait when the read is still in flight, a demand read otherwise) and then starts reading the
// next `lookahead` streamed layers into the following slots, so the disk works while the CPU
// computes. Decoding visits the layers in a cycle, so after the last layer the prefetch continues
// with the first. With as many slots as streamed layers every layer stays put after its first
// read.
//
// A slot in use by the engine is never overwritten, a slot is never handed out before all of its
// reads have completed, and a failed or short read is an error (DirectReader), so a stale or
// partial slot can never be computed with.
#pragma once

#include <vector>

#include "io/aligned_buffer.h"
#include "model/model_info.h"
#include "store/read_set.h"
#include "store/store_report.h"
#include "store/weight_store.h"

namespace strata {

struct SlotRingConfig {
    int lookahead = 2;  // streamed layers prefetched ahead of the one computing
    int slots = 0;      // slot buffers; 0: lookahead + 1
};

class SlotRing {
  public:
    // `groups[layer]`: the tensors (indices in info.tensors) read into a slot for that layer;
    // empty for a layer that streams nothing.
    static Result<SlotRing> create(const ModelInfo& info,
                                   const std::vector<std::vector<size_t>>& groups,
                                   const SlotRingConfig& config, StreamReader& reader);
    SlotRing() = default;
    SlotRing(SlotRing&&) = default;
    SlotRing& operator=(SlotRing&&) = default;

    bool streams(int layer) const {
        return layer >= 0 && size_t(layer) < pieces_.size() && !pieces_[size_t(layer)].empty();
    }
    bool empty() const { return streamed_layers_.empty(); }

    // Brings `layer`'s group into a slot and binds its tensors over `layer_views` (a copy of the
    // arena's views of the layer) and `experts` (routed experts streamed with the layer). The
    // views stay valid until release(layer).
    Result<void> acquire(int layer, StreamReader& reader, LayerView& layer_views,
                         std::vector<ExpertView>& experts, StoreStats& stats);
    void release(int layer);
    // Waits for every read still in flight (before the slots go away).
    void drain(StreamReader& reader);

    const SlotStats& stats() const { return stats_; }
    void reset_stats();
    uint64_t slot_bytes() const { return slot_bytes_; }
    int slot_count() const { return int(slots_.size()); }

  private:
    struct Piece {  // one streamed tensor of a layer
        ModelTensor tensor;
        TensorInfo info;
        size_t slot_offset;  // where its widened read lands in a slot
    };
    struct Slot {
        AlignedBuffer buffer;
        int layer = -1;       // whose bytes it holds or is receiving
        bool in_use = false;  // handed to the engine and not yet released
        ReadSet reads;
        std::vector<size_t> slice;  // per piece: where its bytes start in its widened read
    };

    Result<void> start_reads(int layer, Slot& slot, StreamReader& reader, StoreStats& stats);
    Result<void> finish_reads(Slot& slot, StreamReader& reader);
    void prefetch_after(int layer, size_t slot_index, StreamReader& reader, StoreStats& stats);
    int next_streamed(int layer, int steps) const;

    std::vector<std::vector<Piece>> pieces_;  // per layer; empty when not streamed
    std::vector<int> streamed_layers_;        // in layer order
    std::vector<Slot> slots_;
    size_t slot_bytes_ = 0;
    int lookahead_ = 1;
    SlotStats stats_;
};

}  // namespace strata
