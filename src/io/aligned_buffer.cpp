#include "io/aligned_buffer.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/units.h"

namespace strata {

Result<AlignedBuffer> AlignedBuffer::allocate(size_t bytes) {
    AlignedBuffer b;
    if (bytes == 0) return b;
    if (bytes > SIZE_MAX - kAlignment) {
        return err("cannot allocate ", std::to_string(bytes), " bytes: size out of range");
    }
    const size_t size = align_up(bytes, kAlignment);
    void* p = std::aligned_alloc(kAlignment, size);
    if (!p) return err("out of memory allocating a ", format_bytes(size), " I/O buffer");
    b.data_ = static_cast<std::byte*>(p);
    b.size_ = size;
    return b;
}

AlignedBuffer::~AlignedBuffer() {
    if (locked_) ::munlock(data_, size_);
    std::free(data_);
}

Result<void> AlignedBuffer::lock() {
    if (locked_ || size_ == 0) return {};
    if (::mlock(data_, size_) != 0) {
        const int e = errno;
        std::string limit = "unknown";
        struct rlimit rl {};
        if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
            limit = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : format_bytes(rl.rlim_cur);
        }
        return err("cannot lock ", format_bytes(size_), " in RAM: ", std::strerror(e),
                   " (the locked-memory limit, ulimit -l, is ", limit,
                   "; raise it or run without locking)");
    }
    locked_ = true;
    return {};
}

}  // namespace strata
