// The store: one class, set up from a StoreLayout (store/store_layout.h, made from the plan),
// that serves the engine every tensor of the model wherever the layout put it:
//   - the resident arena (store/arena.h): tensors read once at open and held;
//   - the slot ring (store/slot_ring.h): layer groups read just before their layer runs;
//   - the expert cache (store/expert_cache.h): routed experts read when the router picks them;
//   - in front of it, or of the arena's routed experts in RAM, the GPU level of the expert
//     hierarchy (store/vram_expert_cache.h) when a plan gives it GPU memory; the store keeps the
//     routing statistics all levels learn from, and takes each batch's routing and the next
//     layer's guesses once for every level (model_store_experts.cpp);
//   - the row stream (store/row_stream.h): embedding rows and LM head chunks read on demand.
// Resident mode is a layout with everything in the arena, ffn-stream one with FFN groups in the
// ring, expert-stream one with routed experts in the cache; any mixture a plan asks for works
// the same way. One DirectReader serves the arena's load and all streaming.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model_info.h"
#include "store/arena.h"
#include "store/coactivation.h"
#include "store/expert_cache.h"
#include "store/read_set.h"
#include "store/row_stream.h"
#include "store/slot_ring.h"
#include "store/store_layout.h"
#include "store/vram_expert_cache.h"
#include "store/weight_store.h"

namespace strata {

class ModelStore final : public WeightStore {
  public:
    // Sets up the store for `info` (a runnable model) as `layout` says, reading the arena. The
    // store keeps what it needs from `info`; `info` may go away afterwards.
    static Result<std::unique_ptr<ModelStore>> open(const ModelInfo& info,
                                                    const StoreLayout& layout,
                                                    const ResidentLoadOptions& options = {});
    ~ModelStore() override;

    const LayerView& globals() const override { return globals_; }
    Result<const LayerView*> acquire_layer(int layer) override;
    void release_layer(int layer) override;
    bool wants_guesses(int layer) override;
    size_t route_experts(const ExpertBatch& batch, std::vector<const ExpertView*>& gpu) override;
    Result<void> gpu_share_queued(int layer) override;
    Result<ExpertView> acquire_expert(int layer, int expert) override;
    Result<void> release_expert(int layer, int expert) override;
    std::optional<ExpertStack> resident_experts(int layer) const override;
    MemoryPlace experts_place(int layer) const override;
    const TensorView* resident_router(int layer) const override;
    const TensorView* resident_router_bias(int layer) const override;
    const float* selection_bias(int layer) const override;
    Result<EmbeddingLookup> embedding_rows(std::span<const int32_t> tokens) override;
    int head_pieces() const override;
    Result<const TensorView*> acquire_head_piece(int piece, int64_t& first_row) override;
    void release_head_piece(int piece) override;
    Result<void> add_gpu_level(ExpertEntryMemory& memory, uint32_t entries, uint64_t entry_bytes,
                               uint32_t prefetch, std::span<const char> serves) override;
    const StoreStats& stats() const override { return stats_; }
    void reset_stats() override;
    std::string mode_name() const override;
    StoreReport report() const override;

    // The parts, for tests and benchmarks that look inside; null / empty when not set up.
    ExpertCache* expert_cache() { return cache_.get(); }
    const ExpertCache* expert_cache() const { return cache_.get(); }
    const SlotRing& slot_ring() const { return ring_; }
    // The routing statistics every level learns from (empty when the store keeps none).
    const CoactivationStats& routing_statistics() const { return routing_; }
    uint64_t resident_bytes() const { return arena_.weight_bytes() + host_arena_.weight_bytes(); }

  private:
    ModelStore() = default;
    // Every layer's experts as a stack where they are resident and evenly spaced (once, at
    // open: the engine asks for them at every MoE layer of every batch).
    void find_expert_stacks();
    std::optional<ExpertStack> expert_stack(int layer) const;
    // The routing statistics: kept with an expert cache, a GPU level or a statistics file; read
    // from layout.experts.stats_path at open (a bad file is a warning), saved there on close.
    void open_routing_statistics(const ModelInfo& info, const StoreLayout& layout);
    // Every layer's selection bias as host floats (selection_bias_), from the views where the
    // host reads them, else from the file (once, at open).
    Result<void> read_selection_biases(const ModelInfo& info);
    // One routed expert of `layer` when it stays in host memory for the whole run (so the GPU
    // level may copy it without acquiring it); nullptr otherwise.
    const ExpertView* resident_expert(int layer, int expert) const;
    // ev with the expert's bias rows (none where the family has none): every expert the store
    // hands out or gives the GPU level carries them.
    ExpertView with_biases(int layer, int expert, const ExpertView& ev) const;
    bool gpu_level_serves(int layer) const {
        return gpu_level_ && layer >= 0 && size_t(layer) < gpu_serves_.size() &&
               gpu_serves_[size_t(layer)];
    }

    int n_layer_ = 0;
    int n_expert_ = 0;  // routed experts per layer (0: dense)
    std::string mode_;
    StreamReader reader_;
    Arena arena_;
    Arena host_arena_;  // with arena_ on a GPU: the tensors kept in RAM (store_layout.h)
    BoundViews views_;  // of both arenas
    SlotRing ring_;
    RowStream rows_;
    LayerView globals_;  // the arena's, with the shapes of tensors read by rows
    std::unique_ptr<ExpertCache> cache_;
    // Views handed out for layers the ring serves: the arena's views with the slot's bound over.
    std::vector<LayerView> active_;
    std::vector<std::vector<ExpertView>> active_experts_;
    std::vector<std::optional<ExpertStack>> stacks_;  // resident_experts, by layer
    // [layer][expert] selection biases (n_expert_ floats a layer), and which layers have one.
    std::vector<float> selection_bias_;
    std::vector<char> has_selection_bias_;
    StoreStats stats_;
    // The routed-expert hierarchy (model_store_experts.cpp). The routing statistics, where they
    // are saved, and whether they are kept.
    CoactivationStats routing_;
    std::string routing_path_;
    uint64_t routing_identity_ = 0;
    bool keeps_routing_ = false;
    // The GPU level, the memory its entries are in, the layers it serves, and what it did.
    std::unique_ptr<VramExpertCache> gpu_level_;
    ExpertEntryMemory* gpu_memory_ = nullptr;
    std::vector<char> gpu_serves_;
    VramExpertStats gpu_stats_;
    // The batch routed last: per expert, whether the GPU level serves it and the view acquire
    // handed out (what release offers the GPU level).
    std::vector<char> on_gpu_;
    std::vector<ExpertView> acquired_;
    // The next layer's guesses: the layer wants_guesses was asked for and whether the GPU level
    // takes them, the layer they are pending for on the GPU level (gpu_share_queued), and the
    // candidates (the engine's guess, then the statistics' prediction).
    int guess_layer_ = -1;
    bool guess_gpu_ = false;
    int gpu_guesses_for_ = -1;
    std::vector<int32_t> candidates_;
    CoactivationStats::Prediction predicted_;
    std::vector<std::string> warnings_;
};

}  // namespace strata
