// How the quantized matrix kernels see a weight format: one struct per GGUF type, Format<T>
// (formats_*.cuh), with the block geometry of its traits (format_traits.h) and three decoders,
// all usable on the GPU and on the host:
//
//   dequant8<A>(block, j, out)  elements 8j..8j+7 of a block as floats, exactly the floats of
//                               quant::dequantize_row (same products and sums, never fused):
//                               embedding rows and the fp16 staging of the prompt GEMM;
//   unit<A>(block, k)           the integer codes of unit k of a block, for the decode matvec;
//   extra<A>(block, i)          (affine formats) the minimum terms of the block.
//
// A is the block's alignment in bytes (a power of two), so each decoder reads with the widest
// loads the address allows.
//
// The decode matvec multiplies integer codes with the activations as the CPU rounds them for the
// format (formats_activations.cuh): int8 codes q with one fp32 step d per weight block (Q8_0 /
// Q8_1 for the 32-element formats, Q8_K for the super-block ones, whose blocks coincide with the
// weight's), quantized once per call (matvec_kernels.cuh). dp4a does four 8x8-bit products per
// instruction, the codes need no conversion to float, and the integer sums are exact: the float
// arithmetic is the CPU's up to the order of the fp32 sums. A unit is 16 weights of one block
// whose codes come from a few words of it, as four words of four int8 codes; unit_element(k, i)
// says which element of the block code i of unit k is. A unit's dot product is
//   scale * step * sum_g mult[g] * sum_{i in group g} code_i * q_i
// over the groups of codes that share an integer sub-block multiplier; affine formats add
//   sum_items extra.scale * step * extra.mult * (sums of q over 16-element groups)
// (the K-quants, whose Q8_K activations come with those sums), or, for Q4_1 / Q5_1,
//   extra.scale * s with s the block's Q8_1 sum (fp16(d * sum q)) as the CPU takes it.
// Integer sums stay far below 2^24, so they convert to float exactly (the largest, Q6_K: 16
// codes * 32 * 128 * 127 < 2^23).
//
// Activation layout: a row's units are numbered in order (unit k of block b is b * units per
// block + k) and taken 32 at a time (512 elements, one unit per lane of a warp). Each such group
// stores the 16 codes of each of its units in turn (16 bytes per unit, in the unit's code order):
// a lane's activations are one 16-byte load, consecutive with its neighbours', 512 bytes per warp
// load. activation_element(p) maps a position in a group to the element of the group.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/format_traits.h"
#include "backend/cuda/formats_activations.cuh"
#include "gguf/tensor_type.h"
#include "quant/blocks.h"

namespace strata::cuda {

// The decoders of format T (FormatTraits<T> says which types have them), specialised in
// formats_float.cuh, formats_legacy.cuh and formats_k.cuh; each derives from its traits.
template <TensorType T>
struct Format;

inline constexpr int kUnitElems = 16;                 // codes of a unit
inline constexpr int kGroupUnits = 32;                // units of an activation group
inline constexpr int kGroupElems = 16 * kGroupUnits;  // 512

// Codes of one unit: four words of four int8 codes (code i is byte i % 4 of word i / 4), in G
// equal groups that share an integer multiplier, and the unit's float scale.
template <int G>
struct UnitCodes {
    static_assert(G == 1 || G == 2 || G == 4);
    static constexpr int kGroups = G;
    uint32_t code[4];
    int mult[G];
    float scale;
};

// sum_g mult[g] * sum code * q, q the unit's 16 activation codes as four words of four int8
// (code i in byte i % 4 of word i / 4, like the weight codes).
template <int G>
STRATA_HD int unit_dot(const UnitCodes<G>& u, const uint32_t* q) {
    int total = 0;
    STRATA_UNROLL
    for (int g = 0; g < G; ++g) {
        int s = 0;
        STRATA_UNROLL
        for (int w = g * (4 / G); w < (g + 1) * (4 / G); ++w) s = dp4a(q[w], u.code[w], s);
        total += u.mult[g] * s;
    }
    return total;
}

// An affine format's minimum term: scale * step * mult * (q sums of 16-element groups
// group .. group + groups - 1 of the block); for Q8_1 activations (Q4_1, Q5_1) scale * s, s the
// block's Q8_1 sum (mult, group and groups unused).
struct ExtraTerm {
    float scale;
    int mult;
    int group;
    int groups;
};

// Element of an activation group (512 elements, 32 units) at position p of its stored layout.
template <class F>
STRATA_HD int activation_element(int p) {
    constexpr int kUnitsPerBlock = F::kBlockElems / kUnitElems;
    const int unit = p / kUnitElems;                                // in the group
    return (unit / kUnitsPerBlock) * F::kBlockElems +               // the unit's block
           F::unit_element(unit % kUnitsPerBlock, p % kUnitElems);  // in the block
}

// ---- pieces shared by several formats
// -------------------------------------------------------------

// Element (8j + i) of a 32-element block whose codes are nibbles split low/high: the code's byte
// and shift, for dequant8.
struct NibbleAt {
    int byte;
    int shift;
};
STRATA_HD NibbleAt nibble32_at(int j, int i) {
    return {8 * (j & 1) + i, 4 * (j >> 1)};
}

}  // namespace strata::cuda
