// The float formats F32, F16 and BF16 for the matrix kernels. They have no codes: the decode
// matvec multiplies their values with the activations as the CPU rounds them (fp16 for F16, bf16
// for BF16, x itself for F32: formats_activations.cuh), every product exact in fp32 for F16 /
// BF16, and dequantizing is a conversion.
#pragma once

#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/formats.cuh"
#include "gguf/tensor_type.h"

namespace strata::cuda {

template <TensorType T>
struct FormatFloat : FormatTraits<T> {
    static_assert(T == TensorType::F32 || T == TensorType::F16 || T == TensorType::BF16);

    static STRATA_HD float convert(uint32_t bits) {
        if constexpr (T == TensorType::F32) {
            return bits_to_float(bits);
        } else if constexpr (T == TensorType::F16) {
            return half_bits_to_float(bits);
        } else {
            return bf16_bits_to_float(bits);
        }
    }

    // Element e of a row aligned to the element size.
    static STRATA_HD float value(const uint8_t* row, int e) {
        if constexpr (T == TensorType::F32) {
            return convert(load_u32<4>(row + 4 * e));
        } else {
            return convert(load_u16<2>(row + 2 * e));
        }
    }

    // Eight consecutive elements at p, 16-byte aligned (a unit of a staged chunk).
    static STRATA_HD void unit8(const uint8_t* p, float* out) {
        if constexpr (T == TensorType::F32) {
            STRATA_UNROLL
            for (int i = 0; i < 8; ++i) out[i] = bits_to_float(load_u32<16>(p + 4 * i));
        } else {
            STRATA_UNROLL
            for (int i = 0; i < 4; ++i) {
                const uint32_t w = load_u32<16>(p + 4 * i);
                out[2 * i] = convert(w & 0xffff);
                out[2 * i + 1] = convert(w >> 16);
            }
        }
    }
};

template <>
struct Format<TensorType::F32> : FormatFloat<TensorType::F32> {};
template <>
struct Format<TensorType::F16> : FormatFloat<TensorType::F16> {};
template <>
struct Format<TensorType::BF16> : FormatFloat<TensorType::BF16> {};

}  // namespace strata::cuda
