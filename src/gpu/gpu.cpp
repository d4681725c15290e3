#include "gpu/gpu.h"

#include <filesystem>
#include <utility>

#if STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "util/units.h"

namespace strata::gpu {

std::string describe_devices() {
    const Devices& d = devices();
    if (d.list.empty()) return "GPU: none (" + d.reason + "): running on the CPU";
    std::string s;
    for (const DeviceInfo& g : d.list) {
        if (!s.empty()) s += "; ";
        s += "GPU " + std::to_string(g.index) + ": " + g.name + ", " +
             format_bytes(g.memory_total) + " (sm_" + std::to_string(g.cc_major) +
             std::to_string(g.cc_minor) + ")";
    }
    return s;
}

void DeviceBuffer::swap(DeviceBuffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(device_, o.device_);
}

void PinnedBuffer::swap(PinnedBuffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
}

#if STRATA_HAVE_CUDA

namespace {

Error cuda_error(const char* what, cudaError_t e) {
    return err(what, ": ", cudaGetErrorString(e));
}

Devices probe() {
    Devices out;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear the sticky error
        // Without a driver the runtime reports a version mismatch, which reads as if an upgrade
        // would help; say what is actually missing.
        if (!std::filesystem::exists("/proc/driver/nvidia/version")) {
            out.reason = "no NVIDIA driver is loaded";
        } else if (e == cudaErrorInsufficientDriver) {
            out.reason = "the NVIDIA driver is older than this build's CUDA runtime needs (" +
                         std::to_string(CUDART_VERSION / 1000) + "." +
                         std::to_string(CUDART_VERSION % 1000 / 10) + ")";
        } else {
            out.reason = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
        }
        return out;
    }
    if (count == 0) {
        out.reason = "no CUDA device";
        return out;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess || cudaSetDevice(i) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        DeviceInfo d;
        d.index = i;
        d.name = p.name;
        d.cc_major = p.major;
        d.cc_minor = p.minor;
        d.multiprocessors = p.multiProcessorCount;
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
            d.memory_free = free_b;
            d.memory_total = total_b;
        }
        out.list.push_back(std::move(d));
    }
    if (count > 0) cudaSetDevice(0);
    if (out.list.empty()) out.reason = "no CUDA device could be queried";
    return out;
}

cudaMemcpyKind to_cuda(CopyKind k) {
    switch (k) {
        case CopyKind::HostToDevice:
            return cudaMemcpyHostToDevice;
        case CopyKind::DeviceToHost:
            return cudaMemcpyDeviceToHost;
        case CopyKind::DeviceToDevice:
            return cudaMemcpyDeviceToDevice;
    }
    return cudaMemcpyDefault;
}

constexpr size_t kCopyEvents = 8;

}  // namespace

bool built_with_cuda() {
    return true;
}

const Devices& devices() {
    static const Devices d = probe();
    return d;
}

Result<MemoryInfo> memory_info(int device) {
    if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
        return cuda_error("cannot select the GPU", e);
    }
    size_t free_b = 0, total_b = 0;
    if (const cudaError_t e = cudaMemGetInfo(&free_b, &total_b); e != cudaSuccess) {
        return cuda_error("cannot read the GPU's free memory", e);
    }
    return MemoryInfo{free_b, total_b};
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, int device) {
    DeviceBuffer b;
    if (bytes == 0) return b;
    if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
        return cuda_error("cannot select the GPU", e);
    }
    void* p = nullptr;
    if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
        cudaGetLastError();
        return err("cannot allocate ", format_bytes(bytes),
                   " of GPU memory: ", cudaGetErrorString(e));
    }
    b.data_ = static_cast<std::byte*>(p);
    b.size_ = bytes;
    b.device_ = device;
    return b;
}

DeviceBuffer::~DeviceBuffer() {
    if (data_) cudaFree(data_);
}

Result<PinnedBuffer> PinnedBuffer::allocate(size_t bytes) {
    PinnedBuffer b;
    if (bytes == 0) return b;
    void* p = nullptr;
    if (const cudaError_t e = cudaMallocHost(&p, bytes); e != cudaSuccess) {
        cudaGetLastError();
        return err("cannot allocate ", format_bytes(bytes),
                   " of pinned host memory: ", cudaGetErrorString(e));
    }
    b.data_ = static_cast<std::byte*>(p);
    b.size_ = bytes;
    return b;
}

PinnedBuffer::~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);
}

Result<HostPin> HostPin::pin(void* data, size_t bytes) {
    HostPin h;
    if (bytes == 0) return h;
    if (const cudaError_t e = cudaHostRegister(data, bytes, cudaHostRegisterDefault);
        e != cudaSuccess) {
        cudaGetLastError();
        return err("cannot page-lock ", format_bytes(bytes),
                   " of host memory for the GPU: ", cudaGetErrorString(e));
    }
    h.data_ = data;
    return h;
}

HostPin::~HostPin() {
    if (data_) cudaHostUnregister(data_);
}

