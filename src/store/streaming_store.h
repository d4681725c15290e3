// The ffn-stream store: everything resident except the dense FFN weights of the layers the plan
// streams, which are read from the model file with direct I/O into a ring of slot buffers just
// before they are needed.
//
// Each slot holds one layer's FFN tensors (ffn_gate, ffn_up, ffn_down and any biases), each read
// widened to the disk's block size into its own aligned part of the slot and sliced (GGUF aligns
// tensors to 32 bytes only). When the engine asks for layer L, the store makes sure L is in a
// slot (a hit when a prefetch already brought it, a wait when the read is still in flight, a
// demand read otherwise) and then starts reading the next `lookahead` streamed layers into the
// following slots, so the disk works while the CPU computes. Decoding visits the layers in a
// cycle, so after the last layer the prefetch continues with the first. With as many slots as
// streamed layers every layer stays put after its first read: that is how FFN layers are kept
// cached in RAM.
//
// A slot in use by the engine is never overwritten, a slot is never handed out before all of
// its reads have completed, and a failed or short read is an error (DirectReader), so a stale
// or partial slot can never be computed with.
#pragma once

#include <memory>
#include <vector>

#include "io/aligned_buffer.h"
#include "io/direct_reader.h"
#include "model/model_info.h"
#include "plan/plan.h"
#include "store/resident_store.h"
#include "store/tensor_views.h"
#include "store/weight_store.h"

namespace strata {

struct StreamingConfig {
    std::vector<bool> stream_ffn;  // per layer: read its dense FFN tensors from disk on use
    int lookahead = 2;             // streamed layers prefetched ahead of the one computing
    int slots = 0;                 // slot buffers; 0: lookahead + 1
};

struct StreamingStats {
    uint64_t layer_loads = 0;                 // streamed layers asked for
    uint64_t hits = 0;                        // found in a slot, already read
    uint64_t waits = 0;                       // found in flight: waited for the rest of the read
    uint64_t misses = 0;                      // read on demand
    std::vector<double> layer_stall_seconds;  // per layer: time the engine waited for its FFN
};

class StreamingStore final : public WeightStore {
  public:
    static Result<std::unique_ptr<StreamingStore>> open(const ModelInfo& info,
                                                        const StreamingConfig& config,
                                                        const ResidentLoadOptions& options = {});
    ~StreamingStore() override;

    const LayerView& globals() const override { return views_.globals; }
    Result<const LayerView*> acquire_layer(int layer) override;
    void release_layer(int layer) override;
    Result<ExpertView> acquire_expert(int layer, int expert) override;
    void release_expert(int, int) override {}
    const StoreStats& stats() const override { return stats_; }
    void reset_stats() override {
        stats_ = {};
        streaming_ = {};
        streaming_.layer_stall_seconds.assign(pieces_.size(), 0.0);
    }
    std::string mode_name() const override { return "ffn-stream"; }

    const StreamingStats& streaming_stats() const { return streaming_; }
    uint64_t resident_bytes() const { return resident_bytes_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    int slot_count() const { return int(slots_.size()); }

  private:
    struct Piece {      // one streamed tensor of a layer
        size_t tensor;  // index in the model's tensors
        TensorRole role;
        bool bias;
        uint64_t offset, length;  // in the file
        size_t slot_offset;       // where its widened read lands in a slot
        size_t slice;             // where the tensor starts in that read
    };
    struct Slot {
        AlignedBuffer buffer;
        int layer = -1;                 // whose bytes it holds or is receiving
        bool in_use = false;            // handed to the engine and not yet released
        std::vector<uint64_t> pending;  // tags of reads not yet waited for
    };

    StreamingStore() = default;
    Result<void> load_resident(const ModelInfo& info, const ResidentLoadOptions& options);
    Result<void> start_reads(int layer, Slot& slot);
    Result<void> finish_reads(Slot& slot);
    void prefetch_after(int layer, size_t slot_index);
    int next_streamed(int layer, int steps) const;

    std::vector<TensorInfo> tensor_infos_;  // copies, for views
    AlignedBuffer resident_;
    BoundViews views_;
    std::vector<LayerView> active_;           // the views handed out, per layer
    std::vector<std::vector<Piece>> pieces_;  // per layer; empty when not streamed
    std::vector<int> streamed_layers_;        // in layer order
    std::vector<Slot> slots_;
    size_t slot_bytes_ = 0;
    int lookahead_ = 1;
    std::unique_ptr<DirectReader> reader_;
    uint64_t next_tag_ = 1;
    uint64_t resident_bytes_ = 0;
    StoreStats stats_;
    StreamingStats streaming_;
};

// The store configuration an ffn-stream plan asks for: its streamed layers, slots and lookahead.
StreamingConfig streaming_config(const Plan& plan);

// True for the tensors an ffn-stream plan streams: a layer's dense FFN weights and biases.
bool is_streamed_ffn_role(TensorRole role);

}  // namespace strata
