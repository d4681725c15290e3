// Mixture-of-experts routing: which experts each token of a batch goes to and with what weight
// (router softmax, top-k, optional renormalisation), decided on the host by the engine. The
// experts' arithmetic is the backend's (Backend::expert); which experts to fetch, and when, is
// the engine's and the store's business, so routing lives here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/routing_trace.h"
#include "model/hparams.h"

namespace strata::engine {

struct MoeConfig {
    int n_expert = 0;
    int n_used = 0;
    bool norm_weights = false;  // renormalise the selected experts' weights to sum 1
    // Softmax over every expert then the top k, or the top k logits softmaxed alone (gpt-oss).
    ExpertGating gating = ExpertGating::Softmax;
    // Benchmarks: the experts come from this trace (at the tokens' positions) instead of the
    // router's top-k, weighted by the router's probabilities of them (routing_trace.h).
    const RoutingTrace* forced = nullptr;
    int64_t pos0 = 0;  // position of the batch's first token
};

// Routing counts of one MoE layer, accumulated over a run.
struct MoeLayerStats {
    uint64_t token_choices = 0;  // tokens x n_used
    uint64_t expert_loads = 0;   // experts fetched from the store (once per batch each)
};

// Scratch of routing, sized once so that routing a batch allocates nothing.
struct RoutingScratch {
    std::vector<float> probs;
    std::vector<int32_t> order;
};

// The top-k selection of one token: n_used expert ids in decreasing logit (lower id first on
// ties) and their weights: their probabilities under a softmax over all n_expert `logits`, or,
// with ExpertGating::SoftmaxTopK, a softmax over the n_used chosen logits alone.
void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight,
                 RoutingScratch& scratch);
// The same with its own scratch, for tests.
void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight);

// The trace's experts in place of the router's, weighted by the router's probabilities.
void force_route(const float* logits, const MoeConfig& cfg, std::span<const int32_t> experts,
                 int32_t* choice, float* weight, RoutingScratch& scratch);

}  // namespace strata::engine
