// The host's MoE routing (engine::route_token, force_route) against a scalar reference written
// the way the reference engine's graph states it (scores, biased copy, groups scored by their two
// best, masked, a full stable sort, weights gathered, renormalised, scaled), on random logits,
// for every combination of gating, selection bias, groups, renormalisation and scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/routing.h"

namespace strata {
namespace {

struct Routed {
    std::vector<int32_t> choice;
    std::vector<float> weight;
};

// The routing of one token, step by step.
Routed reference_route(const std::vector<float>& logits, const engine::MoeConfig& c) {
    const int n = c.n_expert;
    std::vector<float> scores(static_cast<size_t>(n));
    if (c.gating == ExpertGating::Softmax) {
        const float max = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (int i = 0; i < n; ++i) {
            scores[size_t(i)] = std::exp(logits[size_t(i)] - max);
            sum += scores[size_t(i)];
        }
        for (float& s : scores) s *= float(1.0 / sum);
    } else if (c.gating == ExpertGating::Sigmoid) {
        for (int i = 0; i < n; ++i)
            scores[size_t(i)] = 1.0f / (1.0f + std::exp(-logits[size_t(i)]));
    } else {
        scores = logits;
    }
    std::vector<float> chooser = scores;
    if (c.selection_bias) {
        for (int i = 0; i < n; ++i) chooser[size_t(i)] = scores[size_t(i)] + c.selection_bias[i];
    }
    if (c.n_group > 1) {
        const int per = n / c.n_group;
        std::vector<float> group_score(static_cast<size_t>(c.n_group));
        for (int g = 0; g < c.n_group; ++g) {
            std::vector<float> members(chooser.begin() + g * per, chooser.begin() + (g + 1) * per);
            std::sort(members.begin(), members.end(), std::greater<>());
            group_score[size_t(g)] = members[0] + members[1];
        }
        std::vector<int> groups(static_cast<size_t>(c.n_group));
        std::iota(groups.begin(), groups.end(), 0);
        std::stable_sort(groups.begin(), groups.end(), [&](int a, int b) {
            return group_score[size_t(a)] > group_score[size_t(b)];
        });
        for (size_t r = size_t(c.n_group_used); r < groups.size(); ++r) {
            for (int i = groups[r] * per; i < (groups[r] + 1) * per; ++i) {
                chooser[size_t(i)] = -std::numeric_limits<float>::infinity();
            }
        }
    }
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return chooser[size_t(a)] > chooser[size_t(b)]; });
    Routed out;
    out.choice.assign(order.begin(), order.begin() + c.n_used);
    for (const int32_t e : out.choice) out.weight.push_back(scores[size_t(e)]);
    if (c.gating == ExpertGating::SoftmaxTopK) {
        float max = -std::numeric_limits<float>::infinity();
        for (const float w : out.weight) max = std::max(max, w);
        double sum = 0;
        for (float& w : out.weight) {
            w = std::exp(w - max);
            sum += w;
        }
        for (float& w : out.weight) w *= float(1.0 / sum);
    } else if (c.norm_weights) {
        float sum = 0;
        for (const float w : out.weight) sum += w;
        sum = std::max(sum, 6.103515625e-5f);
        for (float& w : out.weight) w /= sum;
    }
    for (float& w : out.weight) w *= c.weights_scale;
    return out;
}

struct Grouping {
    int groups, used;
};

