// What the CPU is and what it can run: model name, cores, the SIMD extensions the kernels
// dispatch on, and the size of the last-level cache (so bandwidth tests read well past it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/hardware_profile.h"

namespace strata {

struct SimdFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false,
         avx512bf16 = false;
    bool avx_vnni = false;

    // Names as /proc/cpuinfo spells them ("avx2", "avx512_vnni", "avx_vnni"), present ones only.
    std::vector<std::string> names() const;
};

// From cpuid, counting an extension only when the OS also saves its registers (XCR0), since
// executing it otherwise faults. All false on other architectures.
SimdFeatures detect_simd();

// "model name" from /proc/cpuinfo, else the cpuid brand string, else "unknown".
std::string cpu_model_name();
// CPUs this process may run on (affinity mask).
int logical_cpu_count();
// Largest CPU cache in bytes (sysfs cache/index*/size), 0 when unknown.
uint64_t last_level_cache_bytes();

CpuProfile detect_cpu();

}  // namespace strata
