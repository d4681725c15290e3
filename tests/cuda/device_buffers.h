// Host data to the GPU and back, for the CUDA tests: each copy is checked, and a download waits
// for the work queued before it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/gpu.h"

namespace strata::test {

// A device buffer holding `bytes` bytes of src (at least 16 bytes allocated).
inline gpu::DeviceBuffer upload(const void* src, size_t bytes) {
    gpu::DeviceBuffer b = gpu::DeviceBuffer::allocate(std::max<size_t>(bytes, 16)).value();
    EXPECT_TRUE(gpu::copy(b.data(), src, bytes, gpu::CopyKind::HostToDevice).ok());
    return b;
}

// `count` values of type T at device address src, once the device is idle.
template <class T>
std::vector<T> download(const void* src, size_t count) {
    std::vector<T> v(count);
    EXPECT_TRUE(gpu::synchronize().ok());
    EXPECT_TRUE(gpu::copy(v.data(), src, count * sizeof(T), gpu::CopyKind::DeviceToHost).ok());
    return v;
}

// A device copy of a host vector, for a kernel's arguments.
class DeviceVector {
  public:
    template <class T>
    explicit DeviceVector(const std::vector<T>& host)
        : buf_(upload(host.data(), host.size() * sizeof(T))) {}
    float* f32() const { return reinterpret_cast<float*>(buf_.data()); }
    int32_t* i32() const { return reinterpret_cast<int32_t*>(buf_.data()); }

  private:
    gpu::DeviceBuffer buf_;
};

}  // namespace strata::test
