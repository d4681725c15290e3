#include "model/architecture.h"

#include <array>

namespace strata {

namespace {

// llama covers Llama 1-3, Mistral and Mixtral (Mixtral is llama with expert_count > 0).
// Router normalisation follows what each family was trained with: Mixtral and Qwen3-MoE
// renormalise the top-k softmax weights, Qwen2-MoE uses them as they are.
constexpr std::array<ArchTraits, 5> kArchitectures = {{
    {"llama", RopeStyle::Normal, false, false, false, false, true, ExpertWidthDefault::FfnLength},
    {"qwen2", RopeStyle::Neox, true, false, false, false, false, ExpertWidthDefault::FfnLength},
    {"qwen3", RopeStyle::Neox, false, true, false, false, false, ExpertWidthDefault::FfnLength},
    {"qwen2moe", RopeStyle::Neox, true, false, true, true, false,
     ExpertWidthDefault::FfnLengthOverUsed},
    {"qwen3moe", RopeStyle::Neox, false, true, true, false, true,
     ExpertWidthDefault::FfnLengthOverUsed},
}};

}  // namespace

const ArchTraits* find_arch_traits(std::string_view arch) {
    for (const auto& a : kArchitectures) {
        if (a.name == arch) return &a;
    }
    return nullptr;
}

std::string supported_architectures() {
    std::string out;
    for (const auto& a : kArchitectures) {
        if (!out.empty()) out += ", ";
        out += a.name;
    }
    return out;
}

}  // namespace strata
