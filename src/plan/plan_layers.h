// The arithmetic make_plan works from, kept apart so it can be read (and tested) on its own: what
// of each layer a streaming mode streams, the order in which cached layers are picked, and the
// compute gaps the prefetch lookahead must cover. Internal to plan/.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_info.h"
#include "model/streamable.h"
#include "plan/plan.h"

namespace strata::plan_detail {

// Bytes of [offset, offset + n) once widened to whole blocks, as an O_DIRECT read takes them.
uint64_t widened_bytes(uint64_t offset, uint64_t n, uint32_t block);

// The set of tensors a streaming mode streams (model/streamable.h says which tensors each takes).
StreamSet stream_set(PlanMode group);

struct LayerBytes {
    uint64_t resident = 0;        // bytes never streamed
    uint64_t stream = 0;          // bytes the group streams
    uint64_t stream_widened = 0;  // the same, every tensor widened to the disk block
    double resident_per_token = 0;
    double stream_per_token = 0;
};

struct ModelBytes {
    std::vector<LayerBytes> layers;  // 0..n_layer-1
    uint64_t non_layer = 0;          // token_embd, output, output_norm, ... kept resident
    double non_layer_per_token = 0;
    uint64_t rows_streamed = 0;  // token_embd / output read by rows (DeepStreaming)
    uint64_t row_buffers = 0;    // the buffers those reads land in

    uint64_t resident() const;  // non_layer + every layer's resident part
    uint64_t stream() const;
};

ModelBytes model_bytes(const ModelInfo& model, PlanMode group, uint32_t block,
                       const DeepStreaming& deep = {});

// Bytes of the buffers rows are read into: the embedding rows of one batch (kRowsPerLookup
// rows), and the LM head's chunk ring (kHeadChunks chunks of head_chunk_rows rows), every row or
// chunk widened to whole blocks.
uint64_t embedding_row_buffer_bytes(uint64_t row_bytes, uint32_t block);
uint64_t head_chunk_buffer_bytes(uint64_t row_bytes, uint64_t rows, uint32_t block);

// Layers 0..n-1 in bisection order: 0, n/2, n/4, 3n/4, n/8, ... Any prefix of it is spread
// evenly over the depth (gaps at most twice the even spacing).
std::vector<int> bisection_order(int n);

// Picks the layers whose streamed part stays cached in `room` bytes: by benefit per byte
// (stream_per_token / stream, the same for every dense layer), ties in bisection order, each
// taken when it still fits (first fit). Returns one flag per layer.
std::vector<bool> pick_cached_layers(const ModelBytes& mb, uint64_t room);

struct GapFigures {
    double longest_gap_seconds = 0;  // compute between two streamed FFNs, at most
    double layer_read_seconds = 0;   // the quickest streamed layer's read
    uint32_t lookahead_needed = 0;   // ceil(gap / read), unclamped; 0 when nothing is streamed
};

// The lookahead derivation of plan.h for a choice of cached layers.
GapFigures compute_gaps(const ModelBytes& mb, const std::vector<bool>& cached, double ram_bandwidth,
                        double disk_bandwidth);

// One routed expert of one layer (its gate, up and down slices, each widened to blocks); the
// largest over the model's layers. 0 for a dense model.
uint64_t expert_unit_bytes(const ModelInfo& model, uint32_t block);
// Bytes of the largest expert in a GPU expert entry: its matrices and bias rows, each rounded up
// to kExpertEntryAlign (model/tensor_view.h, expert_entry_bytes).
uint64_t expert_entry_bytes(const ModelInfo& model);

}  // namespace strata::plan_detail
