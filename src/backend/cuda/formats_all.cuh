// Every weight format of the matrix kernels, and the dispatch from a runtime type to its format.
#pragma once

#include "backend/cuda/formats_float.cuh"
#include "backend/cuda/formats_k.cuh"
#include "backend/cuda/formats_legacy.cuh"

namespace strata::cuda {

// Elements 8g .. 8g + count - 1 (count <= 8) of a row as the reference dequantizer gives them,
// read with the loads its alignment allows (F::kRowAlign: the block struct's alignment, which the
// quant module guarantees; the element size for float formats).
// PRECONDITION: row aligned to F::kRowAlign; for block formats count == 8.
template <class F>
STRATA_HD void dequant_group(const uint8_t* row, int g, int count, float* out) {
    if constexpr (F::kFloat) {
        for (int i = 0; i < count; ++i) out[i] = F::value(row, 8 * g + i);
    } else {
        constexpr int kAlign = alignment_at(F::kRowAlign, F::kBlockBytes);
        const int e0 = 8 * g;
        F::template dequant8<kAlign>(row + (e0 / F::kBlockElems) * F::kBlockBytes,
                                     (e0 % F::kBlockElems) / 8, out);
    }
}

// fn(Format<T>{}) for the format T of t when its traits give it exact decoders; returns false
// (calling nothing) for another type.
template <class Fn>
bool with_format(TensorType t, Fn&& fn) {
    return with_format_type(t, [&](auto tag) {
        constexpr TensorType kT = decltype(tag)::value;
        constexpr bool kTakes = FormatTraits<kT>::kDequant;
        if constexpr (kTakes) fn(Format<kT>{});
        return kTakes;
    });
}

}  // namespace strata::cuda
