// Read bandwidth of RAM: how fast `threads` threads stream through a buffer far larger than the
// last-level cache. This is the ceiling for CPU decode of RAM-resident weights, so the test reads
// the way a matrix-vector product does: sequentially, every byte once, with wide loads.
#pragma once

#include <cstdint>

#include "util/result.h"

namespace strata {

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

}  // namespace strata
