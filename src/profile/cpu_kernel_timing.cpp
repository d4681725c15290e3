#include "profile/cpu_kernel_timing.h"

#include <sys/mman.h>
#include <time.h>

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

// CPU time the pool's threads have run, all together, in seconds. Each thread reads its own
// clock, which is exact; the process's clock counts other threads' time only at scheduler ticks,
// too coarse for passes of a few milliseconds.
double pool_cpu_seconds(ThreadPool& pool, std::vector<double>& per_thread) {
    per_thread.assign(size_t(pool.size()), 0.0);
    pool.run([&](int thread, int) {
        timespec ts{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        per_thread[size_t(thread)] = double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
    });
    double sum = 0;
    for (const double t : per_thread) sum += t;
    return sum;
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

// A path's timing: its best time, and whether that is a quiet one, confirmed.
struct PathSeconds {
    double best = 1e30;
    bool quiet = false;
};

// Each path's timing of its product W X^T (n columns), in the order of `paths`, after one
// untimed product each. The paths take turns, pass after pass. A pass is quiet when the pool's
// threads ran for kQuietShare of its wall time or more: on a shared machine other work can take
// the cores for whole passes of one path and none of the other's. Passes go on, at least
// `passes` and at most kMaxPassFactor times as many, until every path's best quiet pass is
// confirmed by a second quiet pass within kPassAgreement of it, or some path has had no quiet
// pass at all. A path with no confirmed quiet pass keeps the best of all its passes, marked not
// quiet.
std::vector<PathSeconds> time_paths(const std::vector<cpu::CpuPath>& paths,
                                    const cpu::QuantMatrix& W, const float* X, float* Y, int64_t n,
                                    int passes, ThreadPool& pool) {
    constexpr double kQuietShare = 0.85, kPassAgreement = 0.10;
    constexpr int kMaxPassFactor = 3;
    const size_t k = paths.size();
    std::vector<double> best(k, 1e30), second(k, 1e30), any(k, 1e30);
    std::vector<double> per_thread;
    for (const cpu::CpuPath p : paths) cpu::matmul_on_path(p, W, X, Y, n, pool);
    const auto confirmed = [&](size_t i) {
        return second[i] < 1e30 && second[i] <= best[i] * (1 + kPassAgreement);
    };
    const auto all_quiet_once = [&] {
        for (size_t i = 0; i < k; ++i) {
            if (best[i] >= 1e30) return false;
        }
        return true;
    };
    const auto all_confirmed = [&] {
        for (size_t i = 0; i < k; ++i) {
            if (!confirmed(i)) return false;
        }
        return true;
    };
    for (int pass = 0; pass < passes * kMaxPassFactor; ++pass) {
        // Past the minimum, more passes only while every path has had a quiet one: on a busy
        // machine they would not confirm anything.
        if (pass >= passes && (all_confirmed() || !all_quiet_once())) break;
        for (size_t i = 0; i < k; ++i) {
            const double cpu0 = pool_cpu_seconds(pool, per_thread);
            const auto t0 = Clock::now();
            cpu::matmul_on_path(paths[i], W, X, Y, n, pool);
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            const double share = (pool_cpu_seconds(pool, per_thread) - cpu0) / (s * pool.size());
            any[i] = std::min(any[i], s);
            if (share < kQuietShare) continue;
            second[i] = std::min(second[i], std::max(best[i], s));
            best[i] = std::min(best[i], s);
        }
    }
    std::vector<PathSeconds> out(k);
    for (size_t i = 0; i < k; ++i) {
        out[i] = confirmed(i) ? PathSeconds{best[i], true} : PathSeconds{any[i], false};
    }
    return out;
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
            const std::vector<PathSeconds> seconds =
                time_paths(paths, W, x.data(), y.data(), n, options.passes, pool);
            CpuKernelChoice choice;
            choice.type = t;
            choice.phase = phase;
            bool quiet = true;
            for (size_t p = 0; p < paths.size(); ++p) {
                const double work = phase == KernelPhase::Prompt
                                        ? 2.0 * double(phase_rows) * double(kCols) * double(n)
                                        : double(phase_rows) * double(row_bytes);
                choice.timings.push_back({cpu::cpu_path_choice(paths[p]), work / seconds[p].best});
                quiet = quiet && seconds[p].quiet;
            }
            // Figures taken while other work had the cores are noise: the widest path keeps
            // such a choice.
            choice.path =
                quiet ? pick_kernel_path(choice.timings, out.table.widest) : out.table.widest;
            if (!quiet) ++out.busy_choices;
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
