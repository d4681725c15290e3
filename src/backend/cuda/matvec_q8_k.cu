// matvec_q8 kernels of the K-quants (matvec_q8_formats_k.cuh), in a file of their own so they
// compile in parallel with the 32-element formats.
#include "backend/cuda/matvec_q8_formats_k.cuh"

namespace strata::cuda::q8k {

void launch_k(TensorType t, const Args& args, int n, cudaStream_t stream, const Tuning& tuning) {
    switch (t) {
        case TensorType::Q2_K:
            return launch_format<Q2K>(args, n, stream, tuning);
        case TensorType::Q3_K:
            return launch_format<Q3K>(args, n, stream, tuning);
        case TensorType::Q4_K:
            return launch_format<Q4K>(args, n, stream, tuning);
        case TensorType::Q5_K:
            return launch_format<Q5K>(args, n, stream, tuning);
        case TensorType::Q6_K:
            return launch_format<Q6K>(args, n, stream, tuning);
        default:
            return;  // not reached: matvec_q8_supports() said no
    }
}

}  // namespace strata::cuda::q8k
