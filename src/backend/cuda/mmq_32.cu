// mmq kernels of the 32-element formats (mmq_formats.cuh), beside the K-quants' (mmq_k.cu).
#include "backend/cuda/mmq_kernel.cuh"

namespace strata::cuda::mmq {

void launch_32(TensorType t, const Args& a, cudaStream_t stream) {
    // Another type is not reached: mmq_supports() said no.
    with_format_type(t, [&](auto tag) {
        using Traits = FormatTraits<decltype(tag)::value>;
        constexpr bool kTakes = Traits::kMmq && Traits::kBlockElems == 32;
        if constexpr (kTakes) launch_format<Format<Traits::kType>>(a, stream);
        return kTakes;
    });
}

}  // namespace strata::cuda::mmq
