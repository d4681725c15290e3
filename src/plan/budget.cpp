// Resolving the RAM and GPU memory budgets; the rules are in budget.h.
#include "plan/budget.h"

#include <algorithm>
#include <cmath>

#include "util/units.h"

namespace strata {

uint64_t default_gpu_budget(const GpuProfile& gpu) {
    const auto fraction = static_cast<uint64_t>(
        std::llround(kGpuReserveFraction * static_cast<double>(gpu.memory_total)));
    const uint64_t reserve = std::max(kGpuReserveMin, fraction);
    return gpu.memory_free > reserve ? gpu.memory_free - reserve : 0;
}

namespace {

Result<uint64_t> flag_size(const char* flag, const std::string& text) {
    auto v = parse_size(text);
    if (!v) return err(flag, ": ", v.error().message);
    return *v;
}

Result<void> resolve_ram(const MemoryProfile& m, const std::optional<std::string>& flag,
                         Budgets& out) {
    if (flag) {
        STRATA_ASSIGN(out.ram, flag_size("--ram", *flag));
        out.ram_from_flag = true;
        if (m.total > 0 && out.ram > m.total) {
            out.warnings.push_back("--ram " + *flag + " is more than the " + format_bytes(m.total) +
                                   " of RAM this machine has; the plan may swap");
        }
        return {};
    }
    if (m.available <= kRamHeadroom) {
        return err("only ", format_bytes(m.available), " of RAM is available, not more than the ",
                   format_bytes(kRamHeadroom),
                   " strata leaves to the system; free some memory or give --ram SIZE");
    }
    out.ram = m.available - kRamHeadroom;
    return {};
}

Result<void> resolve_gpu(const HardwareProfile& p, const std::optional<std::string>& flag,
                         Budgets& out) {
    if (!flag) {
        out.gpu_mem = p.gpus.empty() ? 0 : default_gpu_budget(p.gpus.front());
        return {};
    }
    STRATA_ASSIGN(out.gpu_mem, flag_size("--gpu-mem", *flag));
    out.gpu_from_flag = true;
    if (p.gpus.empty()) {
        if (out.gpu_mem == 0) return {};  // "--gpu-mem 0" asks for nothing, which is what exists
        return err("--gpu-mem ", *flag, ": this machine has no GPU",
                   p.gpu_note.empty() ? "" : " (" + p.gpu_note + ")");
    }
    const GpuProfile& gpu = p.gpus.front();
    if (out.gpu_mem > gpu.memory_total) {
        out.warnings.push_back("--gpu-mem " + *flag + " is more than the " +
                               format_bytes(gpu.memory_total) + " of memory of " + gpu.name);
    }
    return {};
}

}  // namespace

Result<Budgets> resolve_budgets(const HardwareProfile& profile,
                                const std::optional<std::string>& ram_flag,
                                const std::optional<std::string>& gpu_flag) {
    Budgets b;
    STRATA_TRY(resolve_ram(profile.memory, ram_flag, b));
    STRATA_TRY(resolve_gpu(profile, gpu_flag, b));
    return b;
}

}  // namespace strata
