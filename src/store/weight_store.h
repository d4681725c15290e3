// The store interface: how the engine gets the weights it computes with.
//
// The engine never touches the model file. Before a layer it asks the store for the layer's
// tensors and, after routing, for the slices of the experts the router picked; it gets views
// that stay valid until it releases them. Whether the bytes were resident all along, read from
// NVMe a moment ago or found in an expert cache is the store's business, so the forward pass is
// the same in every mode (design invariant 1).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/expert_entry_memory.h"
#include "model/tensor_view.h"
#include "store/store_report.h"
#include "util/result.h"

namespace strata {

class WeightStore {
  public:
    virtual ~WeightStore() = default;

    // Tensors outside the blocks: token embedding, output norm, LM head, rope factors. A tensor
    // the store reads by rows has its shape here but no data (present() is false).
    virtual const LayerView& globals() const = 0;

    // The LM head: output.weight, or token_embd when the output is tied to it.
    const TensorView& head_view() const {
        const LayerView& g = globals();
        const TensorView& out = g.weight(TensorRole::Output);
        return out.row_bytes > 0 ? out : g.weight(TensorRole::TokenEmbedding);
    }

    // The embedding rows of a batch: a table and, per token, the row of it that is the token's.
    // Resident: the whole table and the tokens themselves; read by rows: a table of just these
    // rows, in order. Valid until the next call.
    struct EmbeddingLookup {
        const TensorView* table = nullptr;
        bool rows_in_order = false;  // row i of `table` is token i's (else: row tokens[i])
    };
    virtual Result<EmbeddingLookup> embedding_rows(std::span<const int32_t> /*tokens*/) {
        return EmbeddingLookup{&globals().weight(TensorRole::TokenEmbedding), false};
    }

    // The LM head in head_pieces() pieces of consecutive rows, each valid until released.
    virtual int head_pieces() const { return 1; }
    virtual Result<const TensorView*> acquire_head_piece(int /*piece*/, int64_t& first_row) {
        first_row = 0;
        return &head_view();
    }
    virtual void release_head_piece(int /*piece*/) {}

    // A layer's non-expert tensors, valid until release_layer(layer).
    virtual Result<const LayerView*> acquire_layer(int layer) = 0;
    virtual void release_layer(int layer) = 0;

    // --- Routed experts: one hierarchy (the GPU level, RAM, disk) behind these calls.
    //
    // A layer's batch goes: route_experts (once: its routing counted and handed to every level,
    // the GPU level's share named, the rest read ahead as one set, the next layer's guesses
    // taken), then gpu_share_queued once the GPU level's share is queued on its GPU, then
    // acquire_expert / release_expert for each of the rest.

    // Whether guesses of the experts `layer` will choose are wanted now: some level would read
    // or copy them ahead. Asked once a layer, before the engine computes its early guess.
    virtual bool wants_guesses(int /*layer*/) { return false; }

    // One routed batch of a layer.
    struct ExpertBatch {
        int layer = 0;
        std::span<const int32_t> choices;  // n tokens x k experts, token-major
        int k = 0;
        std::span<const int> experts;  // the distinct chosen experts, ascending
        // The engine's early guess of layer + 1's choices (its router applied to this layer's
        // last input), when wants_guesses(layer + 1) said so; empty otherwise.
        std::span<const int32_t> next_guess;
    };
    // Counts the batch's routing into the routing statistics and every level's policy, and
    // writes in gpu[j] the view of experts[j] in the GPU level when it serves it now (ready on
    // its GPU, valid until the next route_experts), null for the rest; returns how many it
    // serves. The rest will be acquired: a streaming store submits their reads now, and guesses
    // for the next layer (next_guess, then the experts that followed this batch's last token's
    // choices in the statistics) are read ahead behind them.
    virtual size_t route_experts(const ExpertBatch& batch, std::vector<const ExpertView*>& gpu) {
        gpu.assign(batch.experts.size(), nullptr);
        return 0;
    }
    // The GPU level's share of the batch routed last (`layer`) is queued on its GPU, so its
    // entries may be copied into: the level copies the next layer's guesses now. Call it before
    // acquiring the rest, or beside computing them.
    virtual Result<void> gpu_share_queued(int /*layer*/) { return {}; }
    // One routed expert of a layer (one route_experts did not give to the GPU level), with its
    // bias rows where the family has them, valid until release_expert(layer, expert). Releasing it
    // offers it to the GPU level, which may start copying it (an error there is returned).
    virtual Result<ExpertView> acquire_expert(int layer, int expert) = 0;
    virtual Result<void> release_expert(int layer, int expert) = 0;

    // Every expert of `layer` at once, when all of them stay in memory for the whole run evenly
    // spaced (so that a backend may route and run them itself), expert 0's bias rows first of
    // the layer's; none otherwise.
    virtual std::optional<ExpertStack> resident_experts(int /*layer*/) const { return {}; }
    // Where the routed experts of `layer` lie (all in one place): host RAM unless a plan put them
    // in a GPU's memory.
    virtual MemoryPlace experts_place(int /*layer*/) const { return {}; }
    // The router of `layer` when it stays where it is for the whole run, so the engine may apply
    // it early, to an earlier hidden state, to guess which experts `layer` will choose; nullptr
    // otherwise.
    virtual const TensorView* resident_router(int /*layer*/) const { return nullptr; }
    // That router's bias (gpt-oss), where resident_router gives the router and it has one.
    virtual const TensorView* resident_router_bias(int /*layer*/) const { return nullptr; }
    // The selection bias of `layer`'s router (exp_probs_b: n_expert floats added to the scores
    // that choose experts) in host memory, wherever the layer's own copy lies, for as long as
    // the store lives; nullptr where the layer has none.
    virtual const float* selection_bias(int /*layer*/) const { return nullptr; }

    // The GPU level of the expert hierarchy (store/vram_expert_cache.h), in front of the store's
    // own levels for the layers `serves` marks (one flag a layer): `entries` entries of
    // `entry_bytes` in `memory` (a GPU backend's), with up to `prefetch` guesses a layer. Set up
    // once, before the first batch; the store owns it and reports it with its other levels. An
    // error where the store keeps none.
    virtual Result<void> add_gpu_level(ExpertEntryMemory& /*memory*/, uint32_t /*entries*/,
                                       uint64_t /*entry_bytes*/, uint32_t /*prefetch*/,
                                       std::span<const char> /*serves*/) {
        return err(mode_name() + " store keeps no GPU level of the expert cache");
    }

    virtual const StoreStats& stats() const = 0;
    virtual void reset_stats() = 0;
    // "resident", "ffn-stream", ...
    virtual std::string mode_name() const = 0;
    // Everything the store has to say about its set-up and its work so far.
    virtual StoreReport report() const = 0;
};

}  // namespace strata
