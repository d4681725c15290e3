// Feed-forward blocks: the dense SwiGLU FFN of llama-style models and the mixture-of-experts
// FFN (router softmax, top-k experts, optional renormalisation, optional shared expert).
//
// The MoE block asks the store for each selected expert only after routing, and for a batch of
// tokens loads each expert once for all the tokens that picked it (the union of the batch's
// choices), so the same code serves resident and streamed experts.
#pragma once

#include <cstdint>
#include <vector>

#include "util/thread_pool.h"
#include "engine/routing_trace.h"
#include "store/weight_store.h"
#include "util/result.h"

namespace strata::engine {

struct FfnBuffers {
    std::vector<float> gate, up, hidden;
};

// out = down(silu(gate x) * up x) for n rows of x.
void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                const float* x, int64_t n, float* out, FfnBuffers& buf, ThreadPool& pool);

struct MoeConfig {
    int n_expert = 0;
    int n_used = 0;
    bool norm_weights = false;  // renormalise the selected experts' weights to sum 1
    // Benchmarks: the experts come from this trace (at the tokens' positions) instead of the
    // router's top-k, weighted by the router's probabilities of them (routing_trace.h).
    const RoutingTrace* forced = nullptr;
    int64_t pos0 = 0;  // position of the batch's first token
};

// Routing counts of one MoE layer, accumulated over a run.
struct MoeLayerStats {
    uint64_t token_choices = 0;   // tokens x n_used
    uint64_t expert_loads = 0;    // experts fetched from the store (once per batch each)
};

struct MoeBuffers {
    FfnBuffers ffn;
    std::vector<float> router_logits, x_rows, y_rows, slot_out;
    std::vector<int32_t> choice;    // [n][n_used] expert ids
    std::vector<float> weight;      // [n][n_used]
};

// Routes n rows of x to their top experts and writes the weighted sum of the experts' outputs
// to out (n rows of n_embd). `router` is the layer's ffn_gate_inp.
Result<void> moe_ffn(WeightStore& store, int layer, const TensorView& router,
                     const MoeConfig& cfg, const float* x, int64_t n, int64_t n_embd, float* out,
                     MoeBuffers& buf, MoeLayerStats* stats, ThreadPool& pool);

// The top-k selection on its own (softmax, pick, renormalise), for tests: writes n_used expert
// ids in decreasing probability (lower id first on ties) and their weights.
void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight);

}  // namespace strata::engine
