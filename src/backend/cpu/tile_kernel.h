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
    // The kernel reads, after each Q8_0 activation row's n_blocks blocks, that row's
    // Q8_0Sides (write_q8_0_sides): the activation stride is then q8_0_row_bytes_with_sides.
    bool q8_0_sides = false;
};

// What a row-interleaved kernel needs of a Q8_0 activation block besides its codes, computed
// once per activation row instead of once per tile: the scale as a float, and -128 times the
// codes' sum (the correction of weight codes offset by 128 to unsigned: Σ (w + 128) x - 128 Σ x).
struct Q8_0Side {
    float d;
    int32_t offset_sum;
};
// Where a Q8_0 activation row's sides start (after its blocks, 8-byte aligned), and the bytes
// of the row with them.
constexpr size_t q8_0_sides_offset(int64_t n_blocks) {
    return (size_t(n_blocks) * 34 + 7) / 8 * 8;
}
constexpr size_t q8_0_row_bytes_with_sides(int64_t n_blocks) {
    return q8_0_sides_offset(n_blocks) + size_t(n_blocks) * sizeof(Q8_0Side);
}
// Writes the sides of the n_blocks Q8_0 blocks at `row` right after them.
void write_q8_0_sides(uint8_t* row, int64_t n_blocks);

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
