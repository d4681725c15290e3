// Tensors read by rows (model/streamable.h, StreamUnit::Rows), for budgets that cannot hold the
// token-embedding table or the LM head:
//  - embedding lookups read only the rows a batch needs: each row widened to blocks into its
//    own place in a buffer of kRowsPerLookup rows, then packed so that the rows form a table of
//    the batch's tokens in order (row i is token i's);
//  - the LM head is read in chunks of head_chunk_rows rows into a ring of kHeadChunks buffers:
//    while the engine computes the logits of chunk c, chunk c + 1 is read (after the last chunk,
//    the first one again, for the next token).
// With a tied output the table is one tensor serving both.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "io/aligned_buffer.h"
#include "model/model_info.h"
#include "model/tensor_view.h"
#include "store/read_set.h"
#include "store/store_report.h"

namespace strata {

class RowStream {
  public:
    // `embedding`, `head`: indices in info.tensors of the tensors read by rows (SIZE_MAX: that
    // one is resident). `reader` and `stats` belong to the store and outlive this.
    static Result<RowStream> create(const ModelInfo& info, size_t embedding, size_t head,
                                    uint64_t head_chunk_bytes, StreamReader& reader,
                                    StoreStats& stats);
    RowStream() = default;
    RowStream(RowStream&&) = default;
    RowStream& operator=(RowStream&&) = default;

    bool embedding_streamed() const { return embedding_.present; }
    bool head_streamed() const { return head_.present; }

    // A table whose row i is tokens[i]'s embedding row; valid until the next call.
    Result<const TensorView*> embedding_rows(std::span<const int32_t> tokens);

    int head_chunks() const { return int(head_chunks_); }
    // Chunk c of the head (rows first_row.. of it), valid until release_head_chunk(c).
    Result<const TensorView*> acquire_head_chunk(int c, int64_t& first_row);
    void release_head_chunk(int c);

    // Waits for every read still in flight (before the buffers go away).
    void drain(StreamReader& reader);

  private:
    struct Table {
        bool present = false;
        TensorInfo info;
        uint64_t row_bytes = 0, rows = 0;
    };
    struct Chunk {
        AlignedBuffer buffer;
        int index = -1;  // which chunk it holds or is receiving
        bool in_use = false;
        ReadSet reads;
        TensorView view;
    };

    Result<void> start_chunk(int c, Chunk& chunk);

    StreamReader* reader_ = nullptr;
    StoreStats* stats_ = nullptr;
    Table embedding_, head_;
    AlignedBuffer rows_;  // kRowsPerLookup slots of row_stride_ bytes
    size_t row_stride_ = 0;
    std::vector<size_t> slices_;  // per row of a lookup: where its bytes start in its slot
    ReadSet row_reads_;
    TensorView table_;
    uint64_t chunk_rows_ = 0, head_chunks_ = 0;
    std::vector<Chunk> chunks_;
};

}  // namespace strata
