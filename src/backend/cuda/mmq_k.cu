// mmq kernels of the K-quants, in a file of their own so they compile in parallel with the
// 32-element formats (mmq_32.cu).
#include "backend/cuda/mmq_kernel.cuh"

namespace strata::cuda::mmq {

void launch_k(TensorType t, const Args& a, cudaStream_t stream) {
    switch (t) {
        case TensorType::Q2_K:
            return launch_format<Q2K>(a, stream);
        case TensorType::Q3_K:
            return launch_format<Q3K>(a, stream);
        case TensorType::Q4_K:
            return launch_format<Q4K>(a, stream);
        case TensorType::Q5_K:
            return launch_format<Q5K>(a, stream);
        case TensorType::Q6_K:
            return launch_format<Q6K>(a, stream);
        default:
            return;  // not reached: mmq_supports() said no
    }
}

}  // namespace strata::cuda::mmq
