// Host data to the GPU and back, for the CUDA tests: each copy is checked, and a download waits
// for the work queued before it; random values and F32 weights held on both sides.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gpu/gpu.h"
#include "model/tensor_view.h"

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

// `count` normal values (mean `shift`, deviation `scale`) from `seed`.
inline std::vector<float> randn(size_t count, uint32_t seed, float scale = 1.0f,
                                float shift = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(count);
    for (float& v : x) v = shift + scale * nd(rng);
    return x;
}

// An F32 matrix of values.size() / cols rows x cols in host memory and its copy in GPU memory,
// with a view of each (for the CPU backend and the CUDA one).
struct HostDeviceWeight {
    std::vector<float> host;
    gpu::DeviceBuffer device;
    TensorView host_view, device_view;
};

inline HostDeviceWeight host_device_weight(std::vector<float> values, int64_t cols) {
    HostDeviceWeight w;
    w.host = std::move(values);
    w.device = upload(w.host.data(), w.host.size() * sizeof(float));
    TensorView v;
    v.type = TensorType::F32;
    v.ne = {cols, int64_t(w.host.size()) / cols, 1, 1};
    v.row_bytes = size_t(cols) * sizeof(float);
    w.host_view = v;
    w.host_view.data = reinterpret_cast<const std::byte*>(w.host.data());
    w.device_view = v;
    w.device_view.data = w.device.data();
    w.device_view.where = {MemoryKind::Device, 0};
    return w;
}

}  // namespace strata::test
