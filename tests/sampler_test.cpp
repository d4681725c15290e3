// The sampler: greedy choice and its ties, seeds, the drawn frequencies against the softmax at a
// temperature, the exact sets top-k / top-p / min-p keep (hand-worked examples, then a plain
// full-sort re-implementation on a 150k vocabulary), the penalties against a scalar
// re-implementation, and parameter validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "session/sampler.h"
#include "session/sampler_filters.h"

namespace strata {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Every filter off: the draw is from the full softmax at the temperature.
SamplerParams plain(float temperature, uint64_t seed = 1234) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

int32_t sample_once(const SamplerParams& p, std::vector<float> logits,
                    std::span<const int32_t> history = {}) {
    Sampler s(p);
    return s.sample(logits, history);
}

std::vector<Candidate> candidates(const std::vector<float>& logits) {
    std::vector<Candidate> c;
    for (size_t i = 0; i < logits.size(); ++i) c.push_back({logits[i], static_cast<int32_t>(i)});
    return c;
}

std::vector<int32_t> ids(const std::vector<Candidate>& cands) {
    std::vector<int32_t> out;
    for (const Candidate& c : cands) out.push_back(c.id);
    return out;
}

// ---- greedy -------------------------------------------------------------------------------

TEST(SamplerGreedy, PicksArgmaxAndLowestIdOnTies) {
    EXPECT_EQ(sample_once(plain(0.0f), {1.0f, 3.0f, 2.0f}), 1);
    EXPECT_EQ(sample_once(plain(0.0f), {1.0f, 3.0f, 3.0f, 2.0f, 3.0f}), 1);
    EXPECT_EQ(sample_once(plain(-1.0f), {5.0f, 5.0f}), 0);  // negative temperature: greedy too
    EXPECT_EQ(sample_once(plain(0.0f), {kNegInf, kNegInf, -7.0f}), 2);
    EXPECT_EQ(sample_once(plain(0.0f), {kNegInf, kNegInf}), 0);
    for (uint32_t seed = 0; seed < 20; ++seed) {
        const std::vector<float> logits = random_logits(5000, seed);
        const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
        EXPECT_EQ(sample_once(plain(0.0f), logits), best);
    }
}

TEST(SamplerGreedy, PenaltiesApplyFirst) {
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 1.1f;  // 2.0 / 1.1 = 1.82 < 1.9
    const std::vector<int32_t> history = {0};
    EXPECT_EQ(sample_once(p, {2.0f, 1.9f}, history), 1);
    EXPECT_EQ(sample_once(p, {2.0f, 1.9f}), 0);
}

TEST(SamplerTopK, OneEqualsGreedyAtAnyTemperature) {
    for (uint32_t seed = 0; seed < 30; ++seed) {
        std::vector<float> logits = random_logits(2000, seed);
        // Quantized logits give ties, which both must break towards the lowest id.
        if (seed % 2) {
            for (float& x : logits) x = std::round(x);
        }
        const int32_t greedy = sample_once(plain(0.0f), logits);
        for (float t : {0.01f, 0.5f, 1.0f, 5.0f, 1000.0f}) {
            SamplerParams p;  // the other filters at their defaults
            p.temperature = t;
            p.top_k = 1;
            p.seed = seed;
            EXPECT_EQ(sample_once(p, logits), greedy) << "seed " << seed << " t " << t;
        }
    }
}

// ---- seeds -----------------------------------------------------------------------------------

std::vector<int32_t> draws(Sampler& s, const std::vector<float>& logits, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        std::vector<float> scratch = logits;
        out.push_back(s.sample(scratch, {}));
    }
    return out;
}

TEST(SamplerSeed, SameSeedSameSequenceDifferentSeedsDiffer) {
    const std::vector<float> logits(100, 0.0f);  // uniform: every draw is informative
    Sampler a(plain(1.0f, 42)), b(plain(1.0f, 42)), c(plain(1.0f, 43));
    const std::vector<int32_t> seq = draws(a, logits, 64);
    EXPECT_EQ(seq, draws(b, logits, 64));
    EXPECT_NE(seq, draws(c, logits, 64));
    EXPECT_EQ(a.seed_used(), 42u);

    // reseed restarts the sequence.
    a.reseed(42);
    EXPECT_EQ(seq, draws(a, logits, 64));

    // The random sentinel draws a seed (two draws from random_device colliding is negligible).
    Sampler r1(plain(1.0f, kRandomSeed)), r2(plain(1.0f, kRandomSeed));
    EXPECT_NE(r1.seed_used(), r2.seed_used());
    EXPECT_EQ(r1.params().seed, kRandomSeed);
}

