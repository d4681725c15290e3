#include "backend/cpu/kv_cache.h"

#include <cstring>

#include "quant/quant.h"
#include "util/units.h"
namespace strata::cpu {

TensorType KvCache::element_type() const {
    return type_ == KvType::F16 ? TensorType::F16 : TensorType::Q8_0;
}

Result<KvCache> KvCache::create(const ModelHparams& hp, uint32_t n_ctx, KvType type,
                                const std::vector<bool>& held, uint32_t max_batch) {
    if (n_ctx == 0) return err("the context size must be at least 1");
    STRATA_TRY(check_kv_type(hp, type));
    KvCache c;
    c.type_ = type;
    c.n_ctx_ = n_ctx;
    size_t offset = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        Layer L;
        // A latent-attention layer's one row per position is its key row; no value rows.
        L.n_embd_k = hp.is_mla() ? hp.mla_cache_width() : hp.n_head_kv_at(l) * hp.head_dim_k;
        L.n_embd_v = hp.is_mla() ? 0 : hp.n_head_kv_at(l) * hp.head_dim_v;
        L.positions = kv_layer_positions(hp, l, n_ctx, max_batch);
        L.k_row_bytes = kv_row_bytes(type, L.n_embd_k);
        // transposed F16 values: one row of the layer's slots per value dimension
        L.v_row_bytes =
            type == KvType::F16 ? size_t(L.positions) * 2 : kv_row_bytes(type, L.n_embd_v);
        L.k_offset = offset;
        L.v_offset = offset;
        const bool holds = held.empty() || (l < held.size() && held[l]);
        if (hp.is_recurrent(l)) {
            if (holds) {
                L.v_offset = offset + recurrent_conv_bytes(hp);
                L.state_bytes = recurrent_conv_bytes(hp) + recurrent_delta_bytes(hp);
                offset += L.state_bytes;
            }
        } else if (holds) {
            offset += round_up(L.k_row_bytes * L.positions, kKvLayerAlign);
            L.v_offset = offset;
            if (L.n_embd_v > 0) {
                offset += round_up(kv_row_bytes(type, L.n_embd_v) * L.positions, kKvLayerAlign);
            }
        }
        c.layers_.push_back(L);
    }
    auto buf = AlignedBuffer::allocate(offset);
    if (!buf) {
        return err("cannot allocate the KV cache (" + format_bytes(offset) + " for " +
                   std::to_string(n_ctx) + " positions): " + buf.error().message +
                   "; a smaller --ctx needs less");
    }
    c.buffer_ = std::move(*buf);
    c.clear_recurrent();
    return c;
}

void KvCache::clear_recurrent() {
    for (const Layer& L : layers_) {
        if (L.state_bytes > 0) std::memset(buffer_.data() + L.k_offset, 0, L.state_bytes);
    }
}

void KvCache::store(int layer, int64_t pos, const float* k, const float* v) {
    const Layer& L = layers_[layer];
    const size_t slot = size_t(pos) % L.positions;
    std::byte* base = buffer_.data();
    std::byte* krow = base + L.k_offset + slot * L.k_row_bytes;
    if (L.n_embd_v == 0) {  // a latent row: no values of its own
        if (type_ == KvType::F16) {
            quant::fp32_to_fp16_row(k, reinterpret_cast<uint16_t*>(krow), L.n_embd_k);
        } else {
            quant::quantize_row(TensorType::Q8_0, k, krow, L.n_embd_k);
        }
        return;
    }
    if (type_ == KvType::F16) {
        quant::fp32_to_fp16_row(k, reinterpret_cast<uint16_t*>(krow), L.n_embd_k);
        auto* vt = reinterpret_cast<uint16_t*>(base + L.v_offset);
        for (uint32_t d = 0; d < L.n_embd_v; ++d) {
            vt[size_t(d) * L.positions + slot] = quant::fp32_to_fp16(v[d]);
        }
    } else {
        quant::quantize_row(TensorType::Q8_0, k, krow, L.n_embd_k);
        quant::quantize_row(TensorType::Q8_0, v, base + L.v_offset + slot * L.v_row_bytes,
                            L.n_embd_v);
    }
}

const std::byte* KvCache::key_row(int layer, int64_t slot) const {
    const Layer& L = layers_[layer];
    return buffer_.data() + L.k_offset + size_t(slot) * L.k_row_bytes;
}

const std::byte* KvCache::value_row(int layer, int64_t index) const {
    const Layer& L = layers_[layer];
    return buffer_.data() + L.v_offset + size_t(index) * L.v_row_bytes;
}

}  // namespace strata::cpu
