// Instantiations of the decode matvec (matvec_kernels.cuh) for the 32-element formats.
#include "backend/cuda/matvec_kernels.cuh"

namespace strata::cuda {

bool launch_matvec_32(TensorType t, const MatvecArgs& a, cudaStream_t stream) {
    return with_format_type(t, [&](auto tag) {
        using Traits = FormatTraits<decltype(tag)::value>;
        constexpr bool kTakes = Traits::kDequant && Traits::kBlockElems == 32;
        if constexpr (kTakes) launch_format<Format<Traits::kType>>(a, stream);
        return kTakes;
    });
}

}  // namespace strata::cuda
