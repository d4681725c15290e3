// The device-memory read bandwidth the profile reports: a kernel that reads every byte of a
// buffer once with 16-byte loads from enough blocks to fill every SM, and writes one word per
// block so the reads cannot be optimised away. This is the figure decode is bound by (a matvec
// reads each weight byte once), unlike a copy, which also writes.
#include <cuda_runtime.h>

#include <algorithm>

#include "gpu/gpu.h"

namespace strata::gpu {

namespace {

__global__ void read_all(const uint4* __restrict__ p, size_t n, unsigned* sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;  // practically never; keeps the loads live
}

}  // namespace

Result<double> measure_read_bandwidth(const DeviceBuffer& buf, int repeats) {
    if (buf.size() < 16) return err("the buffer to measure is empty");
    if (cudaSetDevice(buf.device()) != cudaSuccess) return err("cannot select the GPU");
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, buf.device());
    const int blocks = std::max(1, sms) * 8;
    unsigned* sink = nullptr;
    if (cudaMalloc(&sink, sizeof(unsigned) * size_t(blocks)) != cudaSuccess) {
        cudaGetLastError();
        return err("cannot allocate GPU memory to measure bandwidth");
    }
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    const size_t n = buf.size() / 16;
    const auto* p = reinterpret_cast<const uint4*>(buf.data());
    read_all<<<blocks, 512>>>(p, n, sink);  // warm-up
    float best = 0;
    for (int r = 0; r < std::max(1, repeats); ++r) {
        cudaEventRecord(start);
        read_all<<<blocks, 512>>>(p, n, sink);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        if (ms > 0 && (best == 0 || ms < best)) best = ms;
    }
    const cudaError_t e = cudaGetLastError();
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(sink);
    if (e != cudaSuccess) return err("the bandwidth kernel failed: ", cudaGetErrorString(e));
    if (best <= 0) return err("the bandwidth kernel took no measurable time");
    return double(n) * 16.0 / (double(best) * 1e-3);
}

}  // namespace strata::gpu
