#include "model/activation_memory.h"

#include <algorithm>
#include <set>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace strata {

namespace {

// Bytes of one row of n activations converted for dot products with weights of type t.
uint64_t converted_row_bytes(TensorType t, uint64_t n) {
    if (!quant::is_quant_supported(t) || t == TensorType::Q8_1 || t == TensorType::Q8_K) {
        return n * sizeof(float);  // not a matmul weight: at most a float row
    }
    const TensorType act = quant::vec_dot_type(t);
    auto bytes = quant::quant_row_bytes(act, int64_t(n));
    if (!bytes) return n * sizeof(float);
    // Q8_0 rows may carry a float and an int per block for the row-interleaved kernels
    // (backend/cpu/tile_kernel.h, Q8_0Side), after 8-byte alignment.
    return act == TensorType::Q8_0 ? *bytes + 8 + n / quant::kQK * 8 : *bytes;
}

TensorType kv_element_type(KvType t) {
    return t == KvType::F16 ? TensorType::F16 : TensorType::Q8_0;
}

// Latent attention (backend/cpu/mla_attention.h): on every thread a task's scores over the
// context, a tile of latent parts and its queries converted for the cache's type (and, for
// attn_kv_b files, one head's key rows dequantized); on the calling thread, for a chunk of
// tokens of every head, the queries, absorbed queries, latent outputs and value heads, their
// conversions for the per-head products and those products' job lists, and a decode step's
// scores of every head.
uint64_t mla_attention_memory(const ModelInfo& model, uint32_t n_head, uint64_t R, uint64_t T,
                              uint64_t n_ctx, TensorType kv) {
    const ModelHparams& hp = *model.hparams;
    const uint64_t f = sizeof(float), rank = hp.n_lora_kv, width = hp.mla_cache_width(),
                   nope = hp.head_dim_nope(), v = hp.head_dim_v;
    // A task's rows over the context, or a decode step's heads over a quarter of it.
    uint64_t per_thread =
        std::max<uint64_t>(uint64_t(kMlaRowsPerTask) * n_ctx, uint64_t(n_head) * (n_ctx / 4 + 1)) *
            f +
        uint64_t(kMlaPositionsPerTile) * rank * f +
        uint64_t(kMlaRowsPerTask) * converted_row_bytes(kv, width);
    if (hp.mla_kv_b) per_thread += nope * rank * f;
    const uint64_t rows = std::min<uint64_t>(R, kMlaTokensPerChunk) * n_head;
    uint64_t converted = 0;
    for (const ModelTensor& mt : model.tensors) {
        const TensorInfo& t = model.info(mt);
        if (mt.role == TensorRole::AttnKB || mt.role == TensorRole::AttnVB ||
            mt.role == TensorRole::AttnKvB) {
            converted = std::max(converted, converted_row_bytes(t.type, t.shape[0]));
        }
    }
    const uint64_t chunk = rows * (std::max(nope, rank) + std::max(rank, v) + width) * f;
    // A job list of a few items per head, and the head's segment.
    const uint64_t jobs = n_head * (4 * 24 + 64);
    // A decode step's scores of every head over the context, shared by its tasks.
    const uint64_t decode = uint64_t(n_head) * n_ctx * f;
    return T * per_thread + chunk + rows * converted + jobs + decode;
}

}  // namespace

uint32_t widest_ffn(const ModelHparams& hp) {
    uint32_t widest = hp.is_moe() ? std::max(hp.n_ff_exp, hp.n_ff_shexp) : hp.n_ff;
    const uint32_t dense_layers =
        hp.is_moe() ? std::min(hp.n_leading_dense, hp.n_layer) : hp.n_layer;
    for (uint32_t l = 0; l < dense_layers; ++l) widest = std::max(widest, hp.n_ff_at(l));
    return widest;
}

int64_t widest_crossing(const ModelHparams& hp) {
    int64_t widest = hp.n_embd;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        widest = std::max({widest,
                           int64_t(hp.n_head_at(l)) * hp.head_dim_k * (hp.attn_output_gate ? 2 : 1),
                           int64_t(hp.n_head_at(l)) * hp.head_dim_v});
    }
    return widest;
}

uint32_t batch_rows(uint32_t max_batch, uint32_t n_ctx) {
    return std::max<uint32_t>(1, n_ctx ? std::min(max_batch, n_ctx) : max_batch);
}

