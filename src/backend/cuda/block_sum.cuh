// A sum over a thread block of one double per thread, for the norms that sum their squares in
// double as the CPU backend does (rope_kv.cu's q/k norms, mla.cu's latent norms).
#pragma once

namespace strata::cuda {

// Every thread gets the total. red: shared memory of blockDim.x / 32 doubles.
// PRECONDITION: blockDim.x is a multiple of 32; every thread of the block calls it.
__device__ inline double block_sum(double x, double* red) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    if (lane == 0) red[warp] = x;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < int(blockDim.x) / 32; ++w) total += red[w];
    return total;
}

}  // namespace strata::cuda
