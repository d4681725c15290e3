#include "store/row_stream.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "model/streamable.h"
#include "store/tensor_views.h"
#include "util/clock.h"
#include "util/units.h"

namespace strata {

Result<RowStream> RowStream::create(const ModelInfo& info, size_t embedding, size_t head,
                                    uint64_t head_chunk_bytes, StreamReader& reader,
                                    StoreStats& stats) {
    RowStream s;
    s.reader_ = &reader;
    s.stats_ = &stats;
    auto describe = [&](size_t i, Table& t) {
        if (i == SIZE_MAX) return;
        t.present = true;
        t.info = info.info(info.tensors[i]);
        t.rows = std::max<uint64_t>(t.info.shape[1], 1);
        t.row_bytes = t.info.row_bytes();
    };
    describe(embedding, s.embedding_);
    describe(head, s.head_);
    if (s.embedding_.present) {
        const uint64_t row = s.embedding_.row_bytes;
        s.row_stride_ = round_up(size_t(reader.io->widen(0, row).length) + reader.io->block_size(),
                                 AlignedBuffer::kAlignment);
        auto buf = AlignedBuffer::allocate(kRowsPerLookup * s.row_stride_);
        if (!buf) return err("cannot allocate the embedding row buffer: ", buf.error().message);
        s.rows_ = std::move(*buf);
        s.slices_.reserve(kRowsPerLookup);
        s.table_ = make_tensor_view(s.embedding_.info, s.rows_.data());
    }
    if (s.head_.present) {
        s.chunk_rows_ =
            std::min<uint64_t>(head_chunk_rows(s.head_.row_bytes, head_chunk_bytes), s.head_.rows);
        s.head_chunks_ = (s.head_.rows + s.chunk_rows_ - 1) / s.chunk_rows_;
        const size_t bytes =
            round_up(size_t(s.chunk_rows_ * s.head_.row_bytes) + 2 * reader.io->block_size(),
                     AlignedBuffer::kAlignment);
        for (uint64_t i = 0; i < std::min<uint64_t>(kHeadChunks, s.head_chunks_); ++i) {
            auto buf = AlignedBuffer::allocate(bytes);
            if (!buf) return err("cannot allocate the LM head chunks: ", buf.error().message);
            Chunk c;
            c.buffer = std::move(*buf);
            s.chunks_.push_back(std::move(c));
        }
    }
    return s;
}

void RowStream::drain(StreamReader& reader) {
    (void)row_reads_.wait(reader);
    for (Chunk& c : chunks_) (void)c.reads.wait(reader);
}

Result<const TensorView*> RowStream::embedding_rows(std::span<const int32_t> tokens) {
    if (tokens.size() > kRowsPerLookup) {
        return err("a batch of " + std::to_string(tokens.size()) +
                   " tokens is more than the embedding row buffer holds (" +
                   std::to_string(kRowsPerLookup) + ")");
    }
    const auto t0 = std::chrono::steady_clock::now();
    const Table& e = embedding_;
    slices_.clear();
    for (size_t i = 0; i < tokens.size(); ++i) {
        const int32_t id = tokens[i];
        if (id < 0 || uint64_t(id) >= e.rows) {
            (void)row_reads_.wait(*reader_);
            return err("token " + std::to_string(id) + " is outside the vocabulary");
        }
        auto slice = row_reads_.submit(*reader_, e.info.offset + uint64_t(id) * e.row_bytes,
                                       size_t(e.row_bytes), rows_.data() + i * row_stride_);
        if (!slice) {
            (void)row_reads_.wait(*reader_);
            return slice.take_error();
        }
        slices_.push_back(*slice);
        stats_->bytes_from_disk += e.row_bytes;
    }
    STRATA_TRY(row_reads_.wait(*reader_));
    // Packed in order: row i moves down to i * row_bytes, never over a row not yet moved.
    for (size_t i = 0; i < tokens.size(); ++i) {
        std::memmove(rows_.data() + i * e.row_bytes, rows_.data() + i * row_stride_ + slices_[i],
                     size_t(e.row_bytes));
    }
    table_.ne[1] = int64_t(tokens.size());
    stats_->stall_seconds += seconds_since(t0);
    return &table_;
}

Result<void> RowStream::start_chunk(int c, Chunk& chunk) {
    const uint64_t first = uint64_t(c) * chunk_rows_;
    const uint64_t rows = std::min(chunk_rows_, head_.rows - first);
    chunk.index = c;
    auto slice = chunk.reads.submit(*reader_, head_.info.offset + first * head_.row_bytes,
                                    size_t(rows * head_.row_bytes), chunk.buffer.data());
    if (!slice) {
        chunk.index = -1;
        return slice.take_error();
    }
    chunk.view = make_tensor_view(head_.info, chunk.buffer.data() + *slice);
    chunk.view.ne = {chunk.view.ne[0], int64_t(rows), 1, 1};
    stats_->bytes_from_disk += rows * head_.row_bytes;
    return {};
}

Result<const TensorView*> RowStream::acquire_head_chunk(int c, int64_t& first_row) {
    if (c < 0 || uint64_t(c) >= head_chunks_) {
        return err("LM head chunk " + std::to_string(c) + " does not exist");
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto it =
        std::find_if(chunks_.begin(), chunks_.end(), [&](const Chunk& x) { return x.index == c; });
    if (it == chunks_.end()) {
        it = std::find_if(chunks_.begin(), chunks_.end(), [](const Chunk& x) { return !x.in_use; });
        if (it == chunks_.end()) return err("every LM head chunk buffer is in use");
        if (it->reads.in_flight()) (void)it->reads.wait(*reader_);  // a stale read ahead
        STRATA_TRY(start_chunk(c, *it));
    }
    if (auto r = it->reads.wait(*reader_); !r) {
        it->index = -1;  // never computed with
        return r.take_error();
    }
    it->in_use = true;
    stats_->stall_seconds += seconds_since(t0);
    stats_->bytes_served += uint64_t(it->view.rows()) * head_.row_bytes;
    // Read the next chunk (after the last, the first, for the next token) into a free buffer.
    const int next = int((uint64_t(c) + 1) % head_chunks_);
    const bool there = std::any_of(chunks_.begin(), chunks_.end(),
                                   [&](const Chunk& x) { return x.index == next; });
    if (!there) {
        for (Chunk& x : chunks_) {
            if (x.in_use || x.reads.in_flight()) continue;
            if (!start_chunk(next, x)) x.index = -1;  // the demand read reports the error
            break;
        }
    }
    first_row = int64_t(uint64_t(c) * chunk_rows_);
    return &it->view;
}

void RowStream::release_head_chunk(int c) {
    for (Chunk& x : chunks_) {
        if (x.index == c) x.in_use = false;
    }
}

}  // namespace strata
