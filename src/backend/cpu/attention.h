// Causal multi-head attention over the KV cache, with grouped-query heads.
//
// Computed as the reference engine does without flash attention: scores = K q (the query rounded
// to the key type, F16 for the default cache), scaled by 1/sqrt(head_dim), masked to the
// positions at or before the query's (and, in a sliding-window layer, after the window's start),
// softmax (with a head's sink logit in the denominator when the model has sinks), then V^T w with
// the weights rounded to F16. Both
// products run on the quantized matmul kernels, one task per KV head and block of query tokens,
// so the query heads sharing a KV head are multiplied together.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/kv_cache.h"
#include "util/thread_pool.h"

namespace strata::cpu {

struct AttentionShape {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    float scale = 1.0f;  // applied to q.k before the softmax
    // n_head logits that join each head's softmax denominator and weigh no value (gpt-oss's
    // attention sinks); null: none.
    const float* sinks = nullptr;
    // A query at position p sees keys p - window + 1 .. p; 0: every earlier position.
    int64_t window = 0;
};

// What the tasks of one decode step share when it is split over positions (more threads than
// KV heads): every query head's scores over the context, and per KV head a count of its
// finished chunks. One per backend, reserved with its scratch.
struct DecodeScratch {
    std::vector<float> scores;
    std::unique_ptr<std::atomic<int>[]> finished;
    int kv_heads = 0;  // counts in `finished`
};

// q: n rows of n_head * head_dim_k (already rotated) for the tokens at positions pos0 .. pos0+n-1,
// whose keys and values are already in the cache (in a ring, kv.positions(layer) slots, for a
// sliding-window layer: it holds the window before pos0 and the n positions). out: n rows of n_head
// * head_dim_v. Gives every thread of the pool scratch for a task over the whole context (a block
// of up to kAttentionTokensPerTask of max_batch tokens, the widest query group), and the calling
// thread the scores of every query head (at most `most_heads`, of `most_kv_heads` KV heads) for a
// decode step split over positions, so that attention never allocates however long the context
// grows, and never holds more than model/activation_memory.h counts.
void reserve_attention_scratch(const KvCache& kv, const AttentionShape& widest, int most_heads,
                               int most_kv_heads, int64_t max_batch, DecodeScratch& shared,
                               ThreadPool& pool);

// With `shared` (reserved for this context), a decode step on more threads than KV heads is split
// over positions; without, over query heads. Both give the same bits.
void attention(const KvCache& kv, int layer, const AttentionShape& s, const float* q, int64_t n,
               int64_t pos0, float* out, ThreadPool& pool, DecodeScratch* shared = nullptr);

}  // namespace strata::cpu