Result<void> copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
    if (bytes == 0) return {};
    if (const cudaError_t e = cudaMemcpy(dst, src, bytes, to_cuda(kind)); e != cudaSuccess) {
        return cuda_error("GPU copy failed", e);
    }
    if (kind == CopyKind::DeviceToDevice) return synchronize();
    return {};
}

Result<void> synchronize(int device) {
    if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
        return cuda_error("cannot select the GPU", e);
    }
    if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
        return cuda_error("GPU work failed", e);
    }
    return {};
}

Result<CopyQueue> CopyQueue::create(int device) {
    if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
        return cuda_error("cannot select the GPU", e);
    }
    CopyQueue q;
    cudaStream_t s = nullptr;
    if (const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        e != cudaSuccess) {
        return cuda_error("cannot create a copy stream", e);
    }
    q.stream_ = s;
    for (size_t i = 0; i < kCopyEvents; ++i) {
        cudaEvent_t ev = nullptr;
        if (const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
            e != cudaSuccess) {
            return cuda_error("cannot create a copy event", e);
        }
        q.events_.push_back(ev);
        q.event_ticket_.push_back(0);
    }
    return q;
}

CopyQueue::CopyQueue(CopyQueue&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)),
      events_(std::move(o.events_)),
      event_ticket_(std::move(o.event_ticket_)),
      next_(o.next_) {}

CopyQueue& CopyQueue::operator=(CopyQueue&& o) noexcept {
    CopyQueue t(std::move(o));
    std::swap(stream_, t.stream_);
    std::swap(events_, t.events_);
    std::swap(event_ticket_, t.event_ticket_);
    std::swap(next_, t.next_);
    return *this;
}

CopyQueue::~CopyQueue() {
    if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    for (void* ev : events_) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
    if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Result<uint64_t> CopyQueue::submit(void* device_dst, const void* pinned_src, size_t bytes) {
    const uint64_t ticket = ++next_;
    const size_t slot = ticket % events_.size();
    auto* s = static_cast<cudaStream_t>(stream_);
    auto* ev = static_cast<cudaEvent_t>(events_[slot]);
    // The event about to be reused marks an older copy: it must have finished first.
    if (event_ticket_[slot] != 0) {
        if (const cudaError_t e = cudaEventSynchronize(ev); e != cudaSuccess) {
            return cuda_error("a copy to the GPU failed", e);
        }
    }
    if (const cudaError_t e =
            cudaMemcpyAsync(device_dst, pinned_src, bytes, cudaMemcpyHostToDevice, s);
        e != cudaSuccess) {
        return cuda_error("cannot queue a copy to the GPU", e);
    }
    if (const cudaError_t e = cudaEventRecord(ev, s); e != cudaSuccess) {
        return cuda_error("cannot record a copy event", e);
    }
    event_ticket_[slot] = ticket;
    return ticket;
}

Result<void> CopyQueue::wait(uint64_t ticket) {
    const size_t slot = ticket % events_.size();
    if (event_ticket_[slot] != ticket) return drain();  // overwritten: a later copy is queued
    if (const cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(events_[slot]));
        e != cudaSuccess) {
        return cuda_error("a copy to the GPU failed", e);
    }
    return {};
}

Result<void> CopyQueue::drain() {
    if (!stream_) return {};
    if (const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
        e != cudaSuccess) {
        return cuda_error("a copy to the GPU failed", e);
    }
    return {};
}

#else  // built without CUDA

namespace {
Error no_cuda() {
    return err("this strata was built without CUDA (nvcc was not found when it was built)");
}
}  // namespace

bool built_with_cuda() {
    return false;
}

const Devices& devices() {
    static const Devices d{{}, "this build has no CUDA backend"};
    return d;
}

Result<MemoryInfo> memory_info(int) {
    return no_cuda();
}
Result<DeviceBuffer> DeviceBuffer::allocate(size_t, int) {
    return no_cuda();
}
DeviceBuffer::~DeviceBuffer() = default;
Result<PinnedBuffer> PinnedBuffer::allocate(size_t) {
    return no_cuda();
}
PinnedBuffer::~PinnedBuffer() = default;
Result<HostPin> HostPin::pin(void*, size_t) {
    return no_cuda();
}
HostPin::~HostPin() = default;
Result<void> copy(void*, const void*, size_t, CopyKind) {
    return no_cuda();
}
Result<void> synchronize(int) {
    return no_cuda();
}
Result<CopyQueue> CopyQueue::create(int) {
    return no_cuda();
}
CopyQueue::CopyQueue(CopyQueue&&) noexcept = default;
CopyQueue& CopyQueue::operator=(CopyQueue&&) noexcept = default;
CopyQueue::~CopyQueue() = default;
Result<uint64_t> CopyQueue::submit(void*, const void*, size_t) {
    return no_cuda();
}
Result<void> CopyQueue::wait(uint64_t) {
    return no_cuda();
}
Result<void> CopyQueue::drain() {
    return {};
}
Result<double> measure_read_bandwidth(const DeviceBuffer&, int) {
    return no_cuda();
}

#endif

}  // namespace strata::gpu
