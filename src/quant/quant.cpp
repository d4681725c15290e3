#include "quant/quant.h"

#include <cassert>
#include <cstring>
#include <string>

#include "quant/float_formats.h"
#include "quant/reference.h"

namespace strata::quant {

namespace {

// One row of kernels per supported type; nb = number of blocks.
struct RowKernels {
    void (*dequantize)(const void* src, float* dst, int64_t nb);
    void (*quantize)(const float* src, void* dst, int64_t nb);
};

// Adapts a typed block kernel to the void* table.
template <typename Block, void (*Fn)(const Block*, float*, int64_t)>
void dequantize_blocks(const void* src, float* dst, int64_t nb) {
    Fn(static_cast<const Block*>(src), dst, nb);
}
template <typename Block, void (*Fn)(const float*, Block*, int64_t)>
void quantize_blocks(const float* src, void* dst, int64_t nb) {
    Fn(src, static_cast<Block*>(dst), nb);
}
#define STRATA_BLOCK_KERNELS(Block, suffix)                  \
    RowKernels {                                             \
        &dequantize_blocks<Block, ref::dequantize_##suffix>, \
            &quantize_blocks<Block, ref::quantize_##suffix>  \
    }

void f32_to_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, size_t(n) * 4);
}
void f32_from_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, size_t(n) * 4);
}
void f16_to_f32(const void* src, float* dst, int64_t n) {
    fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
}
void f16_from_f32(const float* src, void* dst, int64_t n) {
    fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n);
}
void bf16_to_f32(const void* src, float* dst, int64_t n) {
    bf16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
}
void bf16_from_f32(const float* src, void* dst, int64_t n) {
    fp32_to_bf16_row(src, static_cast<uint16_t*>(dst), n);
}

// Kernels for t, or nullptr when t is not supported.
const RowKernels* kernels_for(TensorType t) {
    static const RowKernels f32{&f32_to_f32, &f32_from_f32};
    static const RowKernels f16{&f16_to_f32, &f16_from_f32};
    static const RowKernels bf16{&bf16_to_f32, &bf16_from_f32};
    static const RowKernels q4_0 = STRATA_BLOCK_KERNELS(BlockQ4_0, q4_0);
    static const RowKernels q4_1 = STRATA_BLOCK_KERNELS(BlockQ4_1, q4_1);
    static const RowKernels q5_0 = STRATA_BLOCK_KERNELS(BlockQ5_0, q5_0);
    static const RowKernels q5_1 = STRATA_BLOCK_KERNELS(BlockQ5_1, q5_1);
    static const RowKernels q8_0 = STRATA_BLOCK_KERNELS(BlockQ8_0, q8_0);
    static const RowKernels q8_1 = STRATA_BLOCK_KERNELS(BlockQ8_1, q8_1);
    static const RowKernels q2_k = STRATA_BLOCK_KERNELS(BlockQ2_K, q2_k);
    static const RowKernels q3_k = STRATA_BLOCK_KERNELS(BlockQ3_K, q3_k);
    static const RowKernels q4_k = STRATA_BLOCK_KERNELS(BlockQ4_K, q4_k);
    static const RowKernels q5_k = STRATA_BLOCK_KERNELS(BlockQ5_K, q5_k);
    static const RowKernels q6_k = STRATA_BLOCK_KERNELS(BlockQ6_K, q6_k);
    static const RowKernels q8_k = STRATA_BLOCK_KERNELS(BlockQ8_K, q8_k);
    static const RowKernels iq4_nl = STRATA_BLOCK_KERNELS(BlockIQ4_NL, iq4_nl);
    static const RowKernels iq4_xs = STRATA_BLOCK_KERNELS(BlockIQ4_XS, iq4_xs);
    static const RowKernels mxfp4 = STRATA_BLOCK_KERNELS(BlockMXFP4, mxfp4);
    switch (t) {
        case TensorType::F32:
            return &f32;
        case TensorType::F16:
            return &f16;
        case TensorType::BF16:
            return &bf16;
        case TensorType::Q4_0:
            return &q4_0;
        case TensorType::Q4_1:
            return &q4_1;
        case TensorType::Q5_0:
            return &q5_0;
        case TensorType::Q5_1:
            return &q5_1;
        case TensorType::Q8_0:
            return &q8_0;
        case TensorType::Q8_1:
            return &q8_1;
        case TensorType::Q2_K:
            return &q2_k;
        case TensorType::Q3_K:
            return &q3_k;
        case TensorType::Q4_K:
            return &q4_k;
        case TensorType::Q5_K:
            return &q5_k;
        case TensorType::Q6_K:
            return &q6_k;
        case TensorType::Q8_K:
            return &q8_k;
        case TensorType::IQ4_NL:
            return &iq4_nl;
        case TensorType::IQ4_XS:
            return &iq4_xs;
        case TensorType::MXFP4:
            return &mxfp4;
        default:
            return nullptr;
    }
}
#undef STRATA_BLOCK_KERNELS

