// The sampler chain (see sampler.h): parameter checks, the order of the steps, the seeded random
// generator and the final draw. The steps themselves are in sampler_filters.cpp.
#include "session/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <string>

namespace strata {

namespace {

std::string number(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

// An error naming the field and the rule its value breaks, unless `ok`.
Result<void> check(bool ok, const char* field, const char* rule, double value) {
    if (ok) return {};
    return err("sampler: ", field, " must be ", rule, ", not ", number(value));
}

}  // namespace

Result<void> validate(const SamplerParams& p) {
    // Written so that NaN fails every check: comparisons with NaN are false.
    STRATA_TRY(check(p.temperature >= 0.0f && std::isfinite(p.temperature), "temperature",
                     "a finite number >= 0", p.temperature));
    STRATA_TRY(check(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p", "in (0, 1]", p.top_p));
    STRATA_TRY(check(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p", "in [0, 1]", p.min_p));
    STRATA_TRY(check(p.repeat_penalty > 0.0f && std::isfinite(p.repeat_penalty), "repeat_penalty",
                     "a finite number > 0", p.repeat_penalty));
    STRATA_TRY(check(std::isfinite(p.presence_penalty), "presence_penalty", "a finite number",
                     p.presence_penalty));
    STRATA_TRY(check(std::isfinite(p.frequency_penalty), "frequency_penalty", "a finite number",
                     p.frequency_penalty));
    STRATA_TRY(check(p.penalty_last_n >= -1, "penalty_last_n", ">= -1 (-1: whole history)",
                     p.penalty_last_n));
    return {};
}

Sampler::Sampler(const SamplerParams& p) : params_(p) {
    reseed(p.seed);
}

void Sampler::reseed(uint64_t seed) {
    params_.seed = seed;
    seed_used_ = seed;
    if (seed == kRandomSeed) {
        std::random_device device;
        seed_used_ = (static_cast<uint64_t>(device()) << 32) | device();
    }
    rng_.seed(seed_used_);
}

double Sampler::uniform01() {
    // The top 53 bits as a double in [0, 1): exact, and the same on every platform.
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
    assert(!logits.empty());
    std::span<const int32_t> window = history;
    if (params_.penalty_last_n == 0) {
        window = {};
    } else if (params_.penalty_last_n > 0 &&
               window.size() > static_cast<size_t>(params_.penalty_last_n)) {
        window = window.last(static_cast<size_t>(params_.penalty_last_n));
    }
    apply_penalties(logits, window, params_.repeat_penalty, params_.frequency_penalty,
                    params_.presence_penalty, penalty_counts_);

    if (params_.temperature <= 0.0f) {
        size_t best = 0;  // strict > keeps the lowest id among equal logits
        float best_logit = logits[0];
        for (size_t i = 1; i < logits.size(); ++i) {
            if (logits[i] > best_logit) {
                best = i;
                best_logit = logits[i];
            }
        }
        return static_cast<int32_t>(best);
    }

    collect_candidates(logits, params_.top_k, cands_);  // top-k happens here
    if (cands_.empty()) return 0;
    keep_top_p(cands_, params_.top_p);
    keep_min_p(cands_, params_.min_p);
    return draw();
}

// Softmax of the survivors at the temperature, then one uniform number picks where in the
// cumulative distribution the token falls.
int32_t Sampler::draw() {
    float m = cands_.front().logit;
    for (const Candidate& c : cands_) m = std::max(m, c.logit);
    weights_.resize(cands_.size());
    double total = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
        weights_[i] = std::exp((cands_[i].logit - m) / params_.temperature);
        total += weights_[i];
    }
    // total >= 1 (the best candidate weighs exactly 1), so target < total barring rounding.
    const double target = uniform01() * total;
    double running = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
        running += weights_[i];
        if (running > target) return cands_[i].id;
    }
    // Rounding left the target at the very end: the last candidate that has any weight.
    for (size_t i = cands_.size(); i-- > 0;) {
        if (weights_[i] > 0.0) return cands_[i].id;
    }
    return cands_.front().id;
}

}  // namespace strata
