#include "backend/cpu/cpu_path.h"

#include <atomic>
#include <cstdio>
#include <string>

namespace strata::cpu {

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
    __builtin_cpu_init();
    f.avx2_fma_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    f.avx512_vnni = f.avx2_fma_f16c && __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512vnni");
#endif
    return f;
}

std::string_view cpu_path_name(CpuPath p) {
    switch (p) {
        case CpuPath::scalar:
            return "scalar";
        case CpuPath::avx2:
            return "avx2";
        case CpuPath::avx512:
            return "avx512";
    }
    return "?";
}

std::optional<CpuPath> parse_cpu_path(std::string_view name) {
    for (CpuPath p : kAllCpuPaths) {
        if (cpu_path_name(p) == name) return p;
    }
    return std::nullopt;
}

bool cpu_path_runs_on(CpuPath p, const CpuFeatures& f) {
    switch (p) {
        case CpuPath::scalar:
            return true;
        case CpuPath::avx2:
            return f.avx2_fma_f16c;
        case CpuPath::avx512:
            return f.avx512_vnni;
    }
    return false;
}

CpuPath best_cpu_path(const CpuFeatures& f) {
    if (f.avx512_vnni) return CpuPath::avx512;
    if (f.avx2_fma_f16c) return CpuPath::avx2;
    return CpuPath::scalar;
}

CpuPath resolve_cpu_path(const char* requested, const CpuFeatures& f, std::string* warning) {
    const CpuPath best = best_cpu_path(f);
    if (requested == nullptr || *requested == '\0') return best;
    const auto parsed = parse_cpu_path(requested);
    if (!parsed) {
        *warning = "cpu_path=" + std::string(requested) +
                   " is not a CPU path (scalar, avx2, avx512); using " +
                   std::string(cpu_path_name(best));
        return best;
    }
    if (!cpu_path_runs_on(*parsed, f)) {
        *warning = "cpu_path=" + std::string(requested) +
                   ": this CPU lacks the instructions; using " + std::string(cpu_path_name(best));
        return best;
    }
    return *parsed;
}

namespace {
std::atomic<int>& forced_path() {
    static std::atomic<int> forced{-1};
    return forced;
}
}  // namespace

CpuPath active_cpu_path() {
    const int forced = forced_path().load(std::memory_order_relaxed);
    if (forced >= 0) return CpuPath(forced);
    static const CpuPath best = best_cpu_path(detect_cpu_features());
    return best;
}

std::optional<CpuPath> forced_cpu_path() {
    const int forced = forced_path().load(std::memory_order_relaxed);
    if (forced < 0) return std::nullopt;
    return CpuPath(forced);
}

void clear_forced_cpu_path() {
    forced_path().store(-1, std::memory_order_relaxed);
}

void select_cpu_path(const char* requested) {
    std::string warning;
    const CpuPath p = resolve_cpu_path(requested, detect_cpu_features(), &warning);
    if (!warning.empty()) std::fprintf(stderr, "strata: warning: %s\n", warning.c_str());
    forced_path().store(int(p), std::memory_order_relaxed);
}

Result<void> set_cpu_path(CpuPath p) {
    if (!cpu_path_runs_on(p, detect_cpu_features())) {
        return err("CPU path ", std::string(cpu_path_name(p)),
                   " needs instructions this CPU does not have");
    }
    forced_path().store(int(p), std::memory_order_relaxed);
    return {};
}

}  // namespace strata::cpu
