// Causal multi-head attention over the KV cache, with grouped-query heads.
//
// Computed as the reference engine does without flash attention: scores = K q (the query rounded
// to the key type, F16 for the default cache), scaled by 1/sqrt(head_dim), masked to the
// positions at or before the query's, softmax, then V^T w with the weights rounded to F16. Both
// products run on the quantized matmul kernels, one task per KV head and block of query tokens,
// so the query heads sharing a KV head are multiplied together.
#pragma once

#include <cstdint>

#include "backend/cpu/kv_cache.h"
#include "util/thread_pool.h"

namespace strata::cpu {

struct AttentionShape {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    float scale = 1.0f;  // applied to q.k before the softmax
};

// q: n rows of n_head * head_dim_k (already rotated) for the tokens at positions pos0 .. pos0+n-1,
// whose keys and values are already in the cache. out: n rows of n_head * head_dim_v.
// Gives every thread of the pool scratch for a task over the whole context (a block of up to
// kAttentionTokensPerTask of max_batch tokens, the widest query group), so that attention never
// allocates however long the context grows, and never holds more than
// model/activation_memory.h counts.
void reserve_attention_scratch(const KvCache& kv, const AttentionShape& widest, int64_t max_batch,
                               ThreadPool& pool);

void attention(const KvCache& kv, int layer, const AttentionShape& s, const float* q, int64_t n,
               int64_t pos0, float* out, ThreadPool& pool);

}  // namespace strata::cpu
