#include "backend/cpu/kernel_table.h"

#include <atomic>

namespace strata::cpu {

std::optional<CpuPath> cpu_path_of(CpuPathChoice c) {
    switch (c) {
        case CpuPathChoice::Scalar:
            return CpuPath::scalar;
        case CpuPathChoice::Avx2:
            return CpuPath::avx2;
        case CpuPathChoice::Avx512:
            return CpuPath::avx512;
        case CpuPathChoice::Best:
            break;
    }
    return std::nullopt;
}

CpuPathChoice cpu_path_choice(CpuPath p) {
    switch (p) {
        case CpuPath::scalar:
            return CpuPathChoice::Scalar;
        case CpuPath::avx2:
            return CpuPathChoice::Avx2;
        case CpuPath::avx512:
            return CpuPathChoice::Avx512;
    }
    return CpuPathChoice::Best;
}

KernelTable KernelTable::from(const CpuKernelTable& table, const CpuFeatures& features) {
    KernelTable out;
    for (const CpuKernelChoice& c : table.choices) {
        const auto path = cpu_path_of(c.path);
        if (path && cpu_path_runs_on(*path, features)) out.set(c.type, c.phase, *path);
    }
    return out;
}

void KernelTable::set(TensorType t, KernelPhase p, CpuPath path) {
    if (size_t(t) < kTypes) paths_[size_t(t)][size_t(p)] = int8_t(path);
}

std::optional<CpuPath> KernelTable::path(TensorType t, KernelPhase p) const {
    if (size_t(t) >= kTypes || paths_[size_t(t)][size_t(p)] == kNone) return std::nullopt;
    return CpuPath(paths_[size_t(t)][size_t(p)]);
}

bool KernelTable::empty() const {
    for (const auto& row : paths_) {
        for (const int8_t p : row) {
            if (p != kNone) return false;
        }
    }
    return true;
}

CpuPath choose_kernel_path(std::optional<CpuPath> forced, const KernelTable& table, CpuPath best,
                           TensorType t, int64_t columns) {
    if (forced) return *forced;
    return table.path(t, kernel_phase(columns)).value_or(best);
}

namespace {

// The installed table, one atomic per entry so that a product never reads a torn table (the
// backend installs it before any product runs; the atomics are for the tests that switch). An
// entry holds its path + 1, so that the zero the array starts as means "none".
constexpr size_t kTypes = strata::detail::kTensorTypeTable.size();
constexpr size_t kPhases = std::size(kAllKernelPhases);
std::atomic<int8_t> g_installed[kTypes][kPhases];

}  // namespace

void install_kernel_table(const KernelTable& table) {
    for (size_t t = 0; t < kTypes; ++t) {
        for (size_t p = 0; p < kPhases; ++p) {
            const auto path = table.path(TensorType(t), KernelPhase(p));
            g_installed[t][p].store(path ? int8_t(int(*path) + 1) : int8_t(0),
                                    std::memory_order_relaxed);
        }
    }
    clear_forced_cpu_path();
}

KernelTable installed_kernel_table() {
    KernelTable out;
    for (size_t t = 0; t < kTypes; ++t) {
        for (size_t p = 0; p < kPhases; ++p) {
            const int8_t path = g_installed[t][p].load(std::memory_order_relaxed);
            if (path > 0) out.set(TensorType(t), KernelPhase(p), CpuPath(path - 1));
        }
    }
    return out;
}

CpuPath kernel_path(TensorType t, int64_t columns) {
    if (const auto forced = forced_cpu_path()) return *forced;
    if (size_t(t) < kTypes) {
        const int8_t path =
            g_installed[size_t(t)][size_t(kernel_phase(columns))].load(std::memory_order_relaxed);
        if (path > 0) return CpuPath(path - 1);
    }
    return active_cpu_path();
}

}  // namespace strata::cpu
