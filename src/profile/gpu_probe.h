// GPUs, through the GPU runtime (gpu/gpu.h: the CUDA runtime linked statically, so the same
// binary runs on machines without a GPU or an NVIDIA driver, where the probe says why there is
// no GPU instead of failing).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "profile/hardware_profile.h"

namespace strata {

struct GpuProbe {
    std::vector<GpuProfile> gpus;
    std::string note;  // why `gpus` is empty ("no CUDA runtime found", "no CUDA device", ...)
};

// Counts the GPUs without measuring anything (cheap: loads the runtime and asks for the count).
GpuProbe list_gpus();

// Names, memory and bandwidths: device-to-device copy, host-to-device from pinned and from
// pageable memory. `quick` uses small transfers (rough figures, a fraction of a second).
// on_gpu(i) is called before GPU i is measured (progress display).
GpuProbe measure_gpus(bool quick, const std::function<void(int index, int count)>& on_gpu);

}  // namespace strata
