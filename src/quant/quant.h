// Quantized tensor formats: converting rows between float and the GGUF encodings.
//
// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// Q8_K, IQ4_NL, IQ4_XS, MXFP4. Block layouts are in blocks.h.
//
// These are the scalar reference implementations: plain loops, written for clarity and exact
// numerics. Fast kernels (SIMD dequantization, fused dot products) live beside them in the
// backends and are tested against them. The one fast path kept here, fast_quantize.h, is this
// reference run on SIMD lanes: it gives quantize_row's bytes, bit for bit, only faster (for
// writers of large files, such as strata synth).
//
// Numerics, relative to the reference engine (llama.cpp / ggml):
// - dequantize_row follows ggml's dequantizers operation for operation (same float products in
//   the same order, never fused), so it yields the floats the reference engine works with.
// - quantize_row reproduces llama-quantize's bytes (without an importance matrix) for F16, BF16,
//   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and IQ4_XS, and ggml's reference quantizers for Q8_1 and
//   Q8_K. Q2_K..Q6_K use this project's own scale search (scale_search.h; lower RMS error than
//   llama-quantize's, different bytes). MXFP4 takes the shared exponent as exactly
//   floor(log2(amax)) - 2 (ggml goes through log2f, which can round up just below a power of 2).
// - quantize_row_activations reproduces how ggml's x86 CPU backend quantizes activations before a
//   quantized dot product (it rounds differently from the file quantizers; see there).
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "quant/blocks.h"         // block structs, value tables, packed-field accessors
#include "quant/float_formats.h"  // fp16 / bf16 / E8M0 conversions
#include "util/result.h"

namespace strata::quant {

// True when dequantize_row and quantize_row handle t.
bool is_quant_supported(TensorType t);

// Bytes taken by a row of n elements of type t. An error (naming the type and the row length)
// when t is not supported or n is not a whole number of blocks: for checking shapes read from a
// file before converting anything.
Result<uint64_t> quant_row_bytes(TensorType t, int64_t n);

// Row conversions. Preconditions (asserted): is_quant_supported(t), n >= 0 and a multiple of
// t's block size, the quantized buffer aligned for t's block struct (blocks.h), buffers not
// overlapping. dst of quantize_row holds quant_row_bytes(t, n) bytes. quantize_row expects
// finite inputs (F16/BF16/F32 also convert Inf and NaN faithfully).
void dequantize_row(TensorType t, const void* src, float* dst, int64_t n);
void quantize_row(TensorType t, const float* src, void* dst, int64_t n);

// The type the reference engine's CPU matmul converts activations to before multiplying them
// with weights of type `weight`: Q8_0 for Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4; Q8_1 for Q4_1 and
// Q5_1; Q8_K for the K-quants and IQ4_XS; F16 for F16, BF16 for BF16, F32 for F32.
// Precondition: is_quant_supported(weight) and weight is not Q8_1 or Q8_K.
TensorType vec_dot_type(TensorType weight);

// Quantizes a row of activations exactly as ggml's x86 CPU backend (AVX2 build) does, for any
// t that vec_dot_type returns. It differs from quantize_row only for Q8_0 and Q8_1: the inverse
// scale is 127 / amax (not 1 / (amax / 127)) and values round half to even (not half away from
// zero). Q8_K, F16, BF16 and F32 are the same as quantize_row.
void quantize_row_activations(TensorType t, const float* src, void* dst, int64_t n);

}  // namespace strata::quant
