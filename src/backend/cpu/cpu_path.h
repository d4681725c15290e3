// Which instruction-set path the CPU kernels take, chosen once at run time from the CPU's
// features. The binary is portable (built without -march); SIMD kernels are compiled for their
// own target and only called when the CPU and OS support it.
//
// STRATA_CPU_PATH=scalar|avx2|avx512 forces a path (for testing and for comparing paths on one
// machine). A forced path the CPU cannot run falls back to the best one it can, with a warning
// on stderr; set_cpu_path() refuses it with an error instead.
#pragma once

#include <optional>
#include <string_view>

#include "util/result.h"

namespace strata::cpu {

enum class CpuPath {
    scalar,  // the reference kernels: portable C++
    avx2,    // AVX2 + FMA + F16C
    avx512,  // AVX-512 F/BW/VL + VNNI (on 256-bit registers where that suits the data)
};

inline constexpr CpuPath kAllCpuPaths[] = {CpuPath::scalar, CpuPath::avx2, CpuPath::avx512};

// The instruction-set features a path needs, as reported by the CPU (and enabled by the OS).
struct CpuFeatures {
    bool avx2_fma_f16c = false;
    bool avx512_vnni = false;  // avx512f, bw, vl and vnni together
};
CpuFeatures detect_cpu_features();

std::string_view cpu_path_name(CpuPath p);
std::optional<CpuPath> parse_cpu_path(std::string_view name);
bool cpu_path_runs_on(CpuPath p, const CpuFeatures& f);
CpuPath best_cpu_path(const CpuFeatures& f);

// The path for a STRATA_CPU_PATH value (nullptr or empty: the best path). An unknown name or a
// path the CPU lacks gives the best path it has and a warning in *warning.
CpuPath resolve_cpu_path(const char* requested, const CpuFeatures& f, std::string* warning);

// The path the kernels take now: from STRATA_CPU_PATH on first use, or set_cpu_path().
CpuPath active_cpu_path();
// Forces a path; an error (and no change) when this CPU cannot run it.
Result<void> set_cpu_path(CpuPath p);

}  // namespace strata::cpu
