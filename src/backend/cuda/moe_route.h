// MoE routing on the GPU: the top-k experts of each token from its router logits, decided as
// engine::route_token decides on the host (a softmax with the maximum subtracted and the sum in
// double, the logits themselves, or their sigmoids as scores; a selection bias added to choose;
// group-limited top-k; the k best in decreasing selection score with the lower id first on ties;
// their scores as weights, optionally renormalised to sum 1, then scaled; or gpt-oss' softmax
// over the k chosen logits alone), so that a resident MoE decode step needs no round trip to the
// host. The scores differ from the host's in the last bits (the device's expf), which can only
// matter where two experts are that close.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

// The most experts a router may have, and the most a token may choose.
inline constexpr int kMaxRoutedExperts = 1024;
inline constexpr int kMaxExpertsUsed = 32;

// How the chosen experts' weights come from the router's logits:
//   SoftmaxOfAll:    softmax over all n_expert logits, the k most probable, their
//                    probabilities (Mixtral, Qwen MoE);
//   SoftmaxOfChosen: the k largest logits, then a softmax over those k alone (gpt-oss);
//   Sigmoid:         each logit's sigmoid, the k largest, their sigmoids (DeepSeek-V3, GLM-4.5).
// Either way the k are in decreasing order, the lower id first on ties.
enum class RouteGating : uint8_t { SoftmaxOfAll, SoftmaxOfChosen, Sigmoid };

// Everything but the logits that decides a token's experts and their weights.
struct RouteSpec {
    RouteGating gating = RouteGating::SoftmaxOfAll;
    bool norm_weights = false;  // the k weights divided by their sum (choice order), clamped
    // n_expert floats (device memory) added to the scores to choose, not to weigh; null: none.
    const float* selection_bias = nullptr;
    // Group-limited top-k: n_group equal groups of consecutive experts, the n_group_used whose
    // two best biased scores sum highest kept (lower group first on ties); n_group <= 1: none.
    int n_group = 0;
    int n_group_used = 0;
    float scale = 1.0f;  // the final weights times this
    bool operator==(const RouteSpec&) const = default;
};

// For t < n: choice[t * k + j] and weight[t * k + j], j < k, from logits[t * n_expert ..] as
// `spec` says.
// PRECONDITION: 1 <= k <= min(n_expert, kMaxExpertsUsed), n_expert <= kMaxRoutedExperts; with
// groups, n_expert a multiple of n_group, two or more experts a group, 1 <= n_group_used <
// n_group and k at most the kept groups' experts; all pointers device memory.
void route_top_k(const float* logits, int64_t n, int n_expert, int k, const RouteSpec& spec,
                 int32_t* choice, float* weight, cudaStream_t stream);

// The slots (token t's choice j is slot t * k + j) grouped by expert, experts ascending: the
// u-th slot of the grouping is order[u], its expert ids[u] and its weight sorted_weight[u]. The
// order within an expert is not fixed; each slot's result does not depend on it. Grouped, the
// slots of one expert run next to each other and share its weights in the L2 cache.
// PRECONDITION: slots <= 65535 * 16, n_expert <= kMaxRoutedExperts, choices < n_expert.
void group_slots_by_expert(const int32_t* choice, const float* weight, int64_t slots, int n_expert,
                           int64_t* order, int32_t* ids, float* sorted_weight, cudaStream_t stream);

// out[t][i] = sum over j < k of weight[t * k + j] * y[(t * k + j)][i] for t < n, i < d: the
// chosen experts' outputs weighted and summed in choice order (each product rounded, then
// added, as the host backend does).
void sum_weighted_slots(const float* y, const float* weight, int k, int64_t n, int64_t d,
                        float* out, cudaStream_t stream);

}  // namespace strata::cuda
