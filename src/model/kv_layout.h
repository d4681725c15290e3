// What a model's KV cache takes, whoever holds it: the element types it can be stored in, its
// size for a context, and the context strata opens by default. The plan sizes memory with these
// and every backend lays out its cache by the same rows, so the two can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/hparams.h"
#include "util/result.h"

namespace strata {

// The context EngineOptions::n_ctx == 0 stands for: the model's training context, at most this.
inline constexpr uint32_t kDefaultContextCap = 4096;
uint32_t default_context(const ModelHparams& hp);

// F16 (the default, as in the reference engine) or Q8_0 (half the memory, for long contexts).
enum class KvType { F16, Q8_0 };
std::string_view kv_type_name(KvType t);  // "f16", "q8_0"
Result<KvType> parse_kv_type(std::string_view name);

// Bytes of one cache row of n elements (n a multiple of 32 for Q8_0).
size_t kv_row_bytes(KvType type, uint64_t n);
// Each layer's keys and values are padded to this, so every layer starts aligned for SIMD loads.
inline constexpr uint64_t kKvLayerAlign = 64;
// The fixed-size recurrent state of one Gated DeltaNet layer for one sequence, which hybrid
// models keep beside their KV cache in its place: the convolution's last d_conv - 1 inputs
// ((d_conv - 1) x conv_channels floats) and each value head's S_v x S_k state matrix, in F32,
// each padded to kKvLayerAlign.
uint64_t recurrent_conv_bytes(const ModelHparams& hp);
uint64_t recurrent_delta_bytes(const ModelHparams& hp);
// Every recurrent layer's state for one sequence: the part of kv_cache_bytes that is not keys
// and values (0 for models without recurrent layers).
uint64_t recurrent_state_bytes(const ModelHparams& hp);
// The batch the engine evaluates by default (EngineOptions::max_batch, PlanOptions::max_batch).
inline constexpr uint32_t kDefaultMaxBatch = 512;
// Positions a layer's cache holds for a context of n_ctx: all of them, or for a sliding-window
// layer a ring of the window plus a batch (a batch's first query still sees the window before
// it once the whole batch is stored), at most n_ctx. Position p lives in slot p % positions.
uint32_t kv_layer_positions(const ModelHparams& hp, uint32_t layer, uint32_t n_ctx,
                            uint32_t max_batch);
// Bytes a cache of n_ctx positions takes for one layer, and for every layer of the model, with
// batches of up to max_batch tokens (which only sliding-window layers depend on). A recurrent
// layer holds no keys or values, only its recurrent state (above), whatever n_ctx. A latent
// attention layer holds one row of mla_cache_width() values per position (the normalised latent
// and the rotary key; the values are the latent part of the same rows).
uint64_t kv_layer_bytes(const ModelHparams& hp, uint32_t layer, uint32_t n_ctx, KvType type,
                        uint32_t max_batch = kDefaultMaxBatch);
uint64_t kv_cache_bytes(const ModelHparams& hp, uint32_t n_ctx, KvType type,
                        uint32_t max_batch = kDefaultMaxBatch);
// An error when the model's head sizes cannot be stored in `type`.
Result<void> check_kv_type(const ModelHparams& hp, KvType type);

}  // namespace strata
