// The GPU runtime: which CUDA devices this process can use, device and pinned host memory, and
// copies between them. No kernels live here (those are the CUDA backend's, backend/cuda/); this
// is what the profile, the store and the backend all need to talk to the device.
//
// The CUDA runtime is linked statically, so the binary has no link-time dependency on CUDA: on a
// machine without an NVIDIA driver (or a build without nvcc) devices() is empty and its reason
// says why, in one line a user can act on, and everything else works on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace strata::gpu {

struct DeviceInfo {
    int index = 0;
    std::string name;
    uint64_t memory_total = 0;
    uint64_t memory_free = 0;  // when the process first looked
    int cc_major = 0, cc_minor = 0;
    int multiprocessors = 0;
};

struct Devices {
    std::vector<DeviceInfo> list;
    std::string reason;  // why `list` is empty: "no NVIDIA driver is loaded", ...
};

// True when this build has the CUDA backend (nvcc was found when it was built).
bool built_with_cuda();
// The devices, probed once per process (cheap: no measurement).
const Devices& devices();
// "GPU: none (no NVIDIA driver is loaded): running on the CPU" or "GPU 0: NVIDIA H200, 139.8 GiB".
std::string describe_devices();

// Free and total bytes of a device now.
struct MemoryInfo {
    uint64_t free = 0, total = 0;
};
Result<MemoryInfo> memory_info(int device);

// Device memory, freed when the value goes away.
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    static Result<DeviceBuffer> allocate(size_t bytes, int device = 0);
    DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        DeviceBuffer t(std::move(o));
        swap(t);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer();

    std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    int device() const { return device_; }

  private:
    void swap(DeviceBuffer& o) noexcept;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
    int device_ = 0;
};

// Page-locked host memory: the GPU copies from it at full bus speed, and asynchronously.
class PinnedBuffer {
  public:
    PinnedBuffer() = default;
    static Result<PinnedBuffer> allocate(size_t bytes);
    PinnedBuffer(PinnedBuffer&& o) noexcept { swap(o); }
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        PinnedBuffer t(std::move(o));
        swap(t);
        return *this;
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer();

    std::byte* data() const { return data_; }
    size_t size() const { return size_; }

  private:
    void swap(PinnedBuffer& o) noexcept;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
};

// Host memory allocated elsewhere, page-locked for as long as this lives (cudaHostRegister):
// the GPU copies from it at full bus speed, asynchronously.
class HostPin {
  public:
    HostPin() = default;
    static Result<HostPin> pin(void* data, size_t bytes);
    HostPin(HostPin&& o) noexcept { std::swap(data_, o.data_); }
    HostPin& operator=(HostPin&& o) noexcept {
        HostPin t(std::move(o));
        std::swap(data_, t.data_);
        return *this;
    }
    HostPin(const HostPin&) = delete;
    HostPin& operator=(const HostPin&) = delete;
    ~HostPin();

    bool pinned() const { return data_ != nullptr; }

  private:
    void* data_ = nullptr;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// A copy that has finished when it returns.
Result<void> copy(void* dst, const void* src, size_t bytes, CopyKind kind);
Result<void> synchronize(int device = 0);

// Host-to-device copies queued on their own stream, so the host can fill the next staging
// buffer while the last one crosses the bus. Each submit returns a ticket; wait(ticket) returns
// once that copy (and every one before it) is done, so its source may be reused.
class CopyQueue {
  public:
    static Result<CopyQueue> create(int device = 0);
    CopyQueue() = default;
    CopyQueue(CopyQueue&& o) noexcept;
    CopyQueue& operator=(CopyQueue&& o) noexcept;
    CopyQueue(const CopyQueue&) = delete;
    CopyQueue& operator=(const CopyQueue&) = delete;
    ~CopyQueue();

    Result<uint64_t> submit(void* device_dst, const void* pinned_src, size_t bytes);
    Result<void> wait(uint64_t ticket);
    Result<void> drain();

  private:
    void* stream_ = nullptr;              // cudaStream_t
    std::vector<void*> events_;           // cudaEvent_t, a ring
    std::vector<uint64_t> event_ticket_;  // the ticket each event marks
    uint64_t next_ = 0;
};

// Bytes per second a kernel reads `bytes` of device memory at (each byte read once, summed as a
// reduction so nothing is written), the best of `repeats` runs.
Result<double> measure_read_bandwidth(const DeviceBuffer& buf, int repeats);

}  // namespace strata::gpu
