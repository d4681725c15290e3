#include "synth/row_encoder.h"

#include <cstdint>
#include <cstring>

#include "quant/fast_quantize.h"
#include "quant/quant.h"

namespace strata {

namespace {

void encode_f32(const float* src, void* dst, size_t n_rows, size_t row_length) {
    std::memcpy(dst, src, n_rows * row_length * sizeof(float));
}

void encode_f16(const float* src, void* dst, size_t n_rows, size_t row_length) {
    quant::fp32_to_fp16_row(src, static_cast<uint16_t*>(dst),
                            static_cast<int64_t>(n_rows * row_length));
}

void encode_bf16(const float* src, void* dst, size_t n_rows, size_t row_length) {
    quant::fp32_to_bf16_row(src, static_cast<uint16_t*>(dst),
                            static_cast<int64_t>(n_rows * row_length));
}

// Block formats, one row at a time (rows are whole blocks, so each starts on a block boundary),
// through the SIMD encoders where the CPU has them (quantize_row's bytes, fast_quantize.h).
template <TensorType T>
void encode_blocks(const float* src, void* dst, size_t n_rows, size_t row_length) {
    const auto info = tensor_type_info(T);
    const size_t row_bytes = row_length / info->block_size * info->type_size;
    auto* out = static_cast<uint8_t*>(dst);
    for (size_t r = 0; r < n_rows; ++r) {
        quant::quantize_row_fast(T, src + r * row_length, out + r * row_bytes,
                                 static_cast<int64_t>(row_length));
    }
}

constexpr RowEncoder kEncoders[] = {
    {TensorType::F32, encode_f32},
    {TensorType::F16, encode_f16},
    {TensorType::BF16, encode_bf16},
    {TensorType::Q8_0, encode_blocks<TensorType::Q8_0>},
    {TensorType::Q4_0, encode_blocks<TensorType::Q4_0>},
    {TensorType::Q4_1, encode_blocks<TensorType::Q4_1>},
    {TensorType::Q5_0, encode_blocks<TensorType::Q5_0>},
    {TensorType::Q5_1, encode_blocks<TensorType::Q5_1>},
    {TensorType::Q2_K, encode_blocks<TensorType::Q2_K>},
    {TensorType::Q3_K, encode_blocks<TensorType::Q3_K>},
    {TensorType::Q4_K, encode_blocks<TensorType::Q4_K>},
    {TensorType::Q5_K, encode_blocks<TensorType::Q5_K>},
    {TensorType::Q6_K, encode_blocks<TensorType::Q6_K>},
    {TensorType::IQ4_NL, encode_blocks<TensorType::IQ4_NL>},
    {TensorType::IQ4_XS, encode_blocks<TensorType::IQ4_XS>},
    {TensorType::MXFP4, encode_blocks<TensorType::MXFP4>},
};

bool fits_blocks(TensorType t, uint64_t row_length) {
    const auto info = tensor_type_info(t);
    return info && info->block_size != 0 && row_length % info->block_size == 0;
}

// llama-quantize's "use more bits" layers: the first and last eighth, and every third between.
bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool is_mix_of(QuantMix m, std::initializer_list<QuantMix> set) {
    for (QuantMix s : set) {
        if (s == m) return true;
    }
    return false;
}

// The type llama-quantize picks for a weight matrix before its row-length fallback.
TensorType mixed_type(const TensorSpec& spec, const WeightFormat& w, const ModelHparams& hp) {
    using M = QuantMix;
    using T = TensorType;
    const M m = w.mix;
    const int n_layer = static_cast<int>(hp.n_layer);
    const int i = spec.layer;
    const bool eight_experts = hp.n_expert == 8;
    const uint32_t n_gqa = hp.n_head_kv == 0 ? 1 : hp.n_head / hp.n_head_kv;

    // llama-quantize's MXFP4_MOE: the stacked experts MXFP4, every other matrix (the head too)
    // Q8_0.
    if (m == M::MXFP4_MOE) return is_expert_role(spec.role) ? T::MXFP4 : T::Q8_0;
    const bool is_head = spec.role == TensorRole::Output ||
                         (hp.tied_output && spec.role == TensorRole::TokenEmbedding);
    if (is_head) {
        // The LM head (token_embd when tied): Q6_K, or Q8_0 when rows do not fit the base type.
        return fits_blocks(w.base, spec.row_length()) ? T::Q6_K : T::Q8_0;
    }
    switch (spec.role) {
        case TensorRole::AttnV:
        case TensorRole::AttnKvB: {  // llama-quantize counts attn_kv_b with attn_v
            T t = w.base;
            if (m == M::Q2_K)
                t = n_gqa >= 4 ? T::Q4_K : T::Q3_K;
            else if (m == M::Q3_K_M)
                t = i < 2 ? T::Q5_K : T::Q4_K;
            else if (m == M::Q3_K_L)
                t = T::Q5_K;
            else if (m == M::IQ4_XS && n_gqa >= 4)
                t = T::Q5_K;
            else if ((m == M::Q4_K_M || m == M::Q5_K_M) && use_more_bits(i, n_layer))
                t = T::Q6_K;
            else if (m == M::Q4_K_S && i < 4)
                t = T::Q5_K;
            // llama.cpp's 70B class (80 layers with GQA) gives its small attn_v more bits.
            if (hp.arch == "llama" && n_layer == 80 && hp.n_head_kv != hp.n_head &&
                (t == T::Q3_K || t == T::Q4_K)) {
                t = T::Q5_K;
            }
            return eight_experts ? T::Q8_0 : t;
        }
        case TensorRole::AttnK:
            return eight_experts ? T::Q8_0 : w.base;
        case TensorRole::FfnDown:
        case TensorRole::ExpertDown:
        case TensorRole::SharedDown:
            if (m == M::Q2_K) return T::Q3_K;
            if (m == M::Q3_K_M) return i < n_layer / 16 ? T::Q5_K : T::Q4_K;
            if (m == M::Q3_K_L) return T::Q5_K;
            if (m == M::Q4_K_M) return use_more_bits(i, n_layer) ? T::Q6_K : w.base;
            if (m == M::IQ4_XS) return i < n_layer / 8 ? T::Q5_K : w.base;
            if (m == M::Q5_K_M) return use_more_bits(i, n_layer) ? T::Q6_K : w.base;
            if (m == M::Q4_K_S) return i < n_layer / 8 ? T::Q5_K : w.base;
            return w.base;
        case TensorRole::AttnOutput:
            if (eight_experts) {
                return is_mix_of(m,
                                 {M::Q2_K, M::Q3_K_S, M::Q3_K_M, M::Q4_K_S, M::Q4_K_M, M::IQ4_XS})
                           ? T::Q5_K
                           : w.base;
            }
            if (m == M::Q2_K) return T::Q3_K;
            if (m == M::Q3_K_M) return T::Q4_K;
            if (m == M::Q3_K_L) return T::Q5_K;
            return w.base;
        default:
            return w.base;
    }
}

// llama-quantize's substitute for a type whose blocks do not fit the row length.
TensorType row_length_fallback(TensorType t, uint64_t row_length) {
    if (fits_blocks(t, row_length)) return t;
    TensorType f = TensorType::F16;
    switch (t) {
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::IQ4_XS:
            f = TensorType::IQ4_NL;
            break;
        case TensorType::Q4_K:
            f = TensorType::Q5_0;
            break;
        case TensorType::Q5_K:
            f = TensorType::Q5_1;
            break;
        case TensorType::Q6_K:
            f = TensorType::Q8_0;
            break;
        default:
            break;
    }
    return fits_blocks(f, row_length) ? f : TensorType::F16;
}

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

TensorType synth_tensor_type(const TensorSpec& spec, const WeightFormat& w,
                             const ModelHparams& hp) {
    if (spec.shape.size() <= 1 || spec.is_bias || is_norm_role(spec.role) ||
        spec.role == TensorRole::MoeRouter || spec.role == TensorRole::SharedExpertGate ||
        spec.role == TensorRole::SsmConv1d) {  // the reference engine convolves in F32 only
        return TensorType::F32;
    }
    if (w.mix == QuantMix::Pure) return w.base;
    return row_length_fallback(mixed_type(spec, w, hp), spec.row_length());
}

}  // namespace strata
