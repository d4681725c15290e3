// Instantiations of the decode matvec (matvec_kernels.cuh) for the super-block formats and the
// float formats.
#include "backend/cuda/matvec_kernels.cuh"

namespace strata::cuda {

bool launch_matvec_256(TensorType t, const MatvecArgs& a, cudaStream_t stream) {
    return with_format_among<FmtQ2_K, FmtQ3_K, FmtQ4_K, FmtQ5_K, FmtQ6_K, FmtIQ4_XS, FmtF32, FmtF16,
                             FmtBF16>(
        t, [&](auto format) { launch_format<decltype(format)>(a, stream); });
}

}  // namespace strata::cuda
