// The hardware profile: what the placement plan needs to know about the machine — cores and SIMD,
// RAM and its read bandwidth, GPUs and their bandwidths, and the read bandwidth of the disk that
// holds the models at the block sizes and queue depths the store uses. Measured once and cached
// as JSON in the user's cache directory; re-measured after 30 days, or on request.
//
// JSON (one object; sizes in bytes, rates in bytes per second, times in seconds):
// {
//   "schema": 1, "strata_version": "0.1.0", "measured_at": "2025-01-31T12:00:00Z",
//   "quick": false,                       true: reduced sizes (--quick), rough figures
//   "cpu": {"model", "physical_cores", "logical_cpus", "simd": ["avx2", "fma", ...]},
//   "memory": {"total", "available", "system_total", "cgroup_limit": int | null,
//              "read_bandwidth", "single_thread_read_bandwidth", "threads", "buffer"},
//   "gpus": [{"index", "name", "memory_total", "memory_free", "device_copy_bandwidth",
//             "host_to_device_pinned_bandwidth", "host_to_device_pageable_bandwidth",
//             "note"}],
//   "gpu_note": string,                   why there is no GPU entry; "" when there are GPUs
//   "disks": [{"dir", "mount_point", "fs_type", "source", "device", "model", "rotational",
//              "measured_at", "method": "scratch" | "existing-file" | "none", "file",
//              "file_size", "direct", "backend", "block_size", "write_bandwidth": num | null,
//              "reads": [{"block", "queue_depth", "bandwidth", "iops", "bytes", "seconds"}],
//              "note"}],
//   "cpu_kernels": {"cpu_model", "simd", "threads", "quick", "decode_bytes", "seconds",
//                   "busy_choices", "table": backend/kernel_choice.h's kernel_table_json}
// }
// device_copy_bandwidth counts bytes read plus bytes written, as memory bandwidth figures do.
// cpu_kernels is absent in profiles written before it existed; it is then measured on first use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/kernel_choice.h"
#include "io/block_device.h"
#include "util/result.h"

namespace strata {

inline constexpr int kProfileSchema = 1;
inline constexpr int64_t kProfileMaxAgeSeconds = 30LL * 24 * 3600;

struct CpuProfile {
    std::string model;
    int physical_cores = 0;
    int logical_cpus = 0;           // CPUs this process may run on
    std::vector<std::string> simd;  // usable features (CPU and OS agree), e.g. "avx2", "avx512f"
};

struct MemoryProfile {
    uint64_t total = 0;         // RAM this process may use: MemTotal, or the cgroup limit if lower
    uint64_t available = 0;     // MemAvailable, within the cgroup limit
    uint64_t system_total = 0;  // MemTotal
    std::optional<uint64_t> cgroup_limit;
    double read_bandwidth = 0;  // bytes/s, `threads` threads reading a buffer >> last-level cache
    double single_thread_read_bandwidth = 0;
    int threads = 0;
    uint64_t buffer = 0;  // size of the buffer read
};

struct GpuProfile {
    int index = 0;
    std::string name;
    uint64_t memory_total = 0;
    uint64_t memory_free = 0;
    double device_copy_bandwidth = 0;  // read + write bytes per second of a device-to-device copy
    double read_bandwidth = 0;         // bytes per second a kernel reads device memory at
    double host_to_device_pinned_bandwidth = 0;
    double host_to_device_pageable_bandwidth = 0;
    std::string note;  // what could not be measured, if anything
};

struct DiskReadRate {
    uint32_t block = 0;  // bytes per read
    uint32_t queue_depth = 0;
    double bandwidth = 0;  // bytes/s
    double iops = 0;
    uint64_t bytes = 0;  // bytes read for the figure
    double seconds = 0;
};

struct DiskProfile {
    std::string dir;  // the directory the disk was measured for
    std::string mount_point, fs_type, source, device, model;
    bool rotational = false;
    std::string measured_at;
    std::string method = "none";  // "scratch", "existing-file" or "none" (see note)
    std::string file;             // the existing file read, for "existing-file"
    uint64_t file_size = 0;
    bool direct = false;
    std::string backend;
    uint32_t block_size = 0;
    std::optional<double> write_bandwidth;  // sequential O_DIRECT write of the scratch file
    std::vector<DiskReadRate> reads;
    std::string note;

    // The measured rate closest to (block, queue_depth): same block size and the deepest queue
    // not deeper than asked; null when nothing was measured at that block size.
    const DiskReadRate* rate(uint32_t block, uint32_t queue_depth) const;
};

// The CPU kernels measured fastest per weight type and phase (cpu_kernel_timing.h), and the CPU
// they were measured on: a profile whose CPU model or features differ from this machine's has its
// table measured again.
struct CpuKernelProfile {
    std::string cpu_model;
    std::vector<std::string> simd;
    int threads = 0;            // threads the products ran on (the engine's: physical cores)
    bool quick = false;         // fewer passes (--quick)
    uint64_t decode_bytes = 0;  // weights of the matrix decode and batches were timed on
    double seconds = 0;         // the measurement took
    // Choices timed while other work had the cores (cpu_kernel_timing.h): left to the widest path.
    int busy_choices = 0;
    CpuKernelTable table;
};

struct HardwareProfile {
    int schema = kProfileSchema;
    std::string strata_version;
    std::string measured_at;  // ISO 8601 UTC, "2025-01-31T12:00:00Z"
    bool quick = false;
    CpuProfile cpu;
    MemoryProfile memory;
    std::vector<GpuProfile> gpus;
    std::string gpu_note;
    std::vector<DiskProfile> disks;
    std::optional<CpuKernelProfile> cpu_kernels;

    // The disk entry for the filesystem holding a directory, or null.
    const DiskProfile* disk_for(const StorageInfo& storage) const;
};

nlohmann::json profile_to_json(const HardwareProfile& p);
// An error names what is missing or malformed, so a damaged cache can be reported and replaced.
Result<HardwareProfile> profile_from_json(const nlohmann::json& j);

// "2025-01-31T12:00:00Z" <-> seconds since the epoch.
std::string format_utc(int64_t unix_seconds);
std::optional<int64_t> parse_utc(const std::string& text);
int64_t unix_now();

// Older than kProfileMaxAgeSeconds, dated in the future (the clock moved), or undated.
bool profile_is_stale(const HardwareProfile& p, int64_t now);

}  // namespace strata