// ---- the draw's distribution -----------------------------------------------------------------

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
    std::vector<double> p(logits.size());
    double total = 0;
    for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(logits[i] / temperature);
    for (double& x : p) x /= total;
    return p;
}

// Each count is Binomial(n, p_i) for a correct sampler, with standard deviation
// sqrt(n p_i (1 - p_i)). Allowing 5 of them per bin, a correct sampler fails a bin with
// probability 5.7e-7 (two-sided normal tail), so the whole check with a handful of bins is wrong
// less than once in 10^5 seeds; the seed is fixed anyway, making the test deterministic.
bool within_bounds(const std::vector<int>& counts, const std::vector<double>& p, int n) {
    for (size_t i = 0; i < p.size(); ++i) {
        const double expect = n * p[i];
        const double sd = std::sqrt(n * p[i] * (1 - p[i]));
        if (std::abs(counts[i] - expect) > 5 * sd) return false;
    }
    return true;
}

std::vector<int> histogram(const SamplerParams& params, const std::vector<float>& logits, int n) {
    Sampler s(params);
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < n; ++i) {
        std::vector<float> scratch = logits;
        ++counts[s.sample(scratch, {})];
    }
    return counts;
}

TEST(SamplerDistribution, FrequenciesMatchSoftmaxAtTemperature) {
    const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
    constexpr int kDraws = 200000;
    for (float t : {0.7f, 1.0f, 1.8f}) {
        const std::vector<int> counts = histogram(plain(t, 7), logits, kDraws);
        EXPECT_TRUE(within_bounds(counts, softmax(logits, t), kDraws)) << "temperature " << t;
        // The bounds are tight enough to tell temperatures apart (the test has power).
        const float other = t == 1.0f ? 0.7f : 1.0f;
        EXPECT_FALSE(within_bounds(counts, softmax(logits, other), kDraws)) << "t " << t;
    }
}

TEST(SamplerDistribution, FiltersRenormalizeOverTheKeptTokens) {
    const std::vector<float> logits = {0.0f, 1.5f, -0.5f, 1.0f, -2.0f};
    SamplerParams p = plain(1.3f, 99);
    p.top_k = 3;  // keeps ids 1, 3, 0
    constexpr int kDraws = 100000;
    const std::vector<int> counts = histogram(p, logits, kDraws);
    std::vector<float> kept = logits;
    kept[2] = kept[4] = kNegInf;  // softmax with the dropped tokens at probability 0
    const std::vector<double> expect = softmax(kept, 1.3);
    EXPECT_EQ(counts[2], 0);
    EXPECT_EQ(counts[4], 0);
    EXPECT_TRUE(within_bounds(counts, expect, kDraws));
}

// ---- exact kept sets, by hand ----------------------------------------------------------------

std::vector<int32_t> top_k_ids(const std::vector<float>& logits, int32_t k) {
    std::vector<Candidate> c;
    collect_candidates(logits, k, c);
    return ids(c);
}

TEST(SamplerFilters, TopKHandExample) {
    using Ids = std::vector<int32_t>;
    // Survivors stay in id order.
    EXPECT_EQ(top_k_ids({1.0f, 5.0f, 3.0f, 5.0f, 2.0f, 4.0f}, 3), (Ids{1, 3, 5}));
    EXPECT_EQ(top_k_ids({2.0f, 2.0f, 2.0f, 1.0f}, 2), (Ids{0, 1}));  // tie at the cut: lower ids
    EXPECT_EQ(top_k_ids({1.0f, 3.0f, 2.0f, 3.0f}, 1), (Ids{1}));
    EXPECT_EQ(top_k_ids({1.0f, 2.0f}, 0), (Ids{0, 1}));  // off
    EXPECT_EQ(top_k_ids({1.0f, 2.0f}, 5), (Ids{0, 1}));  // more than there are
    // -inf never becomes a candidate, even when top-k would have room for it.
    EXPECT_EQ(top_k_ids({kNegInf, 1.0f, kNegInf, 0.0f}, 3), (Ids{1, 3}));
    EXPECT_EQ(top_k_ids({kNegInf, 1.0f, kNegInf, 0.0f, 2.0f}, 2), (Ids{1, 4}));
    EXPECT_EQ(top_k_ids({kNegInf, kNegInf}, 1), (Ids{}));
    // Worst case for the heap: ascending logits, every token replaces the top.
    std::vector<float> ascending(1000);
    std::iota(ascending.begin(), ascending.end(), 0.0f);
    Ids last(10);
    std::iota(last.begin(), last.end(), 990);
    EXPECT_EQ(top_k_ids(ascending, 10), last);
}

