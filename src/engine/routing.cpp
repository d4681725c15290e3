#include "engine/routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace strata::engine {

namespace {

// Softmax as the reference engine computes it: maximum subtracted, exponentials summed in double.
void softmax_into(const float* logits, int n, std::vector<float>& probs) {
    probs.assign(logits, logits + n);
    float max = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) max = std::max(max, probs[size_t(i)]);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        probs[size_t(i)] = std::exp(probs[size_t(i)] - max);
        sum += probs[size_t(i)];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int i = 0; i < n; ++i) probs[size_t(i)] *= inv;
}

}  // namespace

// The chosen experts' weights under SoftmaxTopK: a softmax over their k logits.
// Softmaxed as softmax_into does, in place in `weight`.
void softmax_of_chosen(const float* logits, int k, const int32_t* choice, float* weight) {
    float max = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < k; ++i) max = std::max(max, logits[choice[i]]);
    double sum = 0.0;
    for (int i = 0; i < k; ++i) {
        weight[i] = std::exp(logits[choice[i]] - max);
        sum += weight[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int i = 0; i < k; ++i) weight[i] *= inv;
}

void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight,
                 RoutingScratch& sc) {
    if (cfg.gating == ExpertGating::SoftmaxTopK) {
        // The order of the logits is the order of any softmax of them.
        sc.probs.assign(logits, logits + cfg.n_expert);
    } else {
        softmax_into(logits, cfg.n_expert, sc.probs);
    }
    const std::vector<float>& probs = sc.probs;
    sc.order.resize(size_t(cfg.n_expert));
    std::iota(sc.order.begin(), sc.order.end(), 0);
    std::partial_sort(
        sc.order.begin(), sc.order.begin() + cfg.n_used, sc.order.end(), [&](int32_t a, int32_t b) {
            return probs[size_t(a)] != probs[size_t(b)] ? probs[size_t(a)] > probs[size_t(b)]
                                                        : a < b;
        });
    float sum = 0.0f;
    for (int k = 0; k < cfg.n_used; ++k) {
        choice[k] = sc.order[size_t(k)];
        weight[k] = probs[size_t(sc.order[size_t(k)])];
        sum += weight[k];
    }
    if (cfg.gating == ExpertGating::SoftmaxTopK) {
        softmax_of_chosen(logits, cfg.n_used, choice, weight);
        sum = 1.0f;
    }
    if (cfg.norm_weights) {
        for (int k = 0; k < cfg.n_used; ++k) weight[k] /= sum;
    }
}

void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight) {
    RoutingScratch scratch;
    route_token(logits, cfg, choice, weight, scratch);
}

void force_route(const float* logits, const MoeConfig& cfg, std::span<const int32_t> experts,
                 int32_t* choice, float* weight, RoutingScratch& sc) {
    softmax_into(logits, cfg.n_expert, sc.probs);
    float sum = 0.0f;
    for (int i = 0; i < cfg.n_used; ++i) {
        choice[i] = experts[size_t(i)];
        weight[i] = sc.probs[size_t(choice[i])];
        sum += weight[i];
    }
    if (cfg.gating == ExpertGating::SoftmaxTopK) {
        softmax_of_chosen(logits, cfg.n_used, choice, weight);
        return;
    }
    if (cfg.norm_weights && sum > 0) {
        for (int i = 0; i < cfg.n_used; ++i) weight[i] /= sum;
    }
}

}  // namespace strata::engine
