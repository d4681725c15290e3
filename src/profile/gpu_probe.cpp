#include "profile/gpu_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "io/aligned_buffer.h"
#include "util/units.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// The few runtime entry points used, with the C ABI of cuda_runtime_api.h (cudaError_t is an int
// enum; 0 is success). Their signatures have been stable since CUDA 4.
constexpr int kMemcpyHostToDevice = 1;
constexpr int kMemcpyDeviceToDevice = 3;

// Loaded once and never unloaded: the runtime registers exit handlers, and unloading it after
// use crashes at exit.
class CudaRuntime {
  public:
    static const CudaRuntime& get() {
        static CudaRuntime* rt = [] {
            auto* r = new CudaRuntime();
            r->load_error = r->load();
            return r;
        }();
        return *rt;
    }

    std::string load_error;  // empty when the runtime is usable

  private:
    CudaRuntime() = default;

    // Empty string on success, else why the runtime cannot be used.
    std::string load() {
        for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
            handle_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (handle_) break;
        }
        if (!handle_) {
            if (std::filesystem::exists("/proc/driver/nvidia/version")) {
                return "an NVIDIA driver is loaded but no CUDA runtime library (libcudart.so.13 "
                       "or .12) was found; install the CUDA runtime to use the GPU";
            }
            return "no CUDA runtime found (libcudart)";
        }
        bool ok = sym("cudaGetDeviceCount", get_device_count) && sym("cudaSetDevice", set_device) &&
                  sym("cudaMemGetInfo", mem_get_info) && sym("cudaMalloc", malloc_device) &&
                  sym("cudaFree", free_device) && sym("cudaMallocHost", malloc_host) &&
                  sym("cudaFreeHost", free_host) && sym("cudaMemcpy", memcpy) &&
                  sym("cudaDeviceSynchronize", synchronize) &&
                  sym("cudaGetErrorString", error_string);
        // CUDA 12 renamed the entry point for its larger cudaDeviceProp; CUDA 13 dropped the _v2.
        ok = ok && (sym("cudaGetDeviceProperties_v2", get_properties) ||
                    sym("cudaGetDeviceProperties", get_properties));
        if (!ok) return "the CUDA runtime library lacks expected functions";
        return {};
    }

  public:
    std::string describe(int code) const {
        const char* s = error_string ? error_string(code) : nullptr;
        return s ? s : "CUDA error " + std::to_string(code);
    }

    int (*get_device_count)(int*) = nullptr;
    int (*set_device)(int) = nullptr;
    int (*get_properties)(void*, int) = nullptr;
    int (*mem_get_info)(size_t*, size_t*) = nullptr;
    int (*malloc_device)(void**, size_t) = nullptr;
    int (*free_device)(void*) = nullptr;
    int (*malloc_host)(void**, size_t) = nullptr;
    int (*free_host)(void*) = nullptr;
    int (*memcpy)(void*, const void*, size_t, int) = nullptr;
    int (*synchronize)() = nullptr;
    const char* (*error_string)(int) = nullptr;

  private:
    template <typename Fn>
    bool sym(const char* name, Fn& fn) {
        void* p = ::dlsym(handle_, name);
        if (!p) return false;
        fn = reinterpret_cast<Fn>(p);
        return true;
    }

    void* handle_ = nullptr;
};

// Bytes per second of `repeats` copies of `bytes` (after one warm-up copy), or 0 on failure with
// the reason in `why`.
double time_copies(const CudaRuntime& rt, void* dst, const void* src, size_t bytes, int kind,
                   int repeats, std::string& why) {
    int rc = rt.memcpy(dst, src, bytes, kind);
    if (rc == 0) rc = rt.synchronize();
    const auto start = Clock::now();
    for (int i = 0; i < repeats && rc == 0; ++i) rc = rt.memcpy(dst, src, bytes, kind);
    if (rc == 0) rc = rt.synchronize();  // device-to-device copies return before they finish
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (rc != 0) {
        why = rt.describe(rc);
        return 0;
    }
    return static_cast<double>(bytes) * repeats / s;
}

void append(std::string& note, const std::string& what) {
    note += (note.empty() ? "" : "; ") + what;
}