ActivationMemory activation_memory(const ModelInfo& model, const ActivationShape& shape) {
    const ModelHparams& hp = *model.hparams;
    const uint64_t n_ctx = shape.n_ctx ? shape.n_ctx : default_context(hp);
    const uint64_t R = batch_rows(shape.max_batch, uint32_t(n_ctx));
    const uint64_t T = uint64_t(std::max(1, shape.threads));
    const uint64_t f = sizeof(float);
    const uint64_t d = hp.n_embd;

    uint64_t n_head = 0, n_head_kv = 0, group = 1;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        n_head = std::max<uint64_t>(n_head, hp.n_head_at(l));
        n_head_kv = std::max<uint64_t>(n_head_kv, hp.n_head_kv_at(l));
        group = std::max<uint64_t>(group, hp.n_head_at(l) / std::max(1u, hp.n_head_kv_at(l)));
    }
    const uint64_t ff = widest_ffn(hp);
    const uint64_t k = hp.n_expert_used;

    ActivationMemory m;
    // Hidden, Normed, Out, Side; Q, K, V, AttnOut (as wide as a delta net's output where that is
    // wider); a sigmoid gate per row; rope's angles.
    const uint64_t attn_out = std::max<uint64_t>(n_head * hp.head_dim_v, hp.ssm_value_dim());
    // Latent attention has no K and V rows but its compressed query and latent.
    const uint64_t kv_rows = hp.is_mla() ? uint64_t(hp.n_lora_q) + hp.mla_cache_width()
                                         : n_head_kv * (hp.head_dim_k + hp.head_dim_v);
    m.rows = R * (4 * d + n_head * hp.head_dim_k + kv_rows + attn_out) * f + R * f +
             uint64_t(hp.n_rot / 2) * 2 * f;
    if (hp.has_recurrent()) {
        // Hybrid models: Mixed (a gated query or a delta net's q/k/v), Gate, Beta and Alpha rows,
        // a fused projection's output (qwen3next) and per thread the scratch of a delta-net
        // chunk (backend/cpu/delta_net.h).
        const uint64_t mixed = std::max<uint64_t>(2 * n_head * hp.head_dim_k, hp.conv_channels());
        const uint64_t gate = std::max<uint64_t>(n_head * hp.head_dim_v, hp.ssm_value_dim());
        m.rows += R * (mixed + gate + 2 * uint64_t(hp.ssm_dt_rank) + hp.ssm_fused_dim()) * f;
        const uint64_t C = kDeltaNetChunk, S = hp.ssm_d_state;
        m.rows += uint64_t(std::max(1, shape.threads)) * (C + 2 * C * C + 2 * C * S) * f;
    }

    // SwiGLU: gate and up rows (the product overwrites gate). Routed experts: each token's k
    // weighted outputs, and the rows of one expert gathered and computed.
    m.ffn = 2 * R * ff * f;
    // Grouped experts: two matmul segments per expert (a QuantMatrix, two row numbers, an out).
    if (hp.is_moe()) m.ffn += R * k * d * f + 2 * R * d * f + 2 * uint64_t(hp.n_expert) * 64;

    // Converted activations on the calling thread: the widest weight row (R rows), one buffer per
    // activation type among the weights of n_embd columns (q/k/v and gate/up are converted
    // together), the job list of a multi-matrix product, and the scalar path's column block and
    // per-thread weight row.
    uint64_t widest = 0, widest_cols = 0, n_embd_row = 0;
    std::set<TensorType> n_embd_types;
    for (const ModelTensor& mt : model.tensors) {
        const TensorInfo& t = model.info(mt);
        if (t.n_dims < 2) continue;
        widest = std::max(widest, converted_row_bytes(t.type, t.shape[0]));
        widest_cols = std::max<uint64_t>(widest_cols, t.shape[0]);
        if (t.shape[0] == d && quant::is_quant_supported(t.type)) {
            n_embd_types.insert(quant::vec_dot_type(t.type));
            n_embd_row = std::max(n_embd_row, converted_row_bytes(t.type, d));
        }
    }
    const uint64_t act_types = std::min<uint64_t>(4, n_embd_types.size());
    const uint64_t multi_jobs = 2 * 2 * ff * 24;  // up to one 24-byte item per row, doubled
    // Per thread, a row-interleaved tile's transposed blocks: 16 rows' codes and scales, at
    // most 20 bytes per column (backend/cpu/tile_kernels_avx512.cpp: Q8_0Lanes 18, K4Lanes
    // 19.5).
    const uint64_t interleaved = T * 20 * widest_cols;
    m.matmul = R * widest + act_types * R * n_embd_row + multi_jobs + interleaved +
               (kScalarMatmulColumns + T) * std::max(widest_cols, n_ctx) * f;

    const TensorType kv = kv_element_type(shape.kv_type);
    if (hp.is_mla()) {
        m.attention = mla_attention_memory(model, uint32_t(n_head), R, T, n_ctx, kv);
    } else {
        // Attention, on every thread: a block of query tokens of the widest group, their scores
        // over the whole context, their output, values dequantized (Q8_0 cache), and the queries
        // (keys' type) or the scores (F16 values) converted for the products.
        const uint64_t q_rows = std::min<uint64_t>(R, kAttentionTokensPerTask) * group;
        uint64_t per_thread = q_rows * (hp.head_dim_k + n_ctx + hp.head_dim_v) * f;
        if (shape.kv_type != KvType::F16) per_thread += n_ctx * hp.head_dim_v * f;
        per_thread +=
            q_rows *
            std::max(converted_row_bytes(kv, hp.head_dim_k),
                     shape.kv_type == KvType::F16 ? converted_row_bytes(kv, n_ctx) : uint64_t{0});
        m.attention = T * per_thread;
        // A decode step split over positions: every query head's scores, on the calling thread.
        if (shape.kv_type == KvType::F16) m.attention += n_head * n_ctx * f;
    }

    if (hp.is_moe()) {
        // Router logits, choices and weights, the users of each expert, routing scratch, the
        // chosen experts' jobs and ids, stats.
        m.engine = R * hp.n_expert * f + R * k * (4 + 4 + 8 + 4) + k * 8 +
                   uint64_t(hp.n_expert) * (8 + kExpertJobBytes + 4) + uint64_t(hp.n_layer) * 16;
    }
    m.threads = T * kComputeThreadBytes;
    m.logits = uint64_t(std::max(1u, shape.logit_rows)) * hp.n_vocab * f +
               uint64_t(hp.n_vocab) * kSamplerBytesPerToken;
    return m;
}

