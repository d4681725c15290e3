// Memory budgets for the placement plan: how much host RAM and GPU memory strata may fill with
// weights, KV cache and streaming buffers. Defaults come from the hardware profile; --ram and
// --gpu-mem override them for experiments and for sharing the machine.
//
// Defaults, and why:
//  - RAM: the available RAM (MemAvailable, within a cgroup limit) minus kRamHeadroom (4 GiB) for
//    the system and the page cache the rest of the machine lives on (strata's own activations,
//    buffers and code are lines of the plan, inside the budget). When less than the headroom is
//    available, that is an error naming both figures: a plan into swap is worse than none.
//  - GPU memory: the free memory of GPU 0 (the one device the engine uses) minus a reserve of
//    max(1 GiB, 5% of its total) for the CUDA context, cuBLAS workspaces and fragmentation; 0
//    without a GPU.
// Flags, and why: a flag is used as given, also above what the profile says exists, with a
// warning. The profile's "available" figure is a snapshot (cached for up to 30 days), so strata
// does not overrule a user who knows the machine better; but a --ram above the machine's total
// RAM, or a --gpu-mem above the GPU's total memory, is almost certainly a typo and is said so.
// --gpu-mem on a machine without a GPU is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profile/hardware_profile.h"
#include "util/result.h"

namespace strata {

inline constexpr uint64_t kRamHeadroom = 4ull << 30;
inline constexpr uint64_t kGpuReserveMin = 1ull << 30;
inline constexpr double kGpuReserveFraction = 0.05;

struct Budgets {
    uint64_t ram = 0;      // bytes of host RAM the plan may use
    uint64_t gpu_mem = 0;  // bytes of GPU memory the plan may use (0: no GPU)
    bool ram_from_flag = false;
    bool gpu_from_flag = false;
    std::vector<std::string> warnings;  // flags above what the machine has
};

// The GPU memory a plan may use by default on one GPU: free minus the reserve, never below 0.
uint64_t default_gpu_budget(const GpuProfile& gpu);

// `ram_flag` and `gpu_flag` are the texts of --ram and --gpu-mem ("8G"), when given. Errors name
// the flag and the figures ("--ram: invalid size ...", "only 3.20 GiB of RAM is available ...").
Result<Budgets> resolve_budgets(const HardwareProfile& profile,
                                const std::optional<std::string>& ram_flag,
                                const std::optional<std::string>& gpu_flag);

}  // namespace strata