TEST(SamplerFilters, TopPHandExample) {
    // Probabilities 1/2, 1/4, 1/8, 1/16, 1/16 on shuffled ids.
    const std::vector<float> logits = {std::log(0.0625f), std::log(0.25f), std::log(0.0625f),
                                       std::log(0.5f), std::log(0.125f)};
    const auto kept = [&](float p) {
        std::vector<Candidate> c = candidates(logits);
        keep_top_p(c, p);
        return ids(c);
    };
    using Ids = std::vector<int32_t>;
    EXPECT_EQ(kept(0.4f), (Ids{3}));               // 0.5 reaches 0.4
    EXPECT_EQ(kept(0.6f), (Ids{1, 3}));            // 0.75
    EXPECT_EQ(kept(0.8f), (Ids{1, 3, 4}));         // 0.875
    EXPECT_EQ(kept(0.9f), (Ids{0, 1, 3, 4}));      // 0.9375: of the tied 1/16s, the lower id
    EXPECT_EQ(kept(0.99f), (Ids{0, 1, 2, 3, 4}));  // 1.0
    EXPECT_EQ(kept(1.0f), (Ids{0, 1, 2, 3, 4}));   // off
    EXPECT_EQ(kept(1e-9f), (Ids{3}));              // at least one
}

TEST(SamplerFilters, MinPHandExample) {
    // min_p 0.2 keeps logits >= max + ln 0.2 = max - 1.609.
    std::vector<Candidate> c = candidates({-1.0f, 0.0f, -3.0f, -1.5f, -1.7f, kNegInf});
    keep_min_p(c, 0.2f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{0, 1, 3}));
    c = candidates({-1.0f, 0.0f});
    keep_min_p(c, 0.0f);  // off
    EXPECT_EQ(c.size(), 2u);
    keep_min_p(c, 1.0f);  // only the best
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1}));
}

TEST(SamplerFilters, ChainHandExample) {
    // top_k 4 keeps ids 0..3; their probabilities (temperature 1) are about .47 .26 .17 .10, so
    // top_p 0.8 keeps 0..2 (0.90), and min_p 0.4 keeps those at >= 0.4 * .47: ids 0, 1.
    // Sampling at a high temperature must then give both of them and nothing else.
    const std::vector<float> logits = {3.0f, 2.4f, 2.0f, 1.5f, 1.0f, 0.5f};
    SamplerParams p = plain(50.0f, 5);
    p.top_k = 4;
    p.top_p = 0.8f;
    p.min_p = 0.4f;
    const std::vector<int> counts = histogram(p, logits, 2000);
    EXPECT_GT(counts[0], 800);
    EXPECT_GT(counts[1], 800);
    EXPECT_EQ(counts[0] + counts[1], 2000);
}

// ---- exact kept sets against a full-sort re-implementation -----------------------------------

// The chain as llama.cpp describes it, done the slow way: sort everything, cut the sorted list.
// Probabilities use float exp like the sampler (and llama.cpp); the sums are normalized here.
// -inf tokens are left out first: llama.cpp's top-k may keep some, but they can never be drawn.
std::vector<int32_t> reference_kept(const std::vector<float>& logits, int32_t k, float top_p,
                                    float min_p) {
    std::vector<int32_t> order;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (logits[i] > kNegInf) order.push_back(static_cast<int32_t>(i));
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    const float max = logits[order[0]];
    const auto relative_p = [&](int32_t id) { return std::exp(logits[id] - max); };
    if (k > 0 && static_cast<size_t>(k) < order.size()) order.resize(k);
    if (top_p < 1.0f) {
        double total = 0;
        for (int32_t id : order) total += relative_p(id);
        double cum = 0;
        for (size_t i = 0; i < order.size(); ++i) {
            cum += relative_p(order[i]) / total;
            if (cum >= top_p) {
                order.resize(i + 1);
                break;
            }
        }
    }
    if (min_p > 0.0f) {  // p >= min_p * p_max, with p_max = 1 in relative terms
        std::erase_if(order, [&](int32_t id) { return relative_p(id) < min_p; });
    }
    std::sort(order.begin(), order.end());
    return order;
}

