// How synthetic weights become tensor bytes: a RowEncoder turns rows of floats into the bytes
// of one tensor type, and a type recipe decides which type each tensor gets.
//
// The generator only ever calls these two. Every type the quant module can write has an encoder
// (quant::quantize_row's bytes through quant::quantize_row_fast, its SIMD twin, and quant's
// fp16 / bf16 row converters); the mixes of llama-quantize (Q4_K_M, ...) are decided tensor by
// tensor in synth_tensor_type().
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/hparams.h"
#include "model/tensor_layout.h"
#include "synth/weight_format.h"

namespace strata {

struct RowEncoder {
    TensorType type = TensorType::F32;
    // Encodes n_rows rows of row_length floats into n_rows * row_bytes(row_length) bytes.
    // row_length is a multiple of the type's block size. Must be safe to call concurrently.
    void (*encode)(const float* src, void* dst, size_t n_rows, size_t row_length) = nullptr;
};

// The encoder for a type, or nullopt when synth cannot write that type.
std::optional<RowEncoder> row_encoder_for(TensorType type);
// Types row_encoder_for() knows.
std::vector<TensorType> encodable_tensor_types();

// The type a tensor is stored as in a file of format `w`. Like llama.cpp: norms, biases, the MoE
// routers and every 1-D tensor stay F32. A pure format gives every other matrix w.base, even when
// the row length does not fit its blocks (the caller reports that). A mix follows
// llama-quantize's choices (llama_tensor_get_type, without an importance matrix), including its
// fallbacks for row lengths that are not a multiple of the block size (Q4_K -> Q5_0, Q5_K ->
// Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K / IQ4_XS -> IQ4_NL, then F16). `hp` is the model's shape with
// with_layout_defaults() applied.
TensorType synth_tensor_type(const TensorSpec& spec, const WeightFormat& w, const ModelHparams& hp);

}  // namespace strata
