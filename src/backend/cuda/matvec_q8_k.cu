// matvec_q8 kernels of the K-quants (matvec_q8_formats_k.cuh), in a file of their own so they
// compile in parallel with the 32-element formats.
#include "backend/cuda/matvec_q8_formats_k.cuh"

namespace strata::cuda::q8k {

void launch_k(TensorType t, const Args& args, int n, cudaStream_t stream, const Tuning& tuning) {
    // Another type is not reached: matvec_q8_supports() said no.
    with_format_type(t, [&](auto tag) {
        using Traits = FormatTraits<decltype(tag)::value>;
        constexpr bool kTakes = Traits::kQ8Matvec && Traits::kBlockElems == 256;
        if constexpr (kTakes) launch_format<Format<Traits::kType>>(args, n, stream, tuning);
        return kTakes;
    });
}

}  // namespace strata::cuda::q8k
