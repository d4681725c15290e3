// What may stream, decided in one place for the plan and the store alike.
//
// A tensor that is not resident is read in a unit: with its layer's group (the FFN weights, or
// the whole layer when even attention does not fit, read together into a slot), as one routed
// expert (its gate, up and down slices, read into an expert-cache entry when the router picks
// it), or by rows (the token-embedding table: only the rows a batch looks up; the LM head: in
// chunks of rows, one after another). Which tensors a unit may take is a property of the
// tensor's role, not of a store or a plan: the plan counts exactly what the store then streams.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/model_info.h"

namespace strata {

enum class StreamUnit : uint8_t {
    None,    // always resident (attention, norms, routers, globals)
    Layer,   // part of its layer's FFN group, read into a slot before the layer runs
    Expert,  // one routed expert, read into the expert cache after routing
    Rows,    // token embedding / LM head: rows read on demand, the head in chunks of rows
};

std::string_view stream_unit_name(StreamUnit u);  // "none", "layer", "expert"

// The streaming sets a mode can choose from.
enum class StreamSet : uint8_t {
    LayerFfn,       // every layer's FFN weights stream as one group per layer
    RoutedExperts,  // routed experts stream expert by expert; the rest of the layer stays
};

// True when `t` streams under `set`. Routers (and the shared expert's gate) never stream: they
// pick the experts before anything of the layer's FFN can be read.
bool is_streamable(const ModelTensor& t, StreamSet set);

// The unit `t` streams in under `set`, or None when it does not stream there.
StreamUnit stream_unit(const ModelTensor& t, StreamSet set);

// Rows read by rows: one embedding lookup holds up to kRowsPerLookup rows (a prompt batch), and
// the LM head is read in chunks of about kHeadChunkBytes, kHeadChunks of them in flight.
inline constexpr uint64_t kRowsPerLookup = 512;
inline constexpr uint64_t kHeadChunkBytes = 8ull << 20;
inline constexpr uint64_t kHeadChunks = 2;
inline uint64_t head_chunk_rows(uint64_t row_bytes, uint64_t chunk_bytes = kHeadChunkBytes) {
    return row_bytes >= chunk_bytes ? 1 : chunk_bytes / row_bytes;
}

// What a plan streams beyond its set, when the budget is smaller than the set's minimum.
struct DeepStreaming {
    bool embedding_rows = false;  // the token-embedding table (untied) read by rows
    bool head_rows = false;       // the LM head (output, or the tied embedding) read in chunks
    bool whole_layers = false;    // every tensor of a layer streams with its layer's group
};

// True for the tensors the LM head reads: output.weight, or token_embd when there is none.
bool is_head_tensor(const ModelTensor& t, bool tied_output);

// The unit of `t` under `set` deepened by `deep`; None when it stays resident.
StreamUnit stream_unit(const ModelTensor& t, StreamSet set, const DeepStreaming& deep,
                       bool tied_output);

}  // namespace strata
