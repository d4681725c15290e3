// Mixture-of-experts routing: which experts each token of a batch goes to and with what weight,
// decided on the host by the engine: the router's scores (a softmax or a sigmoid of its logits),
// a per-expert bias added to them to choose (not to weigh), group-limited top-k, the chosen
// weights renormalised and scaled. The experts' arithmetic is the backend's (Backend::expert);
// which experts to fetch, and when, is the engine's and the store's business, so routing lives
// here.
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
    // Benchmarks: the experts come from this trace (at the tokens' positions) instead of the
    // router's top-k, weighted by the router's probabilities of them (routing_trace.h).
    const RoutingTrace* forced = nullptr;
    int64_t pos0 = 0;  // position of the batch's first token
    // Softmax over every expert then the top k, the top k logits softmaxed alone (gpt-oss), or
    // a sigmoid of each logit (DeepSeek-V3, GLM-4.5).
    ExpertGating gating = ExpertGating::Softmax;
    // n_expert floats added to the scores to choose the experts (exp_probs_b); null: none.
    const float* selection_bias = nullptr;
    // Group-limited top-k: n_group equal groups of consecutive experts, of which the n_group_used
    // whose two best biased scores sum highest are kept; n_group <= 1: no groups.
    int n_group = 0;
    int n_group_used = 0;
    // The final weights times this (after the renormalisation).
    float weights_scale = 1.0f;
};

// The routing the hparams describe (gating, groups, scale), for one layer whose selection bias
// (host floats, or null) is given.
MoeConfig moe_config(const ModelHparams& hp, bool norm_weights, const float* selection_bias);

// Routing counts of one MoE layer, accumulated over a run.
struct MoeLayerStats {
    uint64_t token_choices = 0;  // tokens x n_used
    uint64_t expert_loads = 0;   // experts fetched from the store (once per batch each)
};

// Scratch of routing, sized once so that routing a batch allocates nothing.
struct RoutingScratch {
    std::vector<float> probs;      // the scores that weigh
    std::vector<float> selection;  // the scores that choose
    std::vector<float> groups;     // each group's score (group-limited routing)
    std::vector<int32_t> order;
};

// The renormalisation divides by the chosen weights' sum, clamped below at this (the smallest
// normal half, as the reference clamps it), so that k tiny sigmoid scores do not blow up.
inline constexpr float kMinChosenWeightSum = 6.103515625e-5f;

// The top-k selection of one token: n_used expert ids in decreasing selection score (lower id
// first on ties) and their weights. The scores are a softmax over all n_expert `logits`, the
// logits themselves (SoftmaxTopK) or their sigmoids; the selection score is the score plus the
// selection bias, masked to the kept groups when routing is group-limited. The weights are the
// chosen experts' scores (under SoftmaxTopK a softmax over their logits alone), renormalised to
// sum 1 with norm_weights, then times weights_scale.
void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight,
                 RoutingScratch& scratch);
// The same with its own scratch, for tests.
void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight);

// The trace's experts in place of the router's, weighted as route_token weighs chosen experts.
void force_route(const float* logits, const MoeConfig& cfg, std::span<const int32_t> experts,
                 int32_t* choice, float* weight, RoutingScratch& scratch);

}  // namespace strata::engine