std::vector<int32_t> fast_kept(const std::vector<float>& logits, int32_t k, float top_p,
                               float min_p) {
    std::vector<Candidate> c;
    collect_candidates(logits, k, c);
    keep_top_p(c, top_p);
    keep_min_p(c, min_p);
    return ids(c);
}

TEST(SamplerFilters, MatchFullSortOnLargeVocabulary) {
    struct Config {
        int32_t k;
        float top_p, min_p;
    };
    const Config configs[] = {{40, 0.95f, 0.05f}, {0, 0.95f, 0.0f}, {0, 0.5f, 0.0f},
                              {0, 0.999f, 0.0f},  {0, 1.0f, 0.01f}, {1000, 0.9f, 0.0f},
                              {5, 1.0f, 0.0f},    {0, 0.95f, 0.05f}};
    for (uint32_t seed = 0; seed < 4; ++seed) {
        std::vector<float> logits = random_logits(152064, seed, 2.0f + static_cast<float>(seed));
        if (seed == 1) {
            for (float& x : logits) x = std::round(x * 4) / 4;  // many ties
        }
        if (seed == 2) {
            for (size_t i = 0; i < logits.size(); i += 7) logits[i] = kNegInf;
        }
        for (const Config& c : configs) {
            EXPECT_EQ(fast_kept(logits, c.k, c.top_p, c.min_p),
                      reference_kept(logits, c.k, c.top_p, c.min_p))
                << "seed " << seed << " k " << c.k << " top_p " << c.top_p << " min_p " << c.min_p;
        }
    }
}

TEST(SamplerFilters, MatchFullSortOnSmallRandomCases) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 2000; ++trial) {
        const size_t n = 1 + rng() % 40;
        std::vector<float> logits(n);
        for (float& x : logits) x = static_cast<float>(static_cast<int>(rng() % 16)) / 2 - 4;
        const auto k = static_cast<int32_t>(rng() % 8) - 1;
        const float top_p =
            rng() % 3 ? std::uniform_real_distribution<float>(0.05f, 1.0f)(rng) : 1.0f;
        const float min_p =
            rng() % 2 ? std::uniform_real_distribution<float>(0.0f, 1.0f)(rng) : 0.0f;
        EXPECT_EQ(fast_kept(logits, k, top_p, min_p), reference_kept(logits, k, top_p, min_p))
            << "trial " << trial;
    }
}

// Through the whole Sampler on a large vocabulary: every draw is in the kept set.
TEST(SamplerFilters, DrawsStayInTheKeptSet) {
    const std::vector<float> logits = random_logits(152064, 77);
    SamplerParams p;  // defaults: top_k 40, top_p 0.95, min_p 0.05, temperature 0.8
    p.seed = 3;
    const std::vector<int32_t> kept = reference_kept(logits, p.top_k, p.top_p, p.min_p);
    Sampler s(p);
    for (int i = 0; i < 200; ++i) {
        std::vector<float> scratch = logits;
        EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), s.sample(scratch, {})));
    }
}

// ---- penalties ---------------------------------------------------------------------------------

TEST(SamplerPenalties, MatchScalarReimplementation) {
    std::mt19937 rng(5);
    std::vector<int32_t> counts_scratch;
    for (int trial = 0; trial < 200; ++trial) {
        const size_t n_vocab = 300;
        std::vector<float> logits = random_logits(n_vocab, static_cast<uint32_t>(trial));
        logits[rng() % n_vocab] = 0.0f;
        std::vector<int32_t> window(rng() % 100);
        for (int32_t& t : window) t = static_cast<int32_t>(rng() % 60);        // repeats likely
        if (!window.empty()) window[0] = -3;                                   // ignored
        if (window.size() > 1) window[1] = static_cast<int32_t>(n_vocab) + 2;  // ignored
        const float repeat = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
        const float freq = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        const float presence = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);

        std::vector<float> expect = logits;
        for (size_t v = 0; v < n_vocab; ++v) {
            const auto count = std::count(window.begin(), window.end(), static_cast<int32_t>(v));
            if (count == 0) continue;  // tokens outside the window keep their exact value
            float& l = expect[v];
            l = l <= 0 ? l * repeat : l / repeat;
            l -= static_cast<float>(count) * freq + presence;
        }
        apply_penalties(logits, window, repeat, freq, presence, counts_scratch);
        EXPECT_EQ(logits, expect) << "trial " << trial;
        EXPECT_TRUE(std::all_of(counts_scratch.begin(), counts_scratch.end(),
                                [](int32_t c) { return c == 0; }));
    }
}

