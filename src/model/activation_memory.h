// The memory the engine holds besides the weights and the KV cache while it runs a model: the
// activations and scratch of the CPU backend for its batch and context, the driver's routing
// buffers, its compute threads, and the logits it hands out with what sampling keeps per token
// id. The plan counts these bytes against the RAM budget (plan/plan.h) and the CPU backend sizes
// its buffers by the same shapes (every buffer is reserved once at its largest, so growing a
// vector never overshoots), so the two cannot drift apart unnoticed: a test counts the bytes the
// backend allocates against activation_memory().
//
// It lives in model/ because both the plan and the backend see model/ and neither may see the
// other (docs/design.md, "Floors").
//
// Shapes, for R rows (the batch, at most the context), T threads, a widest query group G (query
// heads per KV head) and n_ctx positions:
//   rows       R x (4 n_embd + q + k + v + attention out) floats          (backend activations)
//   ffn        R x 2 x widest FFN; MoE also R x (k + 2) x n_embd floats   (FFN intermediates)
//   matmul     R x the widest converted activation row, per activation type of the q/k/v and
//              gate/up projections, and the scalar path's column block    (calling thread)
//   attention  T x (min(R, 32) x G query rows x n_ctx scores + their conversions), and (F16
//              cache) n_head x n_ctx scores of a decode step split over positions; latent
//              attention (MLA) instead: T x (32 rows x n_ctx scores + 32 latent rows), and for
//              a chunk of C = min(R, 32) tokens C x n_head rows of queries, absorbed queries,
//              latent outputs and value heads
//   engine     MoE routing: R x n_expert router logits, R x k choices
//   threads    T x kComputeThreadBytes (stack, thread-local state)
//   logits     logit rows x n_vocab floats + n_vocab x kSamplerBytesPerToken
#pragma once

#include <cstdint>

#include "model/kv_layout.h"
#include "model/model_info.h"

namespace strata {

// Query tokens one attention task takes (a block of the batch): the attention scratch of a thread
// holds this many tokens' scores over the whole context.
inline constexpr int64_t kAttentionTokensPerTask = 32;
// Tokens of a run whose latent attention is computed at a time (every head's rows together),
// the (head, token) rows one latent-attention task takes at most (its scores span the context),
// and the cached positions whose latent parts it dequantizes at a time for the weighted sum.
inline constexpr int64_t kMlaTokensPerChunk = 32;
inline constexpr int64_t kMlaRowsPerTask = 32;
inline constexpr int64_t kMlaPositionsPerTile = 32;
// Tokens a Gated DeltaNet prompt is computed in at a time (backend/cpu/delta_net.h).
inline constexpr int64_t kDeltaNetChunk = 64;
// Activation columns the scalar matmul path dequantizes at a time.
inline constexpr int64_t kScalarMatmulColumns = 16;
// What the engine keeps per chosen expert of a layer to hand them to the backend at once: an
// ExpertJob (three tensor views and two spans), at most.
inline constexpr uint64_t kExpertJobBytes = 512;
// A compute thread's own memory: the pages of its stack it touches and its thread-local state.
inline constexpr uint64_t kComputeThreadBytes = 256ull << 10;
// What sampling and the generation loop keep per token id: the logits and a raw copy (4 + 4),
// the candidates (8) and their weights (8), penalty counts (4), log-probability ranks (4) and a
// top-p edge (8), with room for vectors that grow by doubling.
inline constexpr uint64_t kSamplerBytesPerToken = 64;

struct ActivationShape {
    uint32_t max_batch = 512;  // tokens evaluated together (at most n_ctx are ever used)
    uint32_t n_ctx = 0;        // 0: default_context()
    KvType kv_type = KvType::F16;
    int threads = 1;          // compute threads, the calling one included
    uint32_t logit_rows = 1;  // rows of logits one evaluation returns (1: the last token's)
};

struct ActivationMemory {
    uint64_t rows = 0;       // the backend's activations of a batch
    uint64_t ffn = 0;        // FFN and routed-expert intermediates
    uint64_t matmul = 0;     // activations converted for the weights' dot products
    uint64_t attention = 0;  // per-thread attention scratch over the whole context
    uint64_t engine = 0;     // the driver's routing buffers
    uint64_t threads = 0;    // compute threads
    uint64_t logits = 0;     // logits returned and sampling's per-token-id arrays

    // What the CPU backend allocates (everything but the engine's, threads and logits).
    uint64_t backend() const { return rows + ffn + matmul + attention; }
    uint64_t total() const { return backend() + engine + threads + logits; }
};

// The widest FFN the engine computes, which its intermediates are sized for: the dense FFN's
// (the widest layer), or in a mixture of experts the widest of an expert's, the shared expert's
// and any leading dense layer's.
uint32_t widest_ffn(const ModelHparams& hp);

// The widest activation row that crosses between two backends (Engine::cross): n_embd, or a
// layer's queries or attention output where those are wider (a split's shipped projections).
int64_t widest_crossing(const ModelHparams& hp);

// Rows a batch can take: max_batch, at most n_ctx, at least 1.
uint32_t batch_rows(uint32_t max_batch, uint32_t n_ctx);

// PRECONDITION: model.hparams is set.
ActivationMemory activation_memory(const ModelInfo& model, const ActivationShape& shape);

// What a GPU backend holds in device memory besides weights and KV cache, for the plan's GPU
// budget: the batch's activations (the rows above), the FFN and expert intermediates, the
// logits of a chunk of rows, the fp16 staging of prompt GEMMs (the largest layer matrix and a
// batch of activations), cuBLAS's workspace and flash-decoding's partial results.
struct GpuActivationShape {
    uint32_t max_batch = 512;
    uint32_t n_ctx = 0;
};
inline constexpr uint64_t kGpuLibraryWorkspace = 64ull << 20;  // cuBLAS workspace and the like
inline constexpr int64_t kGpuLogitRowsPerChunk = 16;
uint64_t gpu_activation_bytes(const ModelHparams& hp, const GpuActivationShape& shape);

}  // namespace strata
