#include "gguf/tensor_type.h"

#include <array>
#include <cctype>
#include <string>

namespace strata {

namespace {

// Indexed by type id. type_size 0 marks an id that is not (or no longer) part of the format.
// Sizes follow the ggml block structs: e.g. Q4_K = 2 fp16 (d, dmin) + 12 scale bytes + 128 nibble
// bytes = 144 bytes for 256 weights.
constexpr std::array<TensorTypeInfo, 40> kTypes = {{
    {"F32", 1, 4},        // 0
    {"F16", 1, 2},        // 1
    {"Q4_0", 32, 18},     // 2
    {"Q4_1", 32, 20},     // 3
    {"", 0, 0},           // 4 removed
    {"", 0, 0},           // 5 removed
    {"Q5_0", 32, 22},     // 6
    {"Q5_1", 32, 24},     // 7
    {"Q8_0", 32, 34},     // 8
    {"Q8_1", 32, 36},     // 9
    {"Q2_K", 256, 84},    // 10
    {"Q3_K", 256, 110},   // 11
    {"Q4_K", 256, 144},   // 12
    {"Q5_K", 256, 176},   // 13
    {"Q6_K", 256, 210},   // 14
    {"Q8_K", 256, 292},   // 15
    {"IQ2_XXS", 256, 66}, // 16
    {"IQ2_XS", 256, 74},  // 17
    {"IQ3_XXS", 256, 98}, // 18
    {"IQ1_S", 256, 50},   // 19
    {"IQ4_NL", 32, 18},   // 20
    {"IQ3_S", 256, 110},  // 21
    {"IQ2_S", 256, 82},   // 22
    {"IQ4_XS", 256, 136}, // 23
    {"I8", 1, 1},         // 24
    {"I16", 1, 2},        // 25
    {"I32", 1, 4},        // 26
    {"I64", 1, 8},        // 27
    {"F64", 1, 8},        // 28
    {"IQ1_M", 256, 56},   // 29
    {"BF16", 1, 2},       // 30
    {"", 0, 0},           // 31 removed
    {"", 0, 0},           // 32 removed
    {"", 0, 0},           // 33 removed
    {"TQ1_0", 256, 54},   // 34
    {"TQ2_0", 256, 66},   // 35
    {"", 0, 0},           // 36 removed
    {"", 0, 0},           // 37 removed
    {"", 0, 0},           // 38 removed
    {"MXFP4", 32, 17},    // 39
}};

}  // namespace

std::optional<TensorTypeInfo> tensor_type_info(uint32_t id) {
    if (id >= kTypes.size() || kTypes[id].type_size == 0) return std::nullopt;
    return kTypes[id];
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
    std::string upper;
    for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (uint32_t id = 0; id < kTypes.size(); ++id) {
        if (kTypes[id].type_size != 0 && kTypes[id].name == upper) return TensorType(id);
    }
    return std::nullopt;
}

std::string_view tensor_type_name(TensorType t) {
    auto info = tensor_type_info(t);
    return info ? info->name : std::string_view("?");
}

double tensor_type_bits_per_weight(TensorType t) {
    auto info = tensor_type_info(t);
    if (!info) return 0;
    return 8.0 * info->type_size / info->block_size;
}

std::string_view file_type_name(uint32_t ftype) {
    // llama_ftype numbering; gaps are types that were removed.
    switch (ftype) {
        case 0: return "F32";
        case 1: return "F16";
        case 2: return "Q4_0";
        case 3: return "Q4_1";
        case 7: return "Q8_0";
        case 8: return "Q5_0";
        case 9: return "Q5_1";
        case 10: return "Q2_K";
        case 11: return "Q3_K_S";
        case 12: return "Q3_K_M";
        case 13: return "Q3_K_L";
        case 14: return "Q4_K_S";
        case 15: return "Q4_K_M";
        case 16: return "Q5_K_S";
        case 17: return "Q5_K_M";
        case 18: return "Q6_K";
        case 19: return "IQ2_XXS";
        case 20: return "IQ2_XS";
        case 21: return "Q2_K_S";
        case 22: return "IQ3_XS";
        case 23: return "IQ3_XXS";
        case 24: return "IQ1_S";
        case 25: return "IQ4_NL";
        case 26: return "IQ3_S";
        case 27: return "IQ3_M";
        case 28: return "IQ2_S";
        case 29: return "IQ2_M";
        case 30: return "IQ4_XS";
        case 31: return "IQ1_M";
        case 32: return "BF16";
        case 36: return "TQ1_0";
        case 37: return "TQ2_0";
        case 38: return "MXFP4_MOE";
        default: return "unknown";
    }
}

}  // namespace strata
