// The kernel interface under DirectReader: something that starts positioned reads and reports
// them finished. Two implementations: io_uring (many reads in flight from one thread) and a pool
// of threads calling pread (for kernels or containers where io_uring is refused). A backend only
// moves bytes; splitting, alignment, short reads, errors and statistics are DirectReader's job,
// so both behave the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace strata {

struct IoRead {
    uint64_t id;  // handed back in the completion
    int fd;
    void* buf;
    uint32_t length;
    uint64_t offset;
};

struct IoCompletion {
    uint64_t id;
    int64_t result;  // bytes read (0 at end of file), or -errno
};

class IoBackend {
  public:
    virtual ~IoBackend() = default;
    virtual const char* name() const = 0;
    // Starts the reads. The caller never has more than the capacity it created the backend with
    // in flight.
    virtual Result<void> start(std::span<const IoRead> reads) = 0;
    // Appends finished reads to `out`. With `wait`, blocks until at least one has finished; the
    // caller only waits while reads are in flight.
    virtual Result<void> reap(std::vector<IoCompletion>& out, bool wait) = 0;
};

// io_uring with room for `queue_depth` reads in flight. An error when the kernel refuses
// io_uring (old kernel, seccomp filter, io_uring_disabled sysctl), with the reason.
Result<std::unique_ptr<IoBackend>> make_io_uring_backend(unsigned queue_depth);
// `threads` threads, each doing one blocking pread at a time.
std::unique_ptr<IoBackend> make_pread_backend(unsigned threads);

}  // namespace strata
