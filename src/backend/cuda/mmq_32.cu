// mmq kernels of the 32-element formats (mmq_formats.cuh), beside the K-quants' (mmq_k.cu).
#include "backend/cuda/mmq_kernel.cuh"

namespace strata::cuda::mmq {

void launch_32(TensorType t, const Args& a, cudaStream_t stream) {
    switch (t) {
        case TensorType::Q4_0:
            return launch_format<Q4_0>(a, stream);
        case TensorType::Q4_1:
            return launch_format<Q4_1>(a, stream);
        case TensorType::Q5_0:
            return launch_format<Q5_0>(a, stream);
        case TensorType::Q5_1:
            return launch_format<Q5_1>(a, stream);
        case TensorType::Q8_0:
            return launch_format<Q8_0>(a, stream);
        default:
            return;  // not reached: mmq_supports() said no
    }
}

}  // namespace strata::cuda::mmq
