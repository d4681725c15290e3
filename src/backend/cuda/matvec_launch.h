// The launch arguments of the decode matvec, shared by its entry point (matvec.cpp) and the two
// files that instantiate its kernels (matvec_formats_32.cu, matvec_formats_256.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matvec_chunk.cuh"
#include "gguf/tensor_type.h"

namespace strata::cuda {

// The arguments of one matvec launch (matvec.cpp fills them).
struct MatvecArgs {
    const uint8_t* w;  // rows x row_stride bytes
    size_t row_stride;
    int64_t rows;
    int cols;
    int load_width;            // 16, 8, 4, 2 or 1: the widest load every row start allows
    int n;                     // tokens, <= N
    const float* x;            // n x cols: the activations, as the caller gave them
    bool x_aligned;            // rows of the floats a float format reads 16-byte aligned
    QuantizedActivations act;  // x as the CPU rounds it (all formats but F32)
    const float* bias;         // rows, or null
    float* y;                  // n x rows
};

// Enqueue the activation rounding (all formats but F32) and the matvec for the weights of type t
// when t is among a file's formats (matvec_formats_*.cu split the instantiations between two
// files so that they compile in parallel); false (nothing enqueued) for another type.
bool launch_matvec_32(TensorType t, const MatvecArgs& a, cudaStream_t stream);
bool launch_matvec_256(TensorType t, const MatvecArgs& a, cudaStream_t stream);

}  // namespace strata::cuda