void measure_one(const CudaRuntime& rt, GpuProfile& g, bool quick) {
    const size_t free_bytes = g.memory_free;
    size_t copy_bytes = quick ? (64u << 20) : (size_t{1} << 30);
    copy_bytes = std::min(copy_bytes, static_cast<size_t>(align_down(free_bytes / 4, 1 << 20)));
    const size_t h2d_bytes = std::min<size_t>(quick ? (32u << 20) : (256u << 20), copy_bytes);
    if (copy_bytes == 0) {
        g.note = "too little free GPU memory to measure bandwidth";
        return;
    }
    void* a = nullptr;
    void* b = nullptr;
    int rc = rt.malloc_device(&a, copy_bytes);
    if (rc == 0) rc = rt.malloc_device(&b, copy_bytes);
    if (rc != 0) {
        append(g.note,
               "cannot allocate " + format_bytes(copy_bytes) + " twice: " + rt.describe(rc));
    } else {
        std::string why;
        // Counts the bytes read and the bytes written, like memory bandwidth figures.
        g.device_copy_bandwidth =
            2 * time_copies(rt, b, a, copy_bytes, kMemcpyDeviceToDevice, quick ? 3 : 10, why);
        if (!why.empty()) append(g.note, "device copy: " + why);

        void* pinned = nullptr;
        rc = rt.malloc_host(&pinned, h2d_bytes);
        if (rc != 0) {
            append(g.note, "cannot allocate pinned memory: " + rt.describe(rc));
        } else {
            std::memset(pinned, 1, h2d_bytes);
            why.clear();
            g.host_to_device_pinned_bandwidth =
                time_copies(rt, a, pinned, h2d_bytes, kMemcpyHostToDevice, quick ? 2 : 5, why);
            if (!why.empty()) append(g.note, "pinned host-to-device: " + why);
            rt.free_host(pinned);
        }
        std::vector<unsigned char> pageable(h2d_bytes, 1);
        why.clear();
        g.host_to_device_pageable_bandwidth =
            time_copies(rt, a, pageable.data(), h2d_bytes, kMemcpyHostToDevice, quick ? 2 : 3, why);
        if (!why.empty()) append(g.note, "pageable host-to-device: " + why);
    }
    if (a) rt.free_device(a);
    if (b) rt.free_device(b);
}

GpuProbe probe(bool measure, bool quick, const std::function<void(int, int)>& on_gpu) {
    GpuProbe out;
    const CudaRuntime& rt = CudaRuntime::get();
    out.note = rt.load_error;
    if (!out.note.empty()) return out;
    int count = 0;
    const int rc = rt.get_device_count(&count);
    if (rc != 0) {
        // Without a driver the runtime reports a driver version mismatch, which reads as if an
        // upgrade would help; say what is actually missing.
        out.note = std::filesystem::exists("/proc/driver/nvidia/version")
                       ? "no usable CUDA device: " + rt.describe(rc)
                       : "no NVIDIA driver is loaded";
        return out;
    }
    if (count == 0) {
        out.note = "no CUDA device";
        return out;
    }
    for (int i = 0; i < count; ++i) {
        if (on_gpu) on_gpu(i, count);
        GpuProfile g;
        g.index = i;
        int e = rt.set_device(i);
        // cudaDeviceProp begins with char name[256] in every CUDA version; the buffer is larger
        // than any version's struct, so the rest of the layout does not matter here.
        std::vector<char> props(16384, 0);
        if (e == 0) e = rt.get_properties(props.data(), i);
        if (e == 0) g.name.assign(props.data(), strnlen(props.data(), 256));
        size_t free_bytes = 0, total_bytes = 0;
        if (e == 0) e = rt.mem_get_info(&free_bytes, &total_bytes);
        if (e != 0) {
            g.note = "cannot query the device: " + rt.describe(e);
            out.gpus.push_back(std::move(g));
            continue;
        }
        g.memory_total = total_bytes;
        g.memory_free = free_bytes;
        if (measure) measure_one(rt, g, quick);
        out.gpus.push_back(std::move(g));
    }
    return out;
}

}  // namespace

GpuProbe list_gpus() {
    return probe(false, false, nullptr);
}

GpuProbe measure_gpus(bool quick, const std::function<void(int, int)>& on_gpu) {
    return probe(true, quick, on_gpu);
}

}  // namespace strata
