#include "synth/row_encoder.h"

#include <cstring>

#include "synth/half_float.h"

namespace strata {

namespace {

// The conversion loops are compiled twice on x86-64: for the baseline ISA and for AVX2, picked
// at run time. Both produce identical bytes (integer and exact IEEE operations only).
template <uint16_t (*convert)(float)>
inline void convert_loop(const float* src, uint16_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = convert(src[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void floats_to_f16_avx2(const float* src, uint16_t* dst, size_t n) {
    convert_loop<float_to_f16>(src, dst, n);
}
__attribute__((target("avx2"))) void floats_to_bf16_avx2(const float* src, uint16_t* dst,
                                                         size_t n) {
    convert_loop<float_to_bf16>(src, dst, n);
}
bool have_avx2() {
    static const bool avx2 = __builtin_cpu_supports("avx2");
    return avx2;
}
#endif

void encode_f32(const float* src, void* dst, size_t n_rows, size_t row_length) {
    std::memcpy(dst, src, n_rows * row_length * sizeof(float));
}

void encode_f16(const float* src, void* dst, size_t n_rows, size_t row_length) {
    auto* out = static_cast<uint16_t*>(dst);
#if defined(__x86_64__)
    if (have_avx2()) return floats_to_f16_avx2(src, out, n_rows * row_length);
#endif
    convert_loop<float_to_f16>(src, out, n_rows * row_length);
}

void encode_bf16(const float* src, void* dst, size_t n_rows, size_t row_length) {
    auto* out = static_cast<uint16_t*>(dst);
#if defined(__x86_64__)
    if (have_avx2()) return floats_to_bf16_avx2(src, out, n_rows * row_length);
#endif
    convert_loop<float_to_bf16>(src, out, n_rows * row_length);
}

constexpr RowEncoder kEncoders[] = {
    {TensorType::F32, encode_f32},
    {TensorType::F16, encode_f16},
    {TensorType::BF16, encode_bf16},
};

}  // namespace

std::optional<RowEncoder> row_encoder_for(TensorType type) {
    for (const auto& e : kEncoders) {
        if (e.type == type) return e;
    }
    return std::nullopt;
}

std::vector<TensorType> encodable_tensor_types() {
    std::vector<TensorType> out;
    for (const auto& e : kEncoders) out.push_back(e.type);
    return out;
}

TensorType synth_tensor_type(const TensorSpec& spec, TensorType requested) {
    if (spec.shape.size() <= 1 || spec.is_bias || is_norm_role(spec.role) ||
        spec.role == TensorRole::MoeRouter || spec.role == TensorRole::SharedExpertGate) {
        return TensorType::F32;
    }
    return requested;
}

std::optional<uint32_t> file_type_for(TensorType requested) {
    switch (requested) {
        case TensorType::F32:
            return 0;  // LLAMA_FTYPE_ALL_F32
        case TensorType::F16:
            return 1;  // LLAMA_FTYPE_MOSTLY_F16
        case TensorType::BF16:
            return 32;  // LLAMA_FTYPE_MOSTLY_BF16
        default:
            return std::nullopt;
    }
}

}  // namespace strata
