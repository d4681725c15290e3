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

// The scores that weigh the experts: a softmax of the logits, the logits themselves (their
// softmax comes after the choice), or their sigmoids.
void scores_into(const float* logits, const MoeConfig& cfg, std::vector<float>& probs) {
    const int n = cfg.n_expert;
    switch (cfg.gating) {
        case ExpertGating::Softmax:
            softmax_into(logits, n, probs);
            return;
        case ExpertGating::SoftmaxTopK:
            probs.assign(logits, logits + n);
            return;
        case ExpertGating::Sigmoid:
            probs.resize(size_t(n));
            for (int i = 0; i < n; ++i) probs[size_t(i)] = 1.0f / (1.0f + std::exp(-logits[i]));
            return;
    }
}

// The scores that choose: the weighing scores plus the selection bias, and, with groups, every
// expert outside the n_group_used best groups (by the sum of their two best scores; the lower
// group first on ties) masked to -infinity.
void selection_into(const MoeConfig& cfg, RoutingScratch& sc) {
    const int n = cfg.n_expert;
    sc.selection.assign(sc.probs.begin(), sc.probs.end());
    if (cfg.selection_bias) {
        for (int i = 0; i < n; ++i) sc.selection[size_t(i)] += cfg.selection_bias[i];
    }
    if (cfg.n_group <= 1) return;
    const int per = n / cfg.n_group;
    sc.groups.resize(size_t(cfg.n_group));
    for (int g = 0; g < cfg.n_group; ++g) {
        float best = -std::numeric_limits<float>::infinity(), second = best;
        for (int i = g * per; i < (g + 1) * per; ++i) {
            const float v = sc.selection[size_t(i)];
            if (v > best) {
                second = best;
                best = v;
            } else if (v > second) {
                second = v;
            }
        }
        sc.groups[size_t(g)] = best + second;
    }
    // The kept groups' scores become +infinity, the others' -infinity.
    constexpr float kKept = std::numeric_limits<float>::infinity();
    for (int kept = 0; kept < cfg.n_group_used; ++kept) {
        int top = -1;
        for (int g = 0; g < cfg.n_group; ++g) {
            const float v = sc.groups[size_t(g)];
            if (v == kKept) continue;
            if (top < 0 || v > sc.groups[size_t(top)]) top = g;
        }
        sc.groups[size_t(top)] = kKept;
    }
    for (int g = 0; g < cfg.n_group; ++g) {
        if (sc.groups[size_t(g)] == kKept) continue;
        for (int i = g * per; i < (g + 1) * per; ++i) {
            sc.selection[size_t(i)] = -std::numeric_limits<float>::infinity();
        }
    }
}

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

// The chosen experts' weights from their scores: softmaxed alone (SoftmaxTopK), renormalised
// (their sum in choice order), scaled.
void weigh_chosen(const float* logits, const MoeConfig& cfg, const int32_t* choice,
                  const std::vector<float>& probs, float* weight) {
    const int k = cfg.n_used;
    if (cfg.gating == ExpertGating::SoftmaxTopK) {
        softmax_of_chosen(logits, k, choice, weight);
    } else {
        for (int i = 0; i < k; ++i) weight[i] = probs[size_t(choice[i])];
        if (cfg.norm_weights) {
            float sum = 0.0f;
            for (int i = 0; i < k; ++i) sum += weight[i];
            sum = std::max(sum, kMinChosenWeightSum);
            for (int i = 0; i < k; ++i) weight[i] /= sum;
        }
    }
    if (cfg.weights_scale != 1.0f) {
        for (int i = 0; i < k; ++i) weight[i] *= cfg.weights_scale;
    }
}

}  // namespace

MoeConfig moe_config(const ModelHparams& hp, bool norm_weights, const float* selection_bias) {
    MoeConfig c;
    c.n_expert = int(hp.n_expert);
    c.n_used = int(hp.n_expert_used);
    c.norm_weights = norm_weights;
    c.gating = hp.expert_gating;
    c.selection_bias = selection_bias;
    c.n_group = int(hp.n_expert_group);
    c.n_group_used = int(hp.n_expert_group_used);
    c.weights_scale = hp.expert_weights_scale;
    return c;
}

void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight,
                 RoutingScratch& sc) {
    scores_into(logits, cfg, sc.probs);
    selection_into(cfg, sc);
    const std::vector<float>& sel = sc.selection;
    sc.order.resize(size_t(cfg.n_expert));
    std::iota(sc.order.begin(), sc.order.end(), 0);
    std::partial_sort(
        sc.order.begin(), sc.order.begin() + cfg.n_used, sc.order.end(), [&](int32_t a, int32_t b) {
            return sel[size_t(a)] != sel[size_t(b)] ? sel[size_t(a)] > sel[size_t(b)] : a < b;
        });
    for (int k = 0; k < cfg.n_used; ++k) choice[k] = sc.order[size_t(k)];
    weigh_chosen(logits, cfg, choice, sc.probs, weight);
}

void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight) {
    RoutingScratch scratch;
    route_token(logits, cfg, choice, weight, scratch);
}

void force_route(const float* logits, const MoeConfig& cfg, std::span<const int32_t> experts,
                 int32_t* choice, float* weight, RoutingScratch& sc) {
    scores_into(logits, cfg, sc.probs);
    for (int i = 0; i < cfg.n_used; ++i) choice[i] = experts[size_t(i)];
    weigh_chosen(logits, cfg, choice, sc.probs, weight);
}

}  // namespace strata::engine
