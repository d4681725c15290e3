#include "backend/cuda/cuda_check.h"

#include <cstdio>
#include <cstdlib>

namespace strata::cuda {

void fail(cudaError_t e, const char* what, const char* file, int line) {
    std::fprintf(stderr, "strata: GPU error: %s (%s) at %s:%d\n", cudaGetErrorString(e), what, file,
                 line);
    std::abort();
}

}  // namespace strata::cuda
