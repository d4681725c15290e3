// Every weight format the CUDA kernels take, in one table: per format its block geometry, the
// activation type the CPU backend dots it with, and which kernel families take it. The support
// questions (linear_supports, matvec_q8_supports, mmq_supports, activation_type) are answered
// from it, and each family's dispatch from a runtime type to its code walks it, so a new format
// is its FormatTraits here plus its struct in each family that takes it:
//   dequant    exact dequantization (Format<T> in formats_legacy.cuh, formats_k.cuh,
//              formats_float.cuh): the fused dequantize-matvec of decode (matvec_kernels.cuh),
//              embedding rows and the prompt GEMM's fp16 staging (dequant.cu); every type
//              linear() takes;
//   q8_matvec  the int8 decode matvec on the CPU's activation codes (q8k::Format<T> in
//              matvec_q8_formats_32.cuh, matvec_q8_formats_k.cuh);
//   mmq        the int8 tensor-core GEMM of prompts (mmq::Format<T> in mmq_formats.cuh), for
//              rows of whole blocks (the last 256-column step of a 32-element format's row
//              may hold fewer than eight).
// Each family's struct derives from its format's traits, so the geometry is stated once.
// Host and device code alike; no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

#include "gguf/tensor_type.h"
#include "quant/blocks.h"

