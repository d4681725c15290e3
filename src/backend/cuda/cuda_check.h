// Error checks for the CUDA backend. A failed launch or copy inside the backend is a bug or a
// lost device, never bad input (inputs are checked before anything reaches the GPU), so it is
// reported with the call and where it happened, and the process stops.
#pragma once

#include <cuda_runtime_api.h>

namespace strata::cuda {

[[noreturn]] void fail(cudaError_t e, const char* what, const char* file, int line);

}  // namespace strata::cuda

#define STRATA_CUDA(expr)                                                    \
    do {                                                                     \
        const cudaError_t strata_cuda_e_ = (expr);                           \
        if (strata_cuda_e_ != cudaSuccess)                                   \
            ::strata::cuda::fail(strata_cuda_e_, #expr, __FILE__, __LINE__); \
    } while (0)
// After a kernel launch: a bad configuration is reported at once, not at the next sync.
#define STRATA_CUDA_LAUNCHED() STRATA_CUDA(cudaGetLastError())
