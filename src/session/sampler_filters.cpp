// Penalties, top-k, top-p and min-p on candidate lists; the contract is in sampler_filters.h.
// Vocabularies reach 150k+ tokens and this runs once per generated token, so nothing here sorts
// the whole list: top-k keeps a heap of k, top-p sorts only the candidates near its cutoff.
#include "session/sampler_filters.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace strata {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float max_logit(const std::vector<Candidate>& cands) {
    float m = kNegInf;
    for (const Candidate& c : cands) m = std::max(m, c.logit);
    return m;
}

// Drops every candidate that ranks after `cutoff`; the rest keep their order.
void keep_up_to(std::vector<Candidate>& cands, const Candidate& cutoff) {
    std::erase_if(cands, [&](const Candidate& c) { return ranks_before(cutoff, c); });
}

}  // namespace

void apply_penalties(std::span<float> logits, std::span<const int32_t> window, float repeat,
                     float frequency, float presence, std::vector<int32_t>& counts) {
    if (repeat == 1.0f && frequency == 0.0f && presence == 0.0f) return;
    if (counts.size() < logits.size()) counts.resize(logits.size(), 0);
    const auto in_vocab = [&](int32_t t) {
        return t >= 0 && static_cast<size_t>(t) < logits.size();
    };
    for (int32_t t : window) {
        if (in_vocab(t)) ++counts[t];
    }
    // Each distinct token is penalized at its first occurrence; resetting its count there makes
    // the later occurrences skip it and leaves the scratch clean for the next call.
    for (int32_t t : window) {
        if (!in_vocab(t) || counts[t] == 0) continue;
        const int32_t count = counts[t];
        counts[t] = 0;
        float& logit = logits[t];
        // Dividing a negative logit would make the token more likely, hence the multiplication.
        logit = logit <= 0.0f ? logit * repeat : logit / repeat;
        logit -= static_cast<float>(count) * frequency + presence;
    }
}

void collect_candidates(std::span<const float> logits, int32_t top_k, std::vector<Candidate>& out) {
    out.clear();
    const size_t k = top_k > 0 ? static_cast<size_t>(top_k) : logits.size();
    size_t i = 0;
    for (; i < logits.size() && out.size() < k; ++i) {
        if (logits[i] > kNegInf) out.push_back({logits[i], static_cast<int32_t>(i)});
    }
    if (i == logits.size()) return;  // no more than k candidates: all of them, in id order

    // The k best so far in a heap with the worst of them on top. Tokens come in id order, so one
    // that only ties with the top ranks after it: a token has to beat the top's logit to get in,
    // and for typical logits almost none does, so most cost a single float comparison.
    std::make_heap(out.begin(), out.end(), ranks_before);
    for (; i < logits.size(); ++i) {
        if (!(logits[i] > out.front().logit)) continue;
        std::pop_heap(out.begin(), out.end(), ranks_before);
        out.back() = {logits[i], static_cast<int32_t>(i)};
        std::push_heap(out.begin(), out.end(), ranks_before);
    }
    std::sort(out.begin(), out.end(),
              [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
}

void keep_top_p(std::vector<Candidate>& cands, float p) {
    if (p >= 1.0f || cands.size() <= 1) return;
    const float m = max_logit(cands);
    if (m == kNegInf) return;  // no candidate has any probability: nothing to rank by

    // Buckets by distance below the maximum, 1/8 logit wide (the last one takes everything
    // further down), each with its probability mass. The cutoff lies in the first bucket where
    // the running mass reaches p, and only that bucket needs sorting: real logits spread over
    // tens of units, so that is a few hundred candidates, not the vocabulary. Sums are in
    // double; the softmax denominator is the total of the buckets, the same additions in the
    // same order as the running mass, so the running mass does reach p * total.
    constexpr int kBuckets = 256;
    constexpr float kBucketsPerLogit = 8.0f;
    const auto bucket_of = [m](float logit) {
        const float d = (m - logit) * kBucketsPerLogit;
        return d < kBuckets - 1 ? static_cast<int>(d) : kBuckets - 1;
    };
    std::array<double, kBuckets> mass{};
    for (const Candidate& c : cands) mass[bucket_of(c.logit)] += std::exp(c.logit - m);
    double total = 0.0;
    for (double x : mass) total += x;
    const double target = static_cast<double>(p) * total;

    int edge_bucket = 0;
    double running = 0.0;  // mass of the buckets above edge_bucket
    while (edge_bucket < kBuckets - 1 && running + mass[edge_bucket] < target) {
        running += mass[edge_bucket++];
    }
    std::vector<Candidate> edge;
    for (const Candidate& c : cands) {
        if (bucket_of(c.logit) == edge_bucket) edge.push_back(c);
    }
    if (edge.empty()) return;  // cannot happen: the bucket that reaches p has mass
    std::sort(edge.begin(), edge.end(), ranks_before);
    Candidate cutoff = edge.back();
    for (const Candidate& c : edge) {
        running += std::exp(c.logit - m);
        if (running >= target) {
            cutoff = c;
            break;
        }
    }
    keep_up_to(cands, cutoff);
}

void keep_min_p(std::vector<Candidate>& cands, float min_p) {
    if (min_p <= 0.0f || cands.empty()) return;
    // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p), with no softmax needed.
    // Capped at 1 so that the best candidate always stays.
    const float threshold = max_logit(cands) + std::log(std::min(min_p, 1.0f));
    std::erase_if(cands, [&](const Candidate& c) { return c.logit < threshold; });
}

}  // namespace strata
