// Multi-head latent attention (deepseek2) on the CPU, in its absorbed form: every head attends
// over the layer's latent cache directly, as multi-query attention with one shared key row per
// position ([latent | rotary key], kv_lora_rank + n_rot values) whose latent part is also the
// value.
//
// The heads' queries arrive already taken into the latent's space (q' = [W_uk^T q_nope | q_rope],
// mla_absorb_queries), so a score is one dot product with the cached row, as the reference engine
// computes it when the projections are absorbed: the query rounded to the cache's type (F16 for
// the default cache), dotted with the row, scaled, masked to the positions at or before the
// query's, softmaxed; the output is the softmax-weighted sum of the rows' latent parts (the
// weights rounded to F16 with the F16 cache, as the reference's value product rounds them).
//
// Rows are laid out head-major (row h * n + t is head h of token t), which is how the per-head
// up-projections before and after take them (one matrix per head, its tokens' rows together).
// Each row's arithmetic is the same however the rows are shared out over tasks and threads: its
// scores are one product per cached row, and its output sums the positions in order.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kv_cache.h"
#include "model/activation_memory.h"
#include "model/tensor_view.h"
#include "util/thread_pool.h"

namespace strata::cpu {

struct MlaShape {
    int n_head = 0;
    int rank = 0;   // n_lora_kv: the latent's values, the first of each cached row
    int n_rot = 0;  // the rotary key after them
    float scale = 1.0f;
    int row_width() const { return rank + n_rot; }
};

// q: n_head * n rows of row_width() floats, head-major, for the tokens at positions
// pos0 .. pos0+n-1, whose rows are already cached. out: n_head * n rows of rank floats, in the
// same order. With `decode_scores` (reserved by reserve_mla_scratch), a decode step over a long
// context is shared out by positions, each cached row read once, rather than by heads; both give
// the same bits.
void mla_attention(const KvCache& kv, int layer, const MlaShape& s, const float* q, int64_t n,
                   int64_t pos0, float* out, ThreadPool& pool,
                   std::vector<float>* decode_scores = nullptr);

// A task takes at most kMlaRowsPerTask rows and dequantizes kMlaPositionsPerTile cached latent
// parts at a time (model/activation_memory.h, which counts their scratch).
//
// Gives every thread of the pool the scratch of an attention task over n_ctx positions, and
// `decode_scores` every head's scores over them, so that attention never allocates however long
// the context grows (model/activation_memory.h counts it).
void reserve_mla_scratch(const KvCache& kv, const MlaShape& s, std::vector<float>& decode_scores,
                         ThreadPool& pool);

// The queries' absorption into the latent's space from a layer's attn_kv_b (the earlier files,
// ModelHparams::mla_kv_b), whose key rows of head h are W_uk(h) itself ([nope][rank]), so the
// product is with its transpose: y[h * n + t] = W_uk(h)^T x[h * n + t] (rank floats from nope),
// each head's rows dequantized once and summed in row order. (attn_k_b stores W_uk(h)^T, which
// the ordinary matrix products take.) Rows head-major, as above.
void mla_absorb_transposed(const TensorView& kv_b, int n_head, int nope, int head_dim_v,
                           const float* x, int64_t n, float* y, ThreadPool& pool);
// Gives every thread of the pool room for one head's dequantized key rows.
void reserve_mla_absorb_scratch(int nope, int rank, ThreadPool& pool);

}  // namespace strata::cpu
