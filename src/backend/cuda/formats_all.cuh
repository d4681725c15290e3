// Every weight format of the matrix kernels, and the switch from a runtime type to its format.
#pragma once

#include "backend/cuda/formats_float.cuh"
#include "backend/cuda/formats_k.cuh"
#include "backend/cuda/formats_legacy.cuh"

namespace strata::cuda {

// The row alignment the quant module guarantees for a format (its block struct's alignment;
// the element size for float formats), which the exact dequantizers read rows with.
template <class F>
constexpr int row_alignment() {
    if constexpr (F::kFloat) {
        return F::kBlockBytes;
    } else {
        return int(alignof(typename F::Block));
    }
}

// Elements 8g .. 8g + count - 1 (count <= 8) of a row as the reference dequantizer gives them.
// PRECONDITION: row aligned to row_alignment<F>(); for block formats count == 8.
template <class F>
STRATA_HD void dequant_group(const uint8_t* row, int g, int count, float* out) {
    if constexpr (F::kFloat) {
        for (int i = 0; i < count; ++i) out[i] = F::value(row, 8 * g + i);
    } else {
        constexpr int kAlign = alignment_at(row_alignment<F>(), F::kBlockBytes);
        const int e0 = 8 * g;
        F::template dequant8<kAlign>(row + (e0 / F::kBlockElems) * F::kBlockBytes,
                                     (e0 % F::kBlockElems) / 8, out);
    }
}

// fn(F{}) for the format F of t; returns false (calling nothing) for a type without one.
template <class Fn>
bool with_format(TensorType t, Fn&& fn) {
    switch (t) {
        case TensorType::F32:
            fn(FmtF32{});
            return true;
        case TensorType::F16:
            fn(FmtF16{});
            return true;
        case TensorType::BF16:
            fn(FmtBF16{});
            return true;
        case TensorType::Q4_0:
            fn(FmtQ4_0{});
            return true;
        case TensorType::Q4_1:
            fn(FmtQ4_1{});
            return true;
        case TensorType::Q5_0:
            fn(FmtQ5_0{});
            return true;
        case TensorType::Q5_1:
            fn(FmtQ5_1{});
            return true;
        case TensorType::Q8_0:
            fn(FmtQ8_0{});
            return true;
        case TensorType::Q2_K:
            fn(FmtQ2_K{});
            return true;
        case TensorType::Q3_K:
            fn(FmtQ3_K{});
            return true;
        case TensorType::Q4_K:
            fn(FmtQ4_K{});
            return true;
        case TensorType::Q5_K:
            fn(FmtQ5_K{});
            return true;
        case TensorType::Q6_K:
            fn(FmtQ6_K{});
            return true;
        case TensorType::IQ4_NL:
            fn(FmtIQ4_NL{});
            return true;
        case TensorType::IQ4_XS:
            fn(FmtIQ4_XS{});
            return true;
        case TensorType::MXFP4:
            fn(FmtMXFP4{});
            return true;
        default:
            return false;
    }
}

}  // namespace strata::cuda