namespace strata::cuda {

// A type no CUDA kernel takes.
template <TensorType T>
struct FormatTraits {
    static constexpr bool kKnown = false;
};

// The geometry of a block format: its blocks are quant::Block structs.
template <TensorType T, class B, int kElems>
struct BlockGeometry {
    static constexpr bool kKnown = true;
    static constexpr TensorType kType = T;
    static constexpr bool kFloat = false;
    using Block = B;
    static constexpr int kBlockElems = kElems;
    static constexpr int kBlockBytes = int(sizeof(B));
    // Rows (data and row stride) are aligned to the block struct's alignment.
    static constexpr int kRowAlign = int(alignof(B));
};

// The geometry of a float format: one element per "block", rows aligned to the element size.
template <TensorType T, int kBytes>
struct FloatGeometry {
    static constexpr bool kKnown = true;
    static constexpr TensorType kType = T;
    static constexpr bool kFloat = true;
    static constexpr int kBlockElems = 1;
    static constexpr int kBlockBytes = kBytes;
    static constexpr int kRowAlign = kBytes;
};

// Besides the geometry each format says:
//   kActivation  how the CPU rounds the activations it multiplies the format with
//                (quant::vec_dot_type: Q8_0 / Q8_1 / Q8_K codes, F16 / BF16, or F32 as they are;
//                formats_activations.cuh);
//   kDequant, kQ8Matvec, kMmq  the kernel families that take it (see the top of this file).

// ---- float formats

template <>
struct FormatTraits<TensorType::F32> : FloatGeometry<TensorType::F32, 4> {
    static constexpr TensorType kActivation = TensorType::F32;
    static constexpr bool kDequant = true, kQ8Matvec = false, kMmq = false;
};
template <>
struct FormatTraits<TensorType::F16> : FloatGeometry<TensorType::F16, 2> {
    static constexpr TensorType kActivation = TensorType::F16;
    static constexpr bool kDequant = true, kQ8Matvec = false, kMmq = false;
};
template <>
struct FormatTraits<TensorType::BF16> : FloatGeometry<TensorType::BF16, 2> {
    static constexpr TensorType kActivation = TensorType::BF16;
    static constexpr bool kDequant = true, kQ8Matvec = false, kMmq = false;
};

// ---- 32-element formats

template <>
struct FormatTraits<TensorType::Q4_0>
    : BlockGeometry<TensorType::Q4_0, quant::BlockQ4_0, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_0;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q4_1>
    : BlockGeometry<TensorType::Q4_1, quant::BlockQ4_1, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_1;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q5_0>
    : BlockGeometry<TensorType::Q5_0, quant::BlockQ5_0, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_0;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q5_1>
    : BlockGeometry<TensorType::Q5_1, quant::BlockQ5_1, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_1;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q8_0>
    : BlockGeometry<TensorType::Q8_0, quant::BlockQ8_0, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_0;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::IQ4_NL>
    : BlockGeometry<TensorType::IQ4_NL, quant::BlockIQ4_NL, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_0;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::MXFP4>
    : BlockGeometry<TensorType::MXFP4, quant::BlockMXFP4, quant::kQK> {
    static constexpr TensorType kActivation = TensorType::Q8_0;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};

// ---- 256-element super-block formats

template <>
struct FormatTraits<TensorType::Q2_K>
    : BlockGeometry<TensorType::Q2_K, quant::BlockQ2_K, quant::kQK_K> {
    static constexpr TensorType kActivation = TensorType::Q8_K;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q3_K>
    : BlockGeometry<TensorType::Q3_K, quant::BlockQ3_K, quant::kQK_K> {
    static constexpr TensorType kActivation = TensorType::Q8_K;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q4_K>
    : BlockGeometry<TensorType::Q4_K, quant::BlockQ4_K, quant::kQK_K> {
    static constexpr TensorType kActivation = TensorType::Q8_K;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q5_K>
    : BlockGeometry<TensorType::Q5_K, quant::BlockQ5_K, quant::kQK_K> {
    static constexpr TensorType kActivation = TensorType::Q8_K;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::Q6_K>
    : BlockGeometry<TensorType::Q6_K, quant::BlockQ6_K, quant::kQK_K> {
    static constexpr TensorType kActivation = TensorType::Q8_K;
    static constexpr bool kDequant = true, kQ8Matvec = true, kMmq = true;
};
template <>
struct FormatTraits<TensorType::IQ4_XS>
    : BlockGeometry<TensorType::IQ4_XS, quant::BlockIQ4_XS, quant::kQK_K> {
    static constexpr TensorType kActivation = TensorType::Q8_K;
    static constexpr bool kDequant = true, kQ8Matvec = false, kMmq = false;
};

// ---- the table at run time

// Every format above, in the order the dispatchers try them.
inline constexpr TensorType kFormats[] = {
    TensorType::F32,  TensorType::F16,    TensorType::BF16,   TensorType::Q4_0,
    TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,
    TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,
    TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4};

// The compile-time name of a format, passed to the functions with_format_type calls.
template <TensorType T>
using FormatTag = std::integral_constant<TensorType, T>;

namespace format_detail {

template <class Fn, size_t... I>
constexpr bool with_format_type(TensorType t, Fn& fn, std::index_sequence<I...>) {
    return ((t == kFormats[I] && fn(FormatTag<kFormats[I]>{})) || ...);
}

}  // namespace format_detail

// fn(FormatTag<T>{}) for the format T == t of the table, which returns whether it took T (a
// kernel family's dispatch takes the formats whose traits say so, as its Format<T>); false,
// calling nothing, for a type not in the table.
template <class Fn>
constexpr bool with_format_type(TensorType t, Fn&& fn) {
    return format_detail::with_format_type(t, fn, std::make_index_sequence<std::size(kFormats)>{});
}

// What the table says of a type at run time (all false for a type not in it).
struct FormatInfo {
    bool known = false;
    TensorType activation = TensorType::F32;
    bool dequant = false, q8_matvec = false, mmq = false;
    int block_elems = 0, block_bytes = 0, row_align = 0;
};

constexpr FormatInfo format_info(TensorType t) {
    FormatInfo info;
    with_format_type(t, [&](auto tag) {
        using F = FormatTraits<decltype(tag)::value>;
        info = {true,    F::kActivation, F::kDequant,    F::kQ8Matvec,
                F::kMmq, F::kBlockElems, F::kBlockBytes, F::kRowAlign};
        return true;
    });
    return info;
}

// The table agrees with gguf's geometry and with what the families need of each other: the int8
// GEMM multiplies activations quantized by the int8 matvec's quantizer (Q8_0, Q8_1 or Q8_K
// codes), and linear() checks every weight against the exact dequantizers' types first.
constexpr bool format_table_is_consistent() {
    for (const TensorType t : kFormats) {
        const FormatInfo f = format_info(t);
        const auto gguf = tensor_type_info(t);
        if (!f.known || !gguf || uint32_t(f.block_elems) != gguf->block_size ||
            uint32_t(f.block_bytes) != gguf->type_size) {
            return false;
        }
        const bool q8_codes = f.activation == TensorType::Q8_0 ||
                              f.activation == TensorType::Q8_1 || f.activation == TensorType::Q8_K;
        if ((f.mmq && !f.q8_matvec) || (f.q8_matvec && (!f.dequant || !q8_codes))) return false;
    }
    return true;
}
static_assert(format_table_is_consistent());

}  // namespace strata::cuda
