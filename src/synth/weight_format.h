// What `strata synth --type` names: the type of the weight matrices, and optionally one of
// llama-quantize's mixes on top of it (Q4_K_M: attn_v and ffn_down of some layers at Q6_K, the
// output head at Q6_K, the rest Q4_K). The per-tensor decision is synth_tensor_type() in
// synth/row_encoder.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"

namespace strata {

// llama-quantize's mixes (llama_ftype names). Pure: every weight matrix gets the base type, as
// llama-quantize --pure does.
enum class QuantMix : uint8_t {
    Pure,
    Q2_K,
    Q3_K_S,
    Q3_K_M,
    Q3_K_L,
    Q4_K_S,
    Q4_K_M,
    Q5_K_S,
    Q5_K_M,
    Q6_K,
    IQ4_XS,
    MXFP4_MOE,  // routed experts MXFP4, every other matrix Q8_0 (the gpt-oss GGUFs)
};

struct WeightFormat {
    TensorType base = TensorType::F16;  // the type of the weight matrices the mix does not change
    QuantMix mix = QuantMix::Pure;

    WeightFormat() = default;
    WeightFormat(TensorType t, QuantMix m = QuantMix::Pure) : base(t), mix(m) {}  // NOLINT
    bool operator==(const WeightFormat&) const = default;
};

// Parses a --type name. Mix names (Q4_K_M, Q3_K_S, ...) give their mix; Q2_K, Q6_K and IQ4_XS are
// mixes too, as in llama-quantize (a Q2_K file keeps attn_v / ffn_down at Q3_K or better). Any
// other supported type name gives that type for every weight matrix. `pure` turns a mix into its
// base type alone. nullopt for a name synth cannot write.
std::optional<WeightFormat> weight_format_from_name(std::string_view name, bool pure = false);
// "Q4_K_M" for a mix, the type name ("Q8_0") for a pure format.
std::string weight_format_name(const WeightFormat& w);
// Every name weight_format_from_name() accepts, for help texts and errors.
std::vector<std::string> weight_format_names();

// general.file_type (llama_ftype) of a file written in this format; nullopt if synth cannot
// write it. A pure K-quant file gets the ftype llama-quantize writes for it with --pure (its
// type name is an alias of the _M mix there: Q4_K -> Q4_K_M = 15).
std::optional<uint32_t> file_type_for(const WeightFormat& w);

}  // namespace strata