// Number of blocks in a row of n elements; asserts the preconditions of the row functions.
int64_t checked_blocks(TensorType t, int64_t n) {
    const auto info = tensor_type_info(t);
    assert(info && kernels_for(t) && "unsupported tensor type");
    assert(n >= 0 && n % info->block_size == 0 && "row length must be whole blocks");
    return n / info->block_size;
}

}  // namespace

bool is_quant_supported(TensorType t) {
    return kernels_for(t) != nullptr;
}

Result<uint64_t> quant_row_bytes(TensorType t, int64_t n) {
    const auto info = tensor_type_info(t);
    if (!info || !is_quant_supported(t)) {
        return err("tensor type ", info ? std::string(info->name) : std::to_string(uint32_t(t)),
                   " is not supported for conversion");
    }
    if (n < 0 || n % info->block_size != 0) {
        return err("a row of ", std::to_string(n), " elements is not a whole number of ",
                   std::string(info->name), " blocks (", std::to_string(info->block_size),
                   " elements each)");
    }
    return uint64_t(n) / info->block_size * info->type_size;
}

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
    const int64_t nb = checked_blocks(t, n);
    kernels_for(t)->dequantize(src, dst, nb);
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
    const int64_t nb = checked_blocks(t, n);
    kernels_for(t)->quantize(src, dst, nb);
}

TensorType vec_dot_type(TensorType weight) {
    switch (weight) {
        case TensorType::F32:
        case TensorType::F16:
        case TensorType::BF16:
            return weight;
        case TensorType::Q4_0:
        case TensorType::Q5_0:
        case TensorType::Q8_0:
        case TensorType::IQ4_NL:
        case TensorType::MXFP4:
            return TensorType::Q8_0;
        case TensorType::Q4_1:
        case TensorType::Q5_1:
            return TensorType::Q8_1;
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K:
        case TensorType::IQ4_XS:
            return TensorType::Q8_K;
        default:
            assert(false && "no vec_dot type for this weight type");
            return TensorType::F32;
    }
}

void quantize_row_activations(TensorType t, const float* src, void* dst, int64_t n) {
    const int64_t nb = checked_blocks(t, n);
    switch (t) {
        case TensorType::Q8_0:
            ref::quantize_q8_0_activations(src, static_cast<BlockQ8_0*>(dst), nb);
            return;
        case TensorType::Q8_1:
            ref::quantize_q8_1_activations(src, static_cast<BlockQ8_1*>(dst), nb);
            return;
        case TensorType::Q8_K:
        case TensorType::F32:
        case TensorType::F16:
        case TensorType::BF16:
            kernels_for(t)->quantize(src, dst, nb);
            return;
        default:
            assert(false && "not an activation type");
            return;
    }
}

}  // namespace strata::quant
