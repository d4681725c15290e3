#include "quant/quant.h"

#include <cassert>
#include <cstdint>
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
    size_t alignment;  // of the block struct: quantized buffers must be aligned to it
};

// A typed pair of block kernels behind the void* table.
template <typename Block, void (*Dequantize)(const Block*, float*, int64_t),
          void (*Quantize)(const float*, Block*, int64_t)>
constexpr RowKernels block_kernels() {
    return {[](const void* src, float* dst, int64_t nb) {
                Dequantize(static_cast<const Block*>(src), dst, nb);
            },
            [](const float* src, void* dst, int64_t nb) {
                Quantize(src, static_cast<Block*>(dst), nb);
            },
            alignof(Block)};
}

// Plain element types: a "block" is one element.
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
    using namespace ref;
    static constexpr RowKernels f32{&f32_to_f32, &f32_from_f32, alignof(float)};
    static constexpr RowKernels f16{&f16_to_f32, &f16_from_f32, alignof(uint16_t)};
    static constexpr RowKernels bf16{&bf16_to_f32, &bf16_from_f32, alignof(uint16_t)};
    static constexpr RowKernels q4_0 = block_kernels<BlockQ4_0, dequantize_q4_0, quantize_q4_0>();
    static constexpr RowKernels q4_1 = block_kernels<BlockQ4_1, dequantize_q4_1, quantize_q4_1>();
    static constexpr RowKernels q5_0 = block_kernels<BlockQ5_0, dequantize_q5_0, quantize_q5_0>();
    static constexpr RowKernels q5_1 = block_kernels<BlockQ5_1, dequantize_q5_1, quantize_q5_1>();
    static constexpr RowKernels q8_0 = block_kernels<BlockQ8_0, dequantize_q8_0, quantize_q8_0>();
    static constexpr RowKernels q8_1 = block_kernels<BlockQ8_1, dequantize_q8_1, quantize_q8_1>();
    static constexpr RowKernels q2_k = block_kernels<BlockQ2_K, dequantize_q2_k, quantize_q2_k>();
    static constexpr RowKernels q3_k = block_kernels<BlockQ3_K, dequantize_q3_k, quantize_q3_k>();
    static constexpr RowKernels q4_k = block_kernels<BlockQ4_K, dequantize_q4_k, quantize_q4_k>();
    static constexpr RowKernels q5_k = block_kernels<BlockQ5_K, dequantize_q5_k, quantize_q5_k>();
    static constexpr RowKernels q6_k = block_kernels<BlockQ6_K, dequantize_q6_k, quantize_q6_k>();
    static constexpr RowKernels q8_k = block_kernels<BlockQ8_K, dequantize_q8_k, quantize_q8_k>();
    static constexpr RowKernels iq4_nl =
        block_kernels<BlockIQ4_NL, dequantize_iq4_nl, quantize_iq4_nl>();
    static constexpr RowKernels iq4_xs =
        block_kernels<BlockIQ4_XS, dequantize_iq4_xs, quantize_iq4_xs>();
    static constexpr RowKernels mxfp4 =
        block_kernels<BlockMXFP4, dequantize_mxfp4, quantize_mxfp4>();
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

// Number of blocks in a row of n elements; asserts the preconditions of the row functions.
int64_t checked_blocks(TensorType t, int64_t n, [[maybe_unused]] const void* blocks) {
    const auto info = tensor_type_info(t);
    assert(info && kernels_for(t) && "unsupported tensor type");
    assert(n >= 0 && n % info->block_size == 0 && "row length must be whole blocks");
    assert(reinterpret_cast<uintptr_t>(blocks) % kernels_for(t)->alignment == 0 &&
           "quantized buffer not aligned for its block type");
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
    const int64_t nb = checked_blocks(t, n, src);
    kernels_for(t)->dequantize(src, dst, nb);
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
    const int64_t nb = checked_blocks(t, n, dst);
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
    const int64_t nb = checked_blocks(t, n, dst);
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
