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

#include "model/expert_entry_memory.h"
#include "model/tensor_view.h"
#include "store/coactivation.h"
#include "store/store_report.h"
#include "util/result.h"

namespace strata {

class VramExpertCache;

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

    // One routed expert of a layer, valid until release_expert(layer, expert).
    virtual Result<ExpertView> acquire_expert(int layer, int expert) = 0;
    virtual void release_expert(int layer, int expert) = 0;

    // Every expert of `layer` at once, when all of them stay in memory for the whole run evenly
    // spaced (so that a backend may route and run them itself); none otherwise.
    virtual std::optional<ExpertStack> resident_experts(int /*layer*/) const { return {}; }
    // Where the routed experts of `layer` lie (all in one place): host RAM unless a plan put them
    // in a GPU's memory.
    virtual MemoryPlace experts_place(int /*layer*/) const { return {}; }

    // The routing of a batch in `layer` (n tokens x k experts, token-major), before any of its
    // experts is acquired: a streaming store reads the union at once and learns from it. Experts
    // e with elsewhere[e] set (when given: n_expert flags) are served from elsewhere (the GPU's
    // level of the cache) and will not be acquired: counted, not read.
    virtual void prepare_experts(int /*layer*/, std::span<const int32_t> /*choices*/, int /*k*/,
                                 std::span<const char> /*elsewhere*/) {}
    // The router of `layer` when it stays where it is for the whole run, so the engine may apply
    // it early, to an earlier hidden state, to guess which experts `layer` will choose; nullptr
    // otherwise.
    virtual const TensorView* resident_router(int /*layer*/) const { return nullptr; }
    // One routed expert of `layer` when it stays in host memory for the whole run (so it may be
    // copied elsewhere without acquiring it); nullptr otherwise.
    virtual const ExpertView* resident_expert(int /*layer*/, int /*expert*/) const {
        return nullptr;
    }
    // Whether the store reads ahead the experts hint_experts names for `layer`.
    virtual bool wants_hints(int /*layer*/) const { return false; }
    // A guess of the experts `layer` will choose; the store may read them ahead. Only a hint:
    // never relied on.
    virtual void hint_experts(int /*layer*/, std::span<const int32_t> /*experts*/) {}
    // The experts of `layer` that most often followed `previous` (one token's choices in
    // layer - 1) in the routing statistics the store keeps, best first, at most `count`, in
    // out.experts; none when it keeps none.
    virtual void predict_experts(int /*layer*/, std::span<const int32_t> /*previous*/,
                                 size_t /*count*/, CoactivationStats::Prediction& out) const {
        out.experts.clear();
    }

    // The GPU level of the expert hierarchy (store/vram_expert_cache.h), in front of the store's
    // own levels: `entries` entries of `entry_bytes` in `memory` (a GPU backend's), with up to
    // `prefetch` guesses a layer. Set up once, before the first batch; the store owns it and
    // reports it with its other levels. An error where the store keeps none.
    virtual Result<VramExpertCache*> add_gpu_level(ExpertEntryMemory& /*memory*/,
                                                   uint32_t /*entries*/, uint64_t /*entry_bytes*/,
                                                   uint32_t /*prefetch*/) {
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
