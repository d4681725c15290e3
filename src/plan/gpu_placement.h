// Where a plan puts the model when the machine has a GPU (plan.h: "GPU", "GPU and CPU
// together"): every layer resident in GPU memory, or a split with the CPU by layers or by
// experts, with what a split reserves besides its weights (the prompt staging, the GPU level of
// the expert cache) and the CPU part's streaming when that part does not fit RAM. It decides
// LayerPlan::on_gpu and experts_on_cpu, Plan::gpu_memory and the prompt's speed limit. Internal
// to plan/.
#pragma once

#include "plan/placement_steps.h"
#include "profile/hardware_profile.h"

namespace strata::plan_detail {

// RAM a plan using the GPU needs besides weights and KV cache: the process, its host-side
// buffers (logits, routing), the load's pinned staging, the CUDA runtime's host memory, and with
// `cpu_threads` > 0 the CPU backend of a split with its threads.
MemoryPlan gpu_host_overhead(const Inputs& in, int cpu_threads);

// Resident on GPU 0 when the weights, the KV cache and the GPU backend's buffers fit its budget
// and RAM holds the rest of the process; split by layers between it and the CPU when they fit
// together (place_gpu_split); false (nothing changed) otherwise.
bool place_on_gpu(Plan& plan, const Inputs& in, const HardwareProfile& profile);

}  // namespace strata::plan_detail
