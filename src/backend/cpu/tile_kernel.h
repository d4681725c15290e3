// The interface between the matmul driver (matmul.cpp) and the per-ISA dot-product kernels.
//
// A tile kernel multiplies a tile of up to max_rows weight rows by up to max_cols activation
// rows (the batch columns), reading each weight block once for all columns of the tile:
//   out[c * out_stride + r] = dot(weight row r, activation row c),  r < n_rows, c < n_cols.
// Weight rows are in the weight's GGUF type, activation rows in its vec_dot_type
// (quant::quantize_row_activations), both n_blocks blocks long (elements for F32/F16/BF16).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace strata::cpu::detail {

using TileDotFn = void (*)(const uint8_t* weights, size_t weight_stride, int n_rows,
                           const uint8_t* activations, size_t activation_stride, int n_cols,
                           int64_t n_blocks, float* out, size_t out_stride);

struct TileKernel {
    TileDotFn fn = nullptr;  // nullptr: no fast kernel for this type on this path
    int max_rows = 0;
    int max_cols = 0;
};

// Converts n_blocks blocks of floats to an activation type, byte for byte as
// quant::quantize_row_activations does.
using QuantizeActivationsFn = void (*)(const float* x, void* out, int64_t n_blocks);

// Fast kernels per instruction set; {} where a type has none (the scalar path then runs).
// PRECONDITION for calling them: the CPU supports the instruction set (cpu_path.h).
TileKernel avx2_tile_kernel(TensorType weight);
TileKernel avx512_tile_kernel(TensorType weight);
// Fast activation quantizers per instruction set (Q8_0, Q8_1, Q8_K); nullptr for other types.
QuantizeActivationsFn avx2_activation_quantizer(TensorType act);
QuantizeActivationsFn avx512_activation_quantizer(TensorType act);

}  // namespace strata::cpu::detail
