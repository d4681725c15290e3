// Programmatic dependent launch (PDL, compute capability 9.0 on): a kernel launched with
// launch_pdl may start while the kernel ahead of it on the stream still runs, as soon as every
// block of that one has called pdl_trigger (or exited). What it does before pdl_wait must not
// touch anything an earlier kernel writes or reads: it may compute addresses and issue loads of
// weights, which no kernel writes. pdl_wait returns once the kernel ahead has finished and its
// writes are visible; since that kernel waited for its own predecessor the same way, everything
// earlier on the stream has finished too.
//
// Why: a decode step is hundreds of small kernels; without this each one's launch, block
// scheduling and first loads wait for the whole previous kernel to drain, a few microseconds
// each (the 8B decode step on an H100 was 3.4 ms of kernels for 1.6 ms of weight reads).
// Measured there (8B Q4_K_M decode, tok/s): no PDL 274.8; small kernels letting the next one
// launch as they start and matvecs as their blocks end 303.6; matvecs too as they start 249.4
// (the next kernels' blocks then sit on the SMs, waiting, while the matvec streams), or as each
// warp has issued its last loads 245.7.
//
// Rule for every kernel launched with launch_pdl: call pdl_wait before its first access to
// activations, caches or anything else another kernel produces or consumes. Kernels launched
// the ordinary way need nothing: they start after the kernel ahead has finished.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/tuning.h"

namespace strata::cuda {

// Blocks until the kernel ahead on the stream has finished (a no-op without PDL).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the kernel behind this one on the stream start (it then waits in its own pdl_wait).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// True when the current device takes programmatic dependent launches (compute capability 9.0
// or later); probed once.
bool device_takes_pdl();
// When the matvecs, which fill the GPU, let the kernel behind them launch: as their blocks end
// (the default) or as they start (Tuning::pdl, backend/tuning.h: Pdl::AtStart, for
// comparisons). The small kernels always do as they start.
enum class MatvecTrigger : int { AtEnd, AtStart };
inline MatvecTrigger matvec_trigger(Pdl pdl) {
    return pdl == Pdl::AtStart ? MatvecTrigger::AtStart : MatvecTrigger::AtEnd;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch where `pdl`
// (the backend's Tuning::pdl) is not Off and the device takes one (see the rule above: the
// kernel must call pdl_wait).
template <typename... Params, typename... Args>
void launch_pdl(Pdl pdl, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                cudaStream_t stream, Args&&... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl != Pdl::Off && device_takes_pdl() ? 1 : 0;
    STRATA_CUDA(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace strata::cuda
