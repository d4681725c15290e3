#include "gguf/tensor_type.h"

#include <array>
#include <cctype>
#include <string>

namespace strata {

namespace {

// The table itself lives in the header (constexpr, for static_asserts on block layouts).
constexpr const auto& kTypes = detail::kTensorTypeTable;

}  // namespace

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
        case 0:
            return "F32";
        case 1:
            return "F16";
        case 2:
            return "Q4_0";
        case 3:
            return "Q4_1";
        case 7:
            return "Q8_0";
        case 8:
            return "Q5_0";
        case 9:
            return "Q5_1";
        case 10:
            return "Q2_K";
        case 11:
            return "Q3_K_S";
        case 12:
            return "Q3_K_M";
        case 13:
            return "Q3_K_L";
        case 14:
            return "Q4_K_S";
        case 15:
            return "Q4_K_M";
        case 16:
            return "Q5_K_S";
        case 17:
            return "Q5_K_M";
        case 18:
            return "Q6_K";
        case 19:
            return "IQ2_XXS";
        case 20:
            return "IQ2_XS";
        case 21:
            return "Q2_K_S";
        case 22:
            return "IQ3_XS";
        case 23:
            return "IQ3_XXS";
        case 24:
            return "IQ1_S";
        case 25:
            return "IQ4_NL";
        case 26:
            return "IQ3_S";
        case 27:
            return "IQ3_M";
        case 28:
            return "IQ2_S";
        case 29:
            return "IQ2_M";
        case 30:
            return "IQ4_XS";
        case 31:
            return "IQ1_M";
        case 32:
            return "BF16";
        case 36:
            return "TQ1_0";
        case 37:
            return "TQ2_0";
        case 38:
            return "MXFP4_MOE";
        default:
            return "unknown";
    }
}

}  // namespace strata
