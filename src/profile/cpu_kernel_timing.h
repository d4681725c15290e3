// Timing the CPU kernels: for every weight type with a fast kernel on more than one of the paths
// this CPU runs (AVX2, AVX-512; the scalar reference is never a candidate), each path's products
// through the real entry point (backend/cpu/matmul.h's matmul_on_path, the path forced per call)
// on the engine's thread count, in each phase (backend/kernel_choice.h):
//   - decode (1 column) and batch (4 columns) on a matrix larger than the last-level cache, read
//     from RAM as a model's weights are: bytes of weights per second;
//   - prompt (64 columns) on a matrix of 1024 rows, mostly in cache: flop/s.
// The paths' passes alternate, so a slow moment of a shared machine costs each path alike. A
// pass counts when the threads had their cores (process CPU time against wall time), and a
// path's best counting pass once a second one confirms it; more passes are taken, up to three
// times as many, until they do. Where they never do (a machine busy with other work) the
// figures are kept but the widest path keeps the choice (CpuKernelProfile::busy_choices counts
// them), so that noise never moves a choice.
// A few seconds in all (`strata profile`; --quick takes fewer passes).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/kernel_choice.h"
#include "profile/hardware_profile.h"
#include "util/result.h"

namespace strata {

inline constexpr double kKernelTieMargin = 0.05;

struct CpuKernelTimingOptions {
    int threads = 1;
    uint64_t decode_bytes = 64ull << 20;  // weights of the decode and batch matrix
    int passes = 4;      // timed passes per path and phase at least, after a warm-up (see above)
    bool quick = false;  // recorded in the profile (--quick)
};

// Full: a decode matrix of twice the last-level cache, 128 to 256 MiB (128 MiB when the cache
// size is unknown), 4 passes: some 3 seconds on 2 cores of a Zen 5 EPYC, whose figures at
// 64 MiB were still up to 1.3x those at 256 MiB (part of it served by the cache). Quick:
// 64 MiB, 2 passes, about a second, rough decode figures.
CpuKernelTimingOptions cpu_kernel_timing_options(bool quick, int threads,
                                                 uint64_t last_level_cache);

// The weight types timed on this CPU, in type order; empty when it runs fewer than two fast
// paths.
std::vector<TensorType> timed_kernel_types();

// The winning path among `timings` (by kKernelTieMargin and `widest`, as above).
CpuPathChoice pick_kernel_path(std::span<const KernelTiming> timings, CpuPathChoice widest);

// Times every type of timed_kernel_types(); `on_type(t, i, n)` is called before the i-th of n.
Result<CpuKernelProfile> measure_cpu_kernels(
    const CpuKernelTimingOptions& options,
    const std::function<void(TensorType, int, int)>& on_type = {});

// The CPU now is not the one the table was measured on (model name or SIMD features differ).
bool cpu_kernels_measured_elsewhere(const CpuKernelProfile& kernels, const CpuProfile& cpu);

}  // namespace strata