uint64_t gpu_activation_bytes(const ModelHparams& hp, const GpuActivationShape& shape) {
    const uint64_t n_ctx = shape.n_ctx ? shape.n_ctx : default_context(hp);
    const uint64_t R = batch_rows(shape.max_batch, uint32_t(n_ctx));
    const uint64_t f = sizeof(float);
    const uint64_t d = hp.n_embd;
    uint64_t n_head = 0, n_head_kv = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        n_head = std::max<uint64_t>(n_head, hp.n_head_at(l));
        n_head_kv = std::max<uint64_t>(n_head_kv, hp.n_head_kv_at(l));
    }
    const uint64_t q = n_head * hp.head_dim_k, k = n_head_kv * hp.head_dim_k,
                   v = n_head_kv * hp.head_dim_v;
    uint64_t attn = n_head * hp.head_dim_v;
    // Hybrid models: the gated query or a delta-net layer's q/k/v (Act::Mixed), the output gate,
    // the delta net's beta and alpha per value head, its output in the attention output's, and
    // a fused projection's output before it is ungrouped (qwen3next).
    uint64_t mixed = 0, gate = 0, v_heads = 0;
    const uint64_t fused = hp.ssm_fused_dim();
    if (hp.has_recurrent()) {
        mixed = std::max<uint64_t>(2 * q, hp.conv_channels());
        gate = std::max<uint64_t>(attn, hp.ssm_value_dim());
        attn = std::max<uint64_t>(attn, hp.ssm_value_dim());
        v_heads = hp.ssm_dt_rank;
    }
    const uint64_t ff = widest_ffn(hp);
    const uint64_t used = std::max(1u, hp.n_expert_used);
    uint64_t bytes = R * (4 * d + q + k + v + attn + mixed + gate + 2 * v_heads + fused) * f;
    bytes += 2 * R * ff * f + R * f;  // gate, up, a scalar per row
    bytes += std::max<uint64_t>(uint64_t(kGpuLogitRowsPerChunk) * hp.n_vocab,
                                R * std::max(1u, hp.n_expert)) *
             f;  // results read back
    if (hp.is_moe()) {
        bytes += R * used * d * f + 2 * R * d * f + R * used * (8 + 4);
        // Routing on the device: logits, choices and weights (twice: as chosen and grouped),
        // the grouped slots' inputs, SwiGLU halves and outputs, their int8 codes and the
        // GEMM's tiles of each expert's slots.
        const uint64_t slots = R * used, e = hp.n_expert;
        bytes += R * e * f + 2 * slots * (4 + 4) + slots * (2 * d + 2 * ff) * f;
        bytes += slots * std::max(d, ff) * 5 / 4 + 64 + 3 * 4 * (slots / 64 + 1 + e);
    }
    const uint64_t max_cols = std::max({d, ff, attn});
    const uint64_t max_weight = d * std::max({ff, q, k, v, d, mixed, gate, fused});
    bytes += 2 * max_weight + 2 * R * max_cols + kGpuLibraryWorkspace;  // fp16 GEMM staging
    // The int8 codes of a batch (one byte a column) and their scales (at most 8 bytes per 32).
    bytes += R * max_cols + R * max_cols / 4 + 64;
    // Flash-decoding partials: up to 64 splits of every query head of a batch's rows, each an
    // output row and its running maximum and sum.
    bytes += std::min<uint64_t>(R, 64) * n_head * 64 * (hp.head_dim_v + 2) * f;
    if (hp.is_mla()) {
        // Latent attention (cuda/mla.h): the compressed query and the latent rows of a batch, a
        // chunk's queries in the latent's space and latent outputs, and the split partials.
        const uint64_t rank = hp.n_lora_kv;
        bytes += R * (uint64_t(hp.n_lora_q) + hp.mla_cache_width()) * f;
        bytes += 2 * std::min<uint64_t>(R, kGpuMlaTokensPerChunk) * n_head * rank * f;
        bytes += 2 * uint64_t(kGpuMlaMaxSms) * kGpuMlaRowsPerBlock * (2 + rank) * f;
    }
    return bytes;
}

}  // namespace strata