TEST(SamplerPenalties, FrequencyAndPresenceByHand) {
    std::vector<float> logits = {1.0f, 2.0f, -1.0f, 0.5f};
    const std::vector<int32_t> window = {1, 2, 1, 1};
    std::vector<int32_t> scratch;
    apply_penalties(logits, window, 2.0f, 0.1f, 0.5f, scratch);
    EXPECT_FLOAT_EQ(logits[0], 1.0f);
    EXPECT_FLOAT_EQ(logits[1], 2.0f / 2 - 3 * 0.1f - 0.5f);
    EXPECT_FLOAT_EQ(logits[2], -1.0f * 2 - 0.1f - 0.5f);
    EXPECT_FLOAT_EQ(logits[3], 0.5f);
}

TEST(SamplerPenalties, WindowIsTheLastNOfTheHistory) {
    // Token 0 leads by 0.1; halving it (repeat 2) makes token 1 win, if 0 is in the window.
    const std::vector<float> logits = {3.0f, 2.9f, 0.0f};
    const std::vector<int32_t> history = {0, 2, 2};
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    const auto pick = [&](int32_t last_n) {
        p.penalty_last_n = last_n;
        return sample_once(p, logits, history);
    };
    EXPECT_EQ(pick(2), 0);   // window {2, 2}
    EXPECT_EQ(pick(3), 1);   // window {0, 2, 2}
    EXPECT_EQ(pick(64), 1);  // longer than the history: all of it
    EXPECT_EQ(pick(-1), 1);  // the whole history
    EXPECT_EQ(pick(0), 0);   // off
}

// ---- validation ------------------------------------------------------------------------------

TEST(SamplerValidate, AcceptsDefaultsAndNamesTheBadField) {
    EXPECT_TRUE(validate(SamplerParams{}).ok());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    struct Bad {
        void (*set)(SamplerParams&, float);
        float value;
        const char* field;
    };
    const Bad bad[] = {
        {[](SamplerParams& p, float v) { p.temperature = v; }, -0.1f, "temperature"},
        {[](SamplerParams& p, float v) { p.temperature = v; }, nan, "temperature"},
        {[](SamplerParams& p, float v) { p.temperature = v; }, inf, "temperature"},
        {[](SamplerParams& p, float v) { p.top_p = v; }, 0.0f, "top_p"},
        {[](SamplerParams& p, float v) { p.top_p = v; }, 1.5f, "top_p"},
        {[](SamplerParams& p, float v) { p.top_p = v; }, nan, "top_p"},
        {[](SamplerParams& p, float v) { p.min_p = v; }, -0.01f, "min_p"},
        {[](SamplerParams& p, float v) { p.min_p = v; }, 1.01f, "min_p"},
        {[](SamplerParams& p, float v) { p.repeat_penalty = v; }, 0.0f, "repeat_penalty"},
        {[](SamplerParams& p, float v) { p.repeat_penalty = v; }, inf, "repeat_penalty"},
        {[](SamplerParams& p, float v) { p.presence_penalty = v; }, nan, "presence_penalty"},
        {[](SamplerParams& p, float v) { p.frequency_penalty = v; }, -inf, "frequency_penalty"},
        {[](SamplerParams& p, float v) { p.penalty_last_n = static_cast<int32_t>(v); }, -2.0f,
         "penalty_last_n"},
    };
    for (const Bad& b : bad) {
        SamplerParams p;
        b.set(p, b.value);
        const Result<void> r = validate(p);
        ASSERT_FALSE(r.ok()) << b.field << " = " << b.value;
        EXPECT_NE(r.error().message.find(b.field), std::string::npos) << r.error().message;
    }
    // The edges that are allowed.
    SamplerParams edge;
    edge.temperature = 0.0f;
    edge.top_p = 1.0f;
    edge.min_p = 1.0f;
    edge.top_k = -5;
    edge.penalty_last_n = -1;
    edge.presence_penalty = -2.0f;
    EXPECT_TRUE(validate(edge).ok());
}

}  // namespace
}  // namespace strata
