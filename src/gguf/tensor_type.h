// ggml tensor types as numbered in GGUF files, with their block geometry.
// Geometry only: block layouts and (de)quantizers live in quant/.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

enum class TensorType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    // 4, 5: Q4_2 / Q4_3, removed from the format
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    // 31..33: Q4_0_4_4 / Q4_0_4_8 / Q4_0_8_8, removed from the format
    TQ1_0 = 34,
    TQ2_0 = 35,
    // 36..38: IQ4_NL_4_4 / _4_8 / _8_8, removed from the format
    MXFP4 = 39,
};

struct TensorTypeInfo {
    std::string_view name;  // as llama.cpp prints it: "Q4_K", "F16", ...
    uint32_t block_size;    // elements per block (1 for plain types)
    uint32_t type_size;     // bytes per block
};

namespace detail {
// Indexed by type id. type_size 0 marks an id that is not (or no longer) part of the format.
// Sizes follow the ggml block structs: e.g. Q4_K = 2 fp16 (d, dmin) + 12 scale bytes + 128 nibble
// bytes = 144 bytes for 256 weights.
inline constexpr std::array<TensorTypeInfo, 40> kTensorTypeTable = {{
    {"F32", 1, 4},         // 0
    {"F16", 1, 2},         // 1
    {"Q4_0", 32, 18},      // 2
    {"Q4_1", 32, 20},      // 3
    {"", 0, 0},            // 4 removed
    {"", 0, 0},            // 5 removed
    {"Q5_0", 32, 22},      // 6
    {"Q5_1", 32, 24},      // 7
    {"Q8_0", 32, 34},      // 8
    {"Q8_1", 32, 36},      // 9
    {"Q2_K", 256, 84},     // 10
    {"Q3_K", 256, 110},    // 11
    {"Q4_K", 256, 144},    // 12
    {"Q5_K", 256, 176},    // 13
    {"Q6_K", 256, 210},    // 14
    {"Q8_K", 256, 292},    // 15
    {"IQ2_XXS", 256, 66},  // 16
    {"IQ2_XS", 256, 74},   // 17
    {"IQ3_XXS", 256, 98},  // 18
    {"IQ1_S", 256, 50},    // 19
    {"IQ4_NL", 32, 18},    // 20
    {"IQ3_S", 256, 110},   // 21
    {"IQ2_S", 256, 82},    // 22
    {"IQ4_XS", 256, 136},  // 23
    {"I8", 1, 1},          // 24
    {"I16", 1, 2},         // 25
    {"I32", 1, 4},         // 26
    {"I64", 1, 8},         // 27
    {"F64", 1, 8},         // 28
    {"IQ1_M", 256, 56},    // 29
    {"BF16", 1, 2},        // 30
    {"", 0, 0},            // 31 removed
    {"", 0, 0},            // 32 removed
    {"", 0, 0},            // 33 removed
    {"TQ1_0", 256, 54},    // 34
    {"TQ2_0", 256, 66},    // 35
    {"", 0, 0},            // 36 removed
    {"", 0, 0},            // 37 removed
    {"", 0, 0},            // 38 removed
    {"MXFP4", 32, 17},     // 39
}};
}  // namespace detail

// Geometry of a known type id; nullopt for ids that are unknown or removed from the format.
// constexpr so that block layouts (quant/blocks.h) can static_assert against this one table.
constexpr std::optional<TensorTypeInfo> tensor_type_info(uint32_t id) {
    if (id >= detail::kTensorTypeTable.size() || detail::kTensorTypeTable[id].type_size == 0) {
        return std::nullopt;
    }
    return detail::kTensorTypeTable[id];
}
constexpr std::optional<TensorTypeInfo> tensor_type_info(TensorType t) {
    return tensor_type_info(static_cast<uint32_t>(t));
}
// "Q4_K" / "q4_k" -> TensorType.
std::optional<TensorType> tensor_type_from_name(std::string_view name);
std::string_view tensor_type_name(TensorType t);
// Bits per weight, e.g. 4.5 for Q4_K.
double tensor_type_bits_per_weight(TensorType t);

// Every known type, in id order (for tables and tests).
inline constexpr TensorType kAllTensorTypes[] = {
    TensorType::F32,     TensorType::F16,    TensorType::Q4_0,    TensorType::Q4_1,
    TensorType::Q5_0,    TensorType::Q5_1,   TensorType::Q8_0,    TensorType::Q8_1,
    TensorType::Q2_K,    TensorType::Q3_K,   TensorType::Q4_K,    TensorType::Q5_K,
    TensorType::Q6_K,    TensorType::Q8_K,   TensorType::IQ2_XXS, TensorType::IQ2_XS,
    TensorType::IQ3_XXS, TensorType::IQ1_S,  TensorType::IQ4_NL,  TensorType::IQ3_S,
    TensorType::IQ2_S,   TensorType::IQ4_XS, TensorType::I8,      TensorType::I16,
    TensorType::I32,     TensorType::I64,    TensorType::F64,     TensorType::IQ1_M,
    TensorType::BF16,    TensorType::TQ1_0,  TensorType::TQ2_0,   TensorType::MXFP4,
};

// general.file_type values (llama_ftype) -> name such as "Q4_K_M"; "unknown (N)" otherwise.
std::string_view file_type_name(uint32_t ftype);

}  // namespace strata
