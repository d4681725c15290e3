#include "synth/weight_format.h"

#include <cctype>

namespace strata {

namespace {

struct MixEntry {
    QuantMix mix;
    std::string_view name;
    TensorType base;
    uint32_t file_type;  // llama_ftype
};

constexpr MixEntry kMixes[] = {
    {QuantMix::Q2_K, "Q2_K", TensorType::Q2_K, 10},
    {QuantMix::Q3_K_S, "Q3_K_S", TensorType::Q3_K, 11},
    {QuantMix::Q3_K_M, "Q3_K_M", TensorType::Q3_K, 12},
    {QuantMix::Q3_K_L, "Q3_K_L", TensorType::Q3_K, 13},
    {QuantMix::Q4_K_S, "Q4_K_S", TensorType::Q4_K, 14},
    {QuantMix::Q4_K_M, "Q4_K_M", TensorType::Q4_K, 15},
    {QuantMix::Q5_K_S, "Q5_K_S", TensorType::Q5_K, 16},
    {QuantMix::Q5_K_M, "Q5_K_M", TensorType::Q5_K, 17},
    {QuantMix::Q6_K, "Q6_K", TensorType::Q6_K, 18},
    {QuantMix::IQ4_XS, "IQ4_XS", TensorType::IQ4_XS, 30},
    {QuantMix::MXFP4_MOE, "MXFP4_MOE", TensorType::MXFP4, 38},
};

struct PlainEntry {
    TensorType type;
    uint32_t file_type;  // llama_ftype of a file whose matrices are all `type`
};

constexpr PlainEntry kPlain[] = {
    {TensorType::F32, 0},    {TensorType::F16, 1},     {TensorType::BF16, 32},
    {TensorType::Q8_0, 7},   {TensorType::Q4_0, 2},    {TensorType::Q4_1, 3},
    {TensorType::Q5_0, 8},   {TensorType::Q5_1, 9},    {TensorType::Q2_K, 10},
    {TensorType::Q3_K, 12},  {TensorType::Q4_K, 15},   {TensorType::Q5_K, 17},
    {TensorType::Q6_K, 18},  {TensorType::IQ4_NL, 25}, {TensorType::IQ4_XS, 30},
    {TensorType::MXFP4, 38},
};

const MixEntry* find_mix(QuantMix m) {
    for (const auto& e : kMixes) {
        if (e.mix == m) return &e;
    }
    return nullptr;
}

const PlainEntry* find_plain(TensorType t) {
    for (const auto& e : kPlain) {
        if (e.type == t) return &e;
    }
    return nullptr;
}

}  // namespace

std::optional<WeightFormat> weight_format_from_name(std::string_view name, bool pure) {
    std::string upper;
    for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const auto& e : kMixes) {
        if (e.name == upper) return pure ? WeightFormat(e.base) : WeightFormat(e.base, e.mix);
    }
    const std::optional<TensorType> t = tensor_type_from_name(name);
    if (!t || !find_plain(*t)) return std::nullopt;
    return WeightFormat(*t);
}

std::string weight_format_name(const WeightFormat& w) {
    if (const MixEntry* e = find_mix(w.mix)) return std::string(e->name);
    return std::string(tensor_type_name(w.base));
}

std::vector<std::string> weight_format_names() {
    std::vector<std::string> out;
    for (const auto& e : kPlain) {
        const std::string_view name = tensor_type_name(e.type);
        bool is_mix_name = false;  // Q2_K, Q6_K, IQ4_XS: listed once, as mixes
        for (const auto& m : kMixes) is_mix_name = is_mix_name || m.name == name;
        if (!is_mix_name) out.emplace_back(name);
    }
    for (const auto& m : kMixes) out.emplace_back(m.name);
    return out;
}

std::optional<uint32_t> file_type_for(const WeightFormat& w) {
    if (w.mix != QuantMix::Pure) {
        const MixEntry* e = find_mix(w.mix);
        if (!e || e->base != w.base) return std::nullopt;
        return e->file_type;
    }
    if (const PlainEntry* e = find_plain(w.base)) return e->file_type;
    return std::nullopt;
}

}  // namespace strata
