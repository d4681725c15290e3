#include "profile/cpu_kernel_timing.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_path.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/matmul.h"
#include "io/aligned_buffer.h"
#include "profile/cpu_info.h"
#include "quant/quant.h"
#include "util/thread_pool.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// Row length of every matrix timed: a whole number of blocks of every type, and a typical
// model width.
constexpr int64_t kCols = 4096;
// Rows of the prompt matrix: 2 to 16 MiB of weights, mostly in cache, so that the arithmetic
// is timed rather than the reads.
constexpr int64_t kPromptRows = 1024;
// Rows quantized once and copied over the whole decode matrix (a matrix of random rows would
// take longer to quantize than to time; what the reads cost does not depend on the values).
constexpr int64_t kPatternRows = 64;

// The paths with fast kernels this CPU runs, narrowest first.
std::vector<cpu::CpuPath> fast_paths() {
    std::vector<cpu::CpuPath> out;
    const cpu::CpuFeatures f = cpu::detect_cpu_features();
    for (const cpu::CpuPath p : cpu::kAllCpuPaths) {
        if (p != cpu::CpuPath::scalar && cpu::cpu_path_runs_on(p, f)) out.push_back(p);
    }
    return out;
}

// Fills `rows` rows of type t at `data` with a pattern of random rows.
void fill_weights(TensorType t, std::byte* data, int64_t rows, size_t row_bytes) {
    std::mt19937 rng(uint32_t(t) + 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(kCols));
    const int64_t pattern = std::min(rows, kPatternRows);
    for (int64_t r = 0; r < pattern; ++r) {
        for (float& v : values) v = normal(rng);
        quant::quantize_row(t, values.data(), data + size_t(r) * row_bytes, kCols);
    }
    for (int64_t r = pattern; r < rows; r += pattern) {
        const int64_t n = std::min(pattern, rows - r);
        std::memcpy(data + size_t(r) * row_bytes, data, size_t(n) * row_bytes);
    }
}

// The best of `passes` timings of each path's product W X^T (n columns), the paths taking turns;
// after one untimed product each. Seconds, in the order of `paths`.
std::vector<double> best_seconds(const std::vector<cpu::CpuPath>& paths, const cpu::QuantMatrix& W,
                                 const float* X, float* Y, int64_t n, int passes,
                                 ThreadPool& pool) {
    std::vector<double> best(paths.size(), 1e30);
    for (const cpu::CpuPath p : paths) cpu::matmul_on_path(p, W, X, Y, n, pool);
    for (int pass = 0; pass < passes; ++pass) {
        for (size_t i = 0; i < paths.size(); ++i) {
            const auto t0 = Clock::now();
            cpu::matmul_on_path(paths[i], W, X, Y, n, pool);
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            best[i] = std::min(best[i], s);
        }
    }
    return best;
}

}  // namespace

CpuKernelTimingOptions cpu_kernel_timing_options(bool quick, int threads,
                                                 uint64_t last_level_cache) {
    constexpr uint64_t kMin = 128ull << 20, kMax = 256ull << 20, kQuick = 64ull << 20;
    CpuKernelTimingOptions o;
    o.threads = std::max(threads, 1);
    o.decode_bytes = quick ? kQuick : std::clamp<uint64_t>(2 * last_level_cache, kMin, kMax);
    o.quick = quick;
    o.passes = quick ? 2 : 4;
    return o;
}

std::vector<TensorType> timed_kernel_types() {
    const std::vector<cpu::CpuPath> paths = fast_paths();
    std::vector<TensorType> out;
    for (const TensorType t : kAllTensorTypes) {
        if (!cpu::matmul_supports(t)) continue;
        const auto fast = std::count_if(paths.begin(), paths.end(), [&](cpu::CpuPath p) {
            return cpu::matmul_kernel_name(p, t) != "scalar";
        });
        if (fast >= 2) out.push_back(t);
    }
    return out;
}

