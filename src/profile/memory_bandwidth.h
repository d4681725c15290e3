// Read bandwidth of RAM: how fast `threads` threads stream through a buffer far larger than the
// last-level cache. This is the ceiling for CPU decode of RAM-resident weights, so the test reads
// the way a matrix-vector product does: sequentially, every byte once, with wide loads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/result.h"

namespace strata {

class ThreadPool;

struct MemoryBandwidth {
    double multi_thread = 0;   // bytes/s, best run
    double single_thread = 0;  // bytes/s, best run
    int threads = 0;
    uint64_t buffer = 0;
};

// Buffer size for the test: four times the last-level cache, at least 256 MiB, at most a quarter
// of available RAM and 2 GiB.
uint64_t memory_test_buffer_bytes(uint64_t last_level_cache, uint64_t available_ram);

Result<MemoryBandwidth> measure_memory_bandwidth(uint64_t buffer_bytes, int threads, int runs);

// The read ceiling of `bytes` at `data` (already touched, larger than the caches) for the pool's
// threads, read the way the matmul kernels read weights: 1 MiB chunks handed out dynamically,
// 64-bit sums with eight accumulators, a software prefetch 4 KiB ahead. Best of `passes`, in
// bytes/s. The benchmarks report speeds as a fraction of this figure.
double measure_read_ceiling(const std::byte* data, size_t bytes, ThreadPool& pool, int passes = 4);

}  // namespace strata
