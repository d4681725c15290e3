#include "profile/gpu_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "gpu/gpu.h"
#include "io/aligned_buffer.h"
#include "util/units.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes per second of `repeats` copies of `bytes` (after one warm-up copy), or 0 on failure with
// the reason in `why`.
double time_copies(void* dst, const void* src, size_t bytes, gpu::CopyKind kind, int repeats,
                   std::string& why) {
    Result<void> r = gpu::copy(dst, src, bytes, kind);
    if (r) r = gpu::synchronize();
    const auto start = Clock::now();
    for (int i = 0; i < repeats && r; ++i) r = gpu::copy(dst, src, bytes, kind);
    if (r) r = gpu::synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (!r) {
        why = r.error().message;
        return 0;
    }
    return static_cast<double>(bytes) * repeats / s;
}

void append(std::string& note, const std::string& what) {
    note += (note.empty() ? "" : "; ") + what;
}

void measure_one(GpuProfile& g, bool quick) {
    size_t copy_bytes = quick ? (64u << 20) : (size_t{1} << 30);
    copy_bytes = std::min(copy_bytes, static_cast<size_t>(align_down(g.memory_free / 4, 1 << 20)));
    const size_t h2d_bytes = std::min<size_t>(quick ? (32u << 20) : (256u << 20), copy_bytes);
    if (copy_bytes == 0) {
        g.note = "too little free GPU memory to measure bandwidth";
        return;
    }
    auto a = gpu::DeviceBuffer::allocate(copy_bytes, g.index);
    auto b = gpu::DeviceBuffer::allocate(copy_bytes, g.index);
    if (!a || !b) {
        append(g.note, (a ? b : a).error().message);
        return;
    }
    std::string why;
    // Counts the bytes read and the bytes written, like memory bandwidth figures.
    g.device_copy_bandwidth = 2 * time_copies(b->data(), a->data(), copy_bytes,
                                              gpu::CopyKind::DeviceToDevice, quick ? 3 : 10, why);
    if (!why.empty()) append(g.note, "device copy: " + why);
    // What decode is bound by: each weight byte read once.
    if (auto r = gpu::measure_read_bandwidth(*a, quick ? 3 : 10)) {
        g.read_bandwidth = *r;
    } else {
        append(g.note, "device read: " + r.error().message);
    }
    if (auto pinned = gpu::PinnedBuffer::allocate(h2d_bytes)) {
        std::memset(pinned->data(), 1, h2d_bytes);
        why.clear();
        g.host_to_device_pinned_bandwidth = time_copies(
            a->data(), pinned->data(), h2d_bytes, gpu::CopyKind::HostToDevice, quick ? 2 : 5, why);
        if (!why.empty()) append(g.note, "pinned host-to-device: " + why);
    } else {
        append(g.note, pinned.error().message);
    }
    std::vector<unsigned char> pageable(h2d_bytes, 1);
    why.clear();
    g.host_to_device_pageable_bandwidth = time_copies(
        a->data(), pageable.data(), h2d_bytes, gpu::CopyKind::HostToDevice, quick ? 2 : 3, why);
    if (!why.empty()) append(g.note, "pageable host-to-device: " + why);
}

GpuProbe probe(bool measure, bool quick, const std::function<void(int, int)>& on_gpu) {
    GpuProbe out;
    const gpu::Devices& devices = gpu::devices();
    out.note = devices.reason;
    const int count = int(devices.list.size());
    for (const gpu::DeviceInfo& d : devices.list) {
        if (on_gpu) on_gpu(d.index, count);
        GpuProfile g;
        g.index = d.index;
        g.name = d.name;
        g.memory_total = d.memory_total;
        g.memory_free = d.memory_free;
        if (auto now = gpu::memory_info(d.index)) g.memory_free = now->free;
        if (measure) measure_one(g, quick);
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
