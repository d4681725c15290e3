// The key/value cache: the keys and values of every position evaluated so far, per layer, so a
// new token attends to the whole context without recomputing it.
//
// F16 or Q8_0 (model/kv_layout.h, which also sizes it for the plan).
// Keys are stored one row per position ([n_ctx][n_head_kv * head_dim_k]), so the scores of a
// head are a matrix product of its key rows with the queries. F16 values are stored transposed
// ([n_head_kv * head_dim_v][n_ctx]), so the weighted sum over positions is also a matrix
// product; Q8_0 values are stored one row per position, since 32-element blocks cannot run
// along a context that grows one position at a time.
//
// A latent-attention layer (deepseek2) holds one row per position, the normalised latent and the
// rotary key (ModelHparams::mla_cache_width()): its key row, whose latent part is also its value;
// it has no value rows (store's v is ignored).
//
// A sliding-window layer holds a ring of fewer positions (kv_layer_positions): position p lives
// in slot p % positions(layer), and rows, value rows and their strides count slots. A layer
// holding the whole context has slot == position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "io/aligned_buffer.h"
#include "model/hparams.h"
#include "model/kv_layout.h"
#include "util/result.h"

namespace strata::cpu {

class KvCache {
  public:
    // A cache for the layers `held` marks (empty: every layer); the others take no memory.
    // max_batch: the most tokens one call stores, which sizes the sliding-window layers' rings.
    static Result<KvCache> create(const ModelHparams& hp, uint32_t n_ctx, KvType type,
                                  const std::vector<bool>& held = {},
                                  uint32_t max_batch = kDefaultMaxBatch);

    KvType type() const { return type_; }
    TensorType element_type() const;
    uint32_t n_ctx() const { return n_ctx_; }
    // Slots of a layer's cache: n_ctx, or the ring of a sliding-window layer.
    uint32_t positions(int layer) const { return layers_[size_t(layer)].positions; }
    uint64_t bytes() const { return buffer_.size(); }

    // Writes the keys and values of position pos of a layer (n_head_kv * head_dim floats each).
    void store(int layer, int64_t pos, const float* k, const float* v);

    // Key row of a slot: n_head_kv heads of head_dim_k elements.
    const std::byte* key_row(int layer, int64_t slot) const;
    size_t key_row_bytes(int layer) const { return layers_[layer].k_row_bytes; }
    // F16: start of value dimension `index`'s row over slots (positions(layer) elements).
    // Q8_0: the value row of slot `index` (n_head_kv * head_dim_v).
    const std::byte* value_row(int layer, int64_t index) const;
    size_t value_row_bytes(int layer) const { return layers_[layer].v_row_bytes; }
    bool values_transposed() const { return type_ == KvType::F16; }

    // A recurrent (Gated DeltaNet) layer's state in place of keys and values
    // (model/kv_layout.h: recurrent_conv_bytes, recurrent_delta_bytes): the convolution's last
    // inputs [channels][d_conv - 1] and the delta state [v_heads][S][S], zero at first.
    float* conv_state(int layer) { return state_at(layers_[layer].k_offset); }
    float* delta_state(int layer) { return state_at(layers_[layer].v_offset); }
    // Zeroes every recurrent layer's state (a sequence started again).
    void clear_recurrent();

  private:
    float* state_at(size_t offset) { return reinterpret_cast<float*>(buffer_.data() + offset); }
    struct Layer {
        size_t k_offset = 0, v_offset = 0;
        size_t k_row_bytes = 0, v_row_bytes = 0;
        uint32_t n_embd_k = 0, n_embd_v = 0;
        size_t state_bytes = 0;  // a recurrent layer's, from k_offset; 0 for attention layers
        uint32_t positions = 0;  // slots
    };
    KvType type_ = KvType::F16;
    uint32_t n_ctx_ = 0;
    std::vector<Layer> layers_;
    AlignedBuffer buffer_;
};

}  // namespace strata::cpu
