#include "model/kv_layout.h"

#include <algorithm>
#include <string>

#include "quant/blocks.h"
#include "util/units.h"

namespace strata {

uint32_t default_context(const ModelHparams& hp) {
    const uint32_t train = hp.n_ctx_train ? hp.n_ctx_train : kDefaultContextCap;
    return std::min(train, kDefaultContextCap);
}

std::string_view kv_type_name(KvType t) {
    return t == KvType::F16 ? "f16" : "q8_0";
}

Result<KvType> parse_kv_type(std::string_view name) {
    if (name == "f16") return KvType::F16;
    if (name == "q8_0") return KvType::Q8_0;
    return err("unknown KV cache type '" + std::string(name) + "' (known: f16, q8_0)");
}

size_t kv_row_bytes(KvType type, uint64_t n) {
    return type == KvType::F16 ? n * 2 : n / 32 * sizeof(quant::BlockQ8_0);
}

uint64_t recurrent_conv_bytes(const ModelHparams& hp) {
    const uint64_t taps = hp.ssm_d_conv > 0 ? hp.ssm_d_conv - 1 : 0;
    return round_up(taps * hp.conv_channels() * sizeof(float), kKvLayerAlign);
}

uint64_t recurrent_delta_bytes(const ModelHparams& hp) {
    const uint64_t s = hp.ssm_d_state;
    return round_up(uint64_t(hp.ssm_dt_rank) * s * s * sizeof(float), kKvLayerAlign);
}

uint64_t recurrent_state_bytes(const ModelHparams& hp) {
    uint64_t total = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        if (hp.is_recurrent(l)) total += recurrent_conv_bytes(hp) + recurrent_delta_bytes(hp);
    }
    return total;
}

uint32_t kv_layer_positions(const ModelHparams& hp, uint32_t layer, uint32_t n_ctx,
                            uint32_t max_batch) {
    if (!hp.is_swa(layer)) return n_ctx;
    return uint32_t(std::min<uint64_t>(n_ctx, uint64_t(hp.n_swa) + std::max(1u, max_batch)));
}

uint64_t kv_layer_bytes(const ModelHparams& hp, uint32_t layer, uint32_t n_ctx, KvType type,
                        uint32_t max_batch) {
    if (hp.is_recurrent(layer)) return recurrent_conv_bytes(hp) + recurrent_delta_bytes(hp);
    const uint64_t positions = kv_layer_positions(hp, layer, n_ctx, max_batch);
    // Latent attention: one row per position, the normalised latent and the rotary key, which
    // the values are read from too.
    if (hp.is_mla()) {
        return round_up(kv_row_bytes(type, hp.mla_cache_width()) * positions, kKvLayerAlign);
    }
    const uint64_t kv = hp.n_head_kv_at(layer);
    return round_up(kv_row_bytes(type, kv * hp.head_dim_k) * positions, kKvLayerAlign) +
           round_up(kv_row_bytes(type, kv * hp.head_dim_v) * positions, kKvLayerAlign);
}

uint64_t kv_cache_bytes(const ModelHparams& hp, uint32_t n_ctx, KvType type, uint32_t max_batch) {
    uint64_t total = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        total += kv_layer_bytes(hp, l, n_ctx, type, max_batch);
    }
    return total;
}

Result<void> check_kv_type(const ModelHparams& hp, KvType type) {
    if (type == KvType::Q8_0 && hp.is_mla()) {
        if (hp.mla_cache_width() % 32 == 0) return {};
        return err(
            "a Q8_0 KV cache needs rows that are multiples of 32; this model's latent and "
            "rotary key are " +
            std::to_string(hp.mla_cache_width()) + " values (use the f16 cache)");
    }
    if (type == KvType::Q8_0 && (hp.head_dim_k % 32 != 0 || hp.head_dim_v % 32 != 0)) {
        return err("a Q8_0 KV cache needs head sizes that are multiples of 32; this model's are " +
                   std::to_string(hp.head_dim_k) + " and " + std::to_string(hp.head_dim_v) +
                   " (use the f16 cache)");
    }
    return {};
}

}  // namespace strata
