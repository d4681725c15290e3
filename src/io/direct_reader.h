// DirectReader: the one place that reads model bytes for streaming.
//
// The file is opened with O_DIRECT so streamed weights never fill the page cache (design
// invariant 2); only when the filesystem refuses direct I/O does it fall back to buffered reads
// that drop their pages again (posix_fadvise DONTNEED), and direct() says which. Direct I/O needs
// offsets, lengths and buffers aligned to the device's logical block size, while GGUF aligns
// tensors to 32 bytes, so every request is widened to whole blocks and sliced:
//
//   file   |....block....|....block....|....block....|
//   request       [offset ............. offset+length)
//   read   [aligned start ........................... aligned end)
//
// A request is split into reads of at most max_read_bytes, and up to queue_depth of them are in
// flight at once (io_uring, or a pool of pread threads where io_uring is refused or STRATA_IO=pread
// asks for it). A prefetcher submits many requests and the engine waits only for the one it needs
// next:
//
//   reader.submit({offset, length, dst, tag});   // returns at once
//   ...
//   STRATA_TRY(reader.wait(tag));                // dst holds the bytes
//
// Bytes never come from past the end of the file: a request past the end is refused, and a file
// that shrinks after it was opened gives an error naming the file, never stale or zero bytes.
//
// Not thread-safe: one thread (the store's) drives a reader. Destination buffers must stay valid
// until their request has been waited for (or the reader destroyed, which waits for reads in
// flight).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/aligned_buffer.h"
#include "io/block_device.h"
#include "io/io_backend.h"
#include "util/result.h"

namespace strata {

enum class IoBackendKind { Auto, IoUring, Pread };

// "auto", "io_uring", "pread" (what STRATA_IO accepts).
Result<IoBackendKind> parse_io_backend(const std::string& name);

enum class ReadPlacement {
    // dst receives exactly `length` bytes and may have any alignment. Parts that cannot be read
    // straight into dst go through aligned staging buffers and are copied.
    Exact,
    // No copy: dst is aligned to AlignedBuffer::kAlignment and holds widen(offset, length).length
    // bytes; the whole block-aligned range is read into it and the requested bytes start at
    // dst + widen(offset, length).slice. The bytes around them are file bytes too, except past
    // the end of the file, where dst is left as it was.
    Widened,
};

struct ReadRequest {
    uint64_t file_offset = 0;
    size_t length = 0;
    void* dst = nullptr;
    uint64_t tag = 0;  // names the request in wait(); unique among requests not yet collected
    ReadPlacement placement = ReadPlacement::Exact;
};

struct ReadCompletion {
    uint64_t tag;
    Result<void> status;
};

struct WidenedRange {
    uint64_t offset;  // block-aligned file offset
    uint64_t length;  // multiple of the block size
    size_t slice;     // where the requested bytes start within it
};

struct ReadStats {
    uint64_t requests = 0;         // requests submitted
    uint64_t bytes_requested = 0;  // sum of request lengths
    uint64_t bytes_read = 0;       // bytes the kernel delivered (widened to blocks, re-reads too)
    uint64_t reads = 0;            // reads issued to the kernel, re-issues included
    uint64_t short_reads = 0;      // reads that delivered less than asked and were re-issued
    double wait_seconds = 0;       // time spent blocked in wait() and wait_all()
};

class DirectReader {
  public:
    struct Options {
        IoBackendKind backend = IoBackendKind::Auto;  // Auto: STRATA_IO, else io_uring, else pread
        unsigned queue_depth = 64;                    // reads in flight
        size_t max_read_bytes = 1 << 20;  // a request is split into reads no larger than this
        unsigned pread_threads = 0;       // 0: min(queue_depth, 16)
        // Cap on staging buffers for Exact requests; they are freed whenever no request is left.
        size_t staging_bytes = 16 << 20;
        bool try_direct = true;  // false: buffered reads even where O_DIRECT works
    };

    static Result<std::unique_ptr<DirectReader>> open(const std::string& path,
                                                      const Options& options);
    static Result<std::unique_ptr<DirectReader>> open(const std::string& path) {
        return open(path, Options{});
    }
    // Takes ownership of an open file descriptor (e.g. an unnamed O_TMPFILE); `name` is used in
    // error messages.
    static Result<std::unique_ptr<DirectReader>> adopt(int fd, std::string name,
                                                       const Options& options);
    ~DirectReader();
    DirectReader(const DirectReader&) = delete;
    DirectReader& operator=(const DirectReader&) = delete;

