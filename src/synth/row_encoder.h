// How synthetic weights become tensor bytes: a RowEncoder turns rows of floats into the bytes
// of one tensor type, and a type recipe decides which type each tensor gets.
//
// The generator only ever calls these two, so quantized formats plug in here: a Q8_0 or Q4_K
// encoder is one more entry in row_encoder_for(), and a mixed recipe such as Q4_K_M is one more
// case in synth_tensor_type() (e.g. attn_v / ffn_down of some layers at Q6_K).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/tensor_layout.h"

namespace strata {

struct RowEncoder {
    TensorType type = TensorType::F32;
    // Encodes n_rows rows of row_length floats into n_rows * row_bytes(row_length) bytes.
    // row_length is a multiple of the type's block size. Must be safe to call concurrently.
    void (*encode)(const float* src, void* dst, size_t n_rows, size_t row_length) = nullptr;
};

// The encoder for a type, or nullopt when synth cannot write that type (yet).
std::optional<RowEncoder> row_encoder_for(TensorType type);
// Types row_encoder_for() knows, for help texts and errors.
std::vector<TensorType> encodable_tensor_types();

// The type a tensor is stored as when the file's weights are `requested`. Like llama.cpp: norms,
// biases, the MoE routers and every 1-D tensor stay F32; the other matrices get `requested`.
TensorType synth_tensor_type(const TensorSpec& spec, TensorType requested);

// general.file_type (llama_ftype) for a file whose weights are `requested`; nullopt if unknown.
std::optional<uint32_t> file_type_for(TensorType requested);

}  // namespace strata
