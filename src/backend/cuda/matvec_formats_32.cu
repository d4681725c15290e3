// Instantiations of the decode matvec (matvec_kernels.cuh) for the 32-element formats.
#include "backend/cuda/matvec_kernels.cuh"

namespace strata::cuda {

bool launch_matvec_32(TensorType t, const MatvecArgs& a, cudaStream_t stream) {
    return with_format_among<FmtQ4_0, FmtQ4_1, FmtQ5_0, FmtQ5_1, FmtQ8_0, FmtIQ4_NL, FmtMXFP4>(
        t, [&](auto format) { launch_format<decltype(format)>(a, stream); });
}

}  // namespace strata::cuda
