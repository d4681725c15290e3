// Heap memory that direct I/O can read into: the start is aligned to 4096 bytes (the largest
// logical block size and DMA alignment a Linux block device asks for), and the usable size is
// rounded up to a multiple of 4096 so a read widened to whole blocks always fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "util/result.h"

namespace strata {

class AlignedBuffer {
  public:
    static constexpr size_t kAlignment = 4096;
    static constexpr size_t kHugePageBytes = size_t(2) << 20;

    AlignedBuffer() = default;
    // An error (not an exception) when the memory is not there, so callers can say which budget
    // was too large.
    static Result<AlignedBuffer> allocate(size_t bytes);
    ~AlignedBuffer();
    AlignedBuffer(AlignedBuffer&& other) noexcept { swap(other); }
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
        AlignedBuffer(std::move(other)).swap(*this);
        return *this;
    }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;

    std::byte* data() { return data_; }
    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    // Pins the pages in RAM (mlock) so resident weights are never paged out. The error names
    // RLIMIT_MEMLOCK, the usual reason it fails for an unprivileged user.
    Result<void> lock();
    bool locked() const { return locked_; }

  private:
    void swap(AlignedBuffer& other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        std::swap(locked_, other.locked_);
    }

    std::byte* data_ = nullptr;
    size_t size_ = 0;
    bool locked_ = false;
};

// x rounded down / up to a multiple of `align` (a power of two).
constexpr uint64_t align_down(uint64_t x, uint64_t align) {
    return x & ~(align - 1);
}
constexpr uint64_t align_up(uint64_t x, uint64_t align) {
    return (x + align - 1) & ~(align - 1);
}

}  // namespace strata
