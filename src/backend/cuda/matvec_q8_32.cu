// matvec_q8 kernels of the 32-element formats (matvec_q8_formats_32.cuh).
#include "backend/cuda/matvec_q8_formats_32.cuh"

namespace strata::cuda::q8k {

void launch_32(TensorType t, const Args& args, int n, cudaStream_t stream, const Tuning& tuning) {
    switch (t) {
        case TensorType::Q4_0:
            return launch_format<Q4_0>(args, n, stream, tuning);
        case TensorType::Q4_1:
            return launch_format<Q4_1>(args, n, stream, tuning);
        case TensorType::Q5_0:
            return launch_format<Q5_0>(args, n, stream, tuning);
        case TensorType::Q5_1:
            return launch_format<Q5_1>(args, n, stream, tuning);
        case TensorType::Q8_0:
            return launch_format<Q8_0>(args, n, stream, tuning);
        default:
            return;  // not reached: matvec_q8_supports() said no
    }
}

}  // namespace strata::cuda::q8k
