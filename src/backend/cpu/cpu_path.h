// The instruction-set paths the CPU kernels come in, and the CPU features each needs. The binary
// is portable (built without -march); SIMD kernels are compiled for their own target and only
// called when the CPU and OS support it.
//
// Which path a product takes is chosen per call, by the type of its weights and its phase, from
// the kernel table the hardware profile measured (kernel_table.h). The cpu_path setting
// (Tuning::cpu_path, `--tune cpu_path=scalar|avx2|avx512`) forces one path for everything
// instead (for testing and for comparing paths on one machine). A forced path the CPU cannot run
// falls back to the best one it can, with a warning on stderr; set_cpu_path() refuses it with an
// error instead.
//
// The forced path and the table are process state, not a backend's: every kernel call (matmul.h,
// from the backends' operations and from attention's tasks alike) reads them, and threading them
// through each of those calls would change every kernel's signature for a choice that is one per
// process in practice. So the CPU backend sets a forced path, or installs the profile's table,
// when it is created (cpu_backend.cpp); the default setting with no table leaves both as they
// are.
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

// The path for a cpu_path setting's name (nullptr or empty: the best path). An unknown name or
// a path the CPU lacks gives the best path it has and a warning in *warning.
CpuPath resolve_cpu_path(const char* requested, const CpuFeatures& f, std::string* warning);

// The forced path if there is one (set_cpu_path, select_cpu_path), else the best this CPU runs:
// the path of every product the kernel table has no entry for.
CpuPath active_cpu_path();
// The forced path; nullopt when products dispatch by the kernel table.
std::optional<CpuPath> forced_cpu_path();
// Back to dispatch by the kernel table (install_kernel_table does this too).
void clear_forced_cpu_path();
// Forces a path; an error (and no change) when this CPU cannot run it.
Result<void> set_cpu_path(CpuPath p);
// Forces the path resolve_cpu_path gives for `requested` on this CPU, its warning (if any)
// printed on stderr.
void select_cpu_path(const char* requested);

}  // namespace strata::cpu