    // Queues a request and starts as many reads as the queue depth allows; does not block.
    // Errors: the range runs past the end of the file, the tag is already in use, or the kernel
    // refused to start reads.
    Result<void> submit(const ReadRequest& request);
    // Blocks until the request with this tag has finished; returns its outcome and forgets it.
    Result<void> wait(uint64_t tag);
    // True when the request has finished (a following wait() does not block).
    bool ready(uint64_t tag);
    // Starts queued reads and collects finished ones without blocking; returns the requests that
    // finished and forgets them.
    std::vector<ReadCompletion> poll();
    // Waits for every request, forgets them all, and returns the first error.
    Result<void> wait_all();
    // Submits every request and waits for all of them.
    Result<void> read_ranges(std::span<const ReadRequest> requests);
    // One synchronous Exact read (under tag kSyncTag, which other requests must not use).
    Result<void> read(uint64_t offset, size_t length, void* dst);
    static constexpr uint64_t kSyncTag = ~uint64_t{0};

    WidenedRange widen(uint64_t offset, size_t length) const;

    const std::string& path() const { return path_; }
    uint64_t size() const { return size_; }
    bool direct() const { return direct_; }
    // Alignment of file offsets and lengths for direct reads (1 when reads are buffered).
    uint32_t block_size() const { return direct_ ? align_.offset : 1; }
    // What the device reported, whether or not reads are direct, and where that came from.
    const DirectIoAlignment& alignment() const { return align_; }
    const char* backend_name() const { return backend_->name(); }
    // Why the backend or the read mode is not the preferred one (io_uring refused, filesystem
    // without O_DIRECT); empty when they are.
    const std::string& fallback_note() const { return note_; }
    const ReadStats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }
    size_t in_flight() const { return in_flight_; }

    // For tests and alternative kernels interfaces: use this backend, which must allow at least
    // options.queue_depth reads in flight.
    static Result<std::unique_ptr<DirectReader>> adopt_with_backend(
        int fd, std::string name, const Options& options, std::unique_ptr<IoBackend> backend);

  private:
    // One read issued to the kernel: a block-aligned piece of one request.
    struct Op {
        uint64_t offset = 0;       // file offset of the piece
        uint32_t length = 0;       // bytes asked for
        uint32_t required = 0;     // bytes from `offset` the request needs (the rest may be past
                                   // the end of the file)
        uint32_t done = 0;         // bytes arrived
        std::byte* buf = nullptr;  // where they land: in dst, or in the staging buffer
        bool staged = false;       // read into a staging buffer and copied into dst
        int32_t staging = -1;      // that buffer, once one is assigned
        uint32_t request = 0;      // index in requests_
    };
    struct RequestState {
        ReadRequest req;
        uint32_t ops_left = 0;
        bool live = false;  // submitted and not yet taken
        bool finished = false;
        bool failed = false;
        Error error;
    };

    DirectReader() = default;
    static Result<std::unique_ptr<DirectReader>> make(int fd, std::string name,
                                                      const Options& options,
                                                      std::unique_ptr<IoBackend> backend);

    uint32_t new_request(const ReadRequest& req);
    // The live request with this tag, or -1. A linear scan: few requests are live at a time, and
    // unlike a hash map it allocates nothing (a decode step must not).
    int64_t find_request(uint64_t tag) const;
    void push_queued(uint32_t op);
    uint32_t pop_queued();
    void requeue_front(uint32_t op);  // a read to retry goes first
    bool queue_empty() const { return queued_head_ == queued_.size(); }
    uint32_t new_op();
    Result<void> pump();                // start queued reads while there is room
    Result<void> collect(bool block);   // reap finished reads and account for them
    Result<void> progress(bool block);  // collect, then pump; breaks the reader on failure
    void on_completion(uint32_t op_index, int64_t result);
    void finish_op(uint32_t op_index);
    void fail_request(RequestState& r, Error e);
    void break_reader(Error e);
    Result<void> take_result(uint32_t request_index);
    Result<int32_t> acquire_staging();
    Result<void> wait_for(uint32_t request_index);

    int fd_ = -1;
    std::string path_;
    uint64_t size_ = 0;
    bool direct_ = false;
    DirectIoAlignment align_;
    Options options_;
    std::unique_ptr<IoBackend> backend_;
    std::string note_;

    std::vector<RequestState> requests_;
    std::vector<uint32_t> free_requests_;
    std::vector<Op> ops_;
    std::vector<uint32_t> free_ops_;
    // Ops waiting for room in the queue, in submission order: queued_[queued_head_..]. A vector
    // that is compacted instead of a deque, whose chunks are allocated as it moves.
    std::vector<uint32_t> queued_;
    size_t queued_head_ = 0;
    size_t live_requests_ = 0;
    size_t in_flight_ = 0;
    std::vector<AlignedBuffer> staging_;
    std::vector<int32_t> free_staging_;
    std::vector<IoRead> batch_;              // reused by pump()
    std::vector<IoCompletion> completions_;  // reused by collect()
    ReadStats stats_;
    // Set when the kernel interface failed (not one read: the ring itself); every call returns it.
    bool broken_ = false;
    Error broken_error_;
};

}  // namespace strata
