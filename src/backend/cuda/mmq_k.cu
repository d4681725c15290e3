// mmq kernels of the K-quants, in a file of their own so they compile in parallel with the
// 32-element formats (mmq_32.cu).
#include "backend/cuda/mmq_kernel.cuh"

namespace strata::cuda::mmq {

void launch_k(TensorType t, const Args& a, cudaStream_t stream) {
    // Another type is not reached: mmq_supports() said no.
    with_format_type(t, [&](auto tag) {
        using Traits = FormatTraits<decltype(tag)::value>;
        constexpr bool kTakes = Traits::kMmq && Traits::kBlockElems == 256;
        if constexpr (kTakes) launch_format<Format<Traits::kType>>(a, stream);
        return kTakes;
    });
}

}  // namespace strata::cuda::mmq
