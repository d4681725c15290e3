// The reads that fill one buffer of a streaming store (a slot, an expert-cache entry): each piece
// of the file is read widened to whole disk blocks straight into its place in the buffer (no
// copy), and the set remembers the tags still in flight, so that the buffer is handed out only
// when every one of them has landed. One reader and its tag counter serve all of a store's sets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "io/direct_reader.h"
#include "util/result.h"

namespace strata {

// A store's reader: the file opened for direct I/O and the next free tag.
struct StreamReader {
    std::unique_ptr<DirectReader> io;
    uint64_t next_tag = 1;

    static Result<StreamReader> open(const std::string& path, unsigned queue_depth);
    uint64_t tag() { return next_tag++; }
};

class ReadSet {
  public:
    // Starts reading [offset, offset + length) widened to blocks into dst, which is aligned to
    // AlignedBuffer::kAlignment and has room for reader.io->widen(offset, length).length bytes.
    // Returns where the requested bytes will start in dst.
    Result<size_t> submit(StreamReader& reader, uint64_t offset, size_t length, std::byte* dst);
    // Waits for every read of the set and forgets them; the first error, if any.
    Result<void> wait(StreamReader& reader);
    // True when every read of the set has landed (wait() will not block).
    bool landed(StreamReader& reader) const;
    bool in_flight() const { return !tags_.empty(); }
    // Forgets the reads without waiting (only after the reader has waited for them all).
    void forget() { tags_.clear(); }

  private:
    std::vector<uint64_t> tags_;
};

}  // namespace strata