TEST(Routing, MatchesTheReferenceForEveryCombination) {
    std::mt19937 rng(38);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    std::uniform_real_distribution<float> bias(-0.4f, 0.4f);
    int changed_by_bias = 0, changed_by_groups = 0, cases = 0;
    for (const int n_expert : {16, 64, 256}) {
        for (const ExpertGating gating :
             {ExpertGating::Softmax, ExpertGating::SoftmaxTopK, ExpertGating::Sigmoid}) {
            for (const bool biased : {false, true}) {
                for (const Grouping grouping : {Grouping{0, 0}, Grouping{8, 3}, Grouping{4, 1}}) {
                    for (const bool norm : {false, true}) {
                        for (const float scale : {1.0f, 2.5f}) {
                            const int k = n_expert >= 64 ? 8 : 2;
                            std::vector<float> b(static_cast<size_t>(n_expert));
                            for (float& x : b) x = bias(rng);
                            engine::MoeConfig c;
                            c.n_expert = n_expert;
                            c.n_used = k;
                            c.norm_weights = norm;
                            c.gating = gating;
                            c.selection_bias = biased ? b.data() : nullptr;
                            c.n_group = grouping.groups;
                            c.n_group_used = grouping.used;
                            c.weights_scale = scale;
                            SCOPED_TRACE(std::to_string(n_expert) + " experts, gating " +
                                         std::string(expert_gating_name(gating)) +
                                         (biased ? ", biased" : "") + ", groups " +
                                         std::to_string(grouping.groups) + "/" +
                                         std::to_string(grouping.used) + (norm ? ", norm" : "") +
                                         ", scale " + std::to_string(scale));
                            engine::RoutingScratch scratch;
                            for (int t = 0; t < 20; ++t) {
                                std::vector<float> logits(static_cast<size_t>(n_expert));
                                for (float& x : logits) x = logit(rng);
                                const Routed want = reference_route(logits, c);
                                std::vector<int32_t> choice(static_cast<size_t>(k));
                                std::vector<float> weight(static_cast<size_t>(k));
                                engine::route_token(logits.data(), c, choice.data(), weight.data(),
                                                    scratch);
                                ASSERT_EQ(choice, want.choice) << "token " << t;
                                for (int j = 0; j < k; ++j) {
                                    EXPECT_NEAR(weight[size_t(j)], want.weight[size_t(j)],
                                                1e-6f * std::abs(want.weight[size_t(j)]) + 1e-12f)
                                        << "token " << t << " choice " << j;
                                }
                                // Forcing the same experts gives the same weights.
                                std::vector<float> forced(static_cast<size_t>(k));
                                std::vector<int32_t> forced_choice(static_cast<size_t>(k));
                                engine::force_route(logits.data(), c, want.choice,
                                                    forced_choice.data(), forced.data(), scratch);
                                EXPECT_EQ(forced_choice, want.choice);
                                EXPECT_EQ(forced, weight) << "token " << t;
                                // The bias and the groups do change what is chosen.
                                engine::MoeConfig plain = c;
                                plain.selection_bias = nullptr;
                                plain.n_group = plain.n_group_used = 0;
                                const Routed bare = reference_route(logits, plain);
                                ++cases;
                                if (bare.choice != want.choice) {
                                    (biased ? changed_by_bias : changed_by_groups) += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(changed_by_bias, cases / 10);
    EXPECT_GT(changed_by_groups, cases / 20);
}

// Ties in the choosing scores go to the lower expert id; a group tie to the lower group.
TEST(Routing, BreaksTiesTowardsTheLowerId) {
    // Sigmoid scores of 0 are 0.5 each; experts 1..3 tie once biased.
    const std::vector<float> logits = {0, 0, 0, 0, 0, 0, 0, 0};
    const std::vector<float> bias = {0, 0.25f, 0.25f, 0.25f, 0.5f, 0, 0, 0};
    engine::MoeConfig c;
    c.n_expert = 8;
    c.n_used = 3;
    c.gating = ExpertGating::Sigmoid;
    c.selection_bias = bias.data();
    int32_t choice[3];
    float weight[3];
    engine::route_token(logits.data(), c, choice, weight);
    EXPECT_EQ(std::vector<int32_t>(choice, choice + 3), (std::vector<int32_t>{4, 1, 2}));
    // The weights are the unbiased scores, scaled.
    c.weights_scale = 2.0f;
    engine::route_token(logits.data(), c, choice, weight);
    for (const float w : weight) EXPECT_EQ(w, 1.0f);
    // Four groups of two: groups 0 and 1 tie at 1.75 behind group 2 (2.0), so groups 2 and 0
    // are kept.
    const std::vector<float> grouped = {0.25f, 0.5f, 0.5f, 0.25f, 0.5f, 0.5f, 0, 0};
    c.selection_bias = grouped.data();
    c.n_group = 4;
    c.n_group_used = 2;
    c.n_used = 4;
    int32_t four[4];
    float w4[4];
    engine::route_token(logits.data(), c, four, w4);
    EXPECT_EQ(std::vector<int32_t>(four, four + 4), (std::vector<int32_t>{1, 4, 5, 0}));
}

// With renormalisation, k tiny sigmoid scores are divided by the clamped sum, not blown up.
TEST(Routing, ClampsTheRenormalisingSum) {
    const std::vector<float> logits(4, -30.0f);
    engine::MoeConfig c;
    c.n_expert = 4;
    c.n_used = 2;
    c.norm_weights = true;
    c.gating = ExpertGating::Sigmoid;
    int32_t choice[2];
    float weight[2];
    engine::route_token(logits.data(), c, choice, weight);
    const float score = 1.0f / (1.0f + std::exp(30.0f));
    EXPECT_FLOAT_EQ(weight[0], score / engine::kMinChosenWeightSum);
    EXPECT_LT(weight[0] + weight[1], 1e-6f);
}

TEST(Routing, ConfigFollowsTheHparams) {
    ModelHparams hp;
    hp.n_expert = 160;
    hp.n_expert_used = 8;
    hp.expert_gating = ExpertGating::Sigmoid;
    hp.n_expert_group = 8;
    hp.n_expert_group_used = 4;
    hp.expert_weights_scale = 2.5f;
    const float bias[160] = {};
    const engine::MoeConfig c = engine::moe_config(hp, true, bias);
    EXPECT_EQ(c.n_expert, 160);
    EXPECT_EQ(c.n_used, 8);
    EXPECT_TRUE(c.norm_weights);
    EXPECT_EQ(c.gating, ExpertGating::Sigmoid);
    EXPECT_EQ(c.selection_bias, bias);
    EXPECT_EQ(c.n_group, 8);
    EXPECT_EQ(c.n_group_used, 4);
    EXPECT_EQ(c.weights_scale, 2.5f);
}

}  // namespace
}  // namespace strata