CpuPathChoice pick_kernel_path(std::span<const KernelTiming> timings, CpuPathChoice widest) {
    const KernelTiming* best = nullptr;
    const KernelTiming* wide = nullptr;
    for (const KernelTiming& k : timings) {
        if (!best || k.figure > best->figure) best = &k;
        if (k.path == widest) wide = &k;
    }
    if (!best) return widest;
    if (wide && wide->figure * (1 + kKernelTieMargin) >= best->figure) return widest;
    return best->path;
}

Result<CpuKernelProfile> measure_cpu_kernels(
    const CpuKernelTimingOptions& options,
    const std::function<void(TensorType, int, int)>& on_type) {
    const auto start = Clock::now();
    const std::vector<cpu::CpuPath> paths = fast_paths();
    const std::vector<TensorType> types = timed_kernel_types();
    CpuKernelProfile out;
    out.cpu_model = cpu_model_name();
    out.simd = detect_simd().names();
    out.threads = std::max(options.threads, 1);
    out.quick = options.quick;
    out.decode_bytes = options.decode_bytes;
    out.table.widest = cpu::cpu_path_choice(cpu::best_cpu_path(cpu::detect_cpu_features()));
    if (types.empty()) return out;

    STRATA_ASSIGN(AlignedBuffer weights, AlignedBuffer::allocate(options.decode_bytes));
    // Huge pages, as large weight buffers get them.
    ::madvise(weights.data(), weights.size(), MADV_HUGEPAGE);
    constexpr int64_t kMaxColumns = kernel_phase_timed_columns(KernelPhase::Prompt);
    std::vector<float> x(size_t(kCols * kMaxColumns));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    std::vector<float> y;
    ThreadPool pool(out.threads);

    for (size_t i = 0; i < types.size(); ++i) {
        const TensorType t = types[i];
        if (on_type) on_type(t, int(i), int(types.size()));
        STRATA_ASSIGN(const uint64_t row_bytes, quant::quant_row_bytes(t, kCols));
        const int64_t rows =
            int64_t(options.decode_bytes / row_bytes) / kPatternRows * kPatternRows;
        if (rows < kPromptRows) {
            return err("CPU kernel timing: ", std::to_string(options.decode_bytes),
                       " bytes is too small a matrix");
        }
        fill_weights(t, weights.data(), rows, size_t(row_bytes));
        y.resize(size_t(std::max(rows * kernel_phase_timed_columns(KernelPhase::Batch),
                                 kPromptRows * kMaxColumns)));
        for (const KernelPhase phase : kAllKernelPhases) {
            const int64_t n = kernel_phase_timed_columns(phase);
            const int64_t phase_rows = phase == KernelPhase::Prompt ? kPromptRows : rows;
            STRATA_ASSIGN(const cpu::QuantMatrix W,
                          cpu::make_quant_matrix(t, weights.data(), phase_rows, kCols));
            const std::vector<double> seconds =
                best_seconds(paths, W, x.data(), y.data(), n, options.passes, pool);
            CpuKernelChoice choice;
            choice.type = t;
            choice.phase = phase;
            for (size_t p = 0; p < paths.size(); ++p) {
                const double work = phase == KernelPhase::Prompt
                                        ? 2.0 * double(phase_rows) * double(kCols) * double(n)
                                        : double(phase_rows) * double(row_bytes);
                choice.timings.push_back({cpu::cpu_path_choice(paths[p]), work / seconds[p]});
            }
            choice.path = pick_kernel_path(choice.timings, out.table.widest);
            for (const KernelTiming& k : choice.timings) {
                if (k.path == choice.path) choice.figure = k.figure;
            }
            out.table.choices.push_back(std::move(choice));
        }
    }
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return out;
}

bool cpu_kernels_measured_elsewhere(const CpuKernelProfile& kernels, const CpuProfile& cpu) {
    return kernels.cpu_model != cpu.model || kernels.simd != cpu.simd;
}

}  // namespace strata
