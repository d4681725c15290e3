#include "eval/logit_stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace strata {

namespace {

// Mean and its standard error from running sums, as llama.cpp's kl_divergence() computes
// them: the error is 0 for 10 positions or fewer, or when rounding makes the variance <= 0.
struct MeanAndError {
    double mean = 0.0, error = 0.0;
};
MeanAndError mean_and_error(double sum, double sum2, size_t count) {
    if (count == 0) return {};
    const double n = static_cast<double>(count);
    const double mean = sum / n;
    const double var = sum2 / n - mean * mean;
    return {mean, var > 0.0 && count > 10 ? std::sqrt(var / (n - 1.0)) : 0.0};
}

}  // namespace

void log_softmax(std::span<const float> logits, std::vector<float>& out) {
    out.resize(logits.size());
    if (logits.empty()) return;
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum_exp = 0.0;
    for (float x : logits) sum_exp += std::exp(static_cast<double>(x) - max_logit);
    const double log_z = max_logit + std::log(sum_exp);
    for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
    }
}

size_t argmax(std::span<const float> values) {
    size_t best = 0;
    for (size_t i = 1; i < values.size(); ++i) {
        if (values[i] > values[best]) best = i;
    }
    return best;
}

// ---- perplexity ----

void PerplexityAccumulator::add(double nll) {
    sum_ += nll;
    sum2_ += nll * nll;
    ++count_;
}

double PerplexityAccumulator::mean_nll() const {
    return count_ ? sum_ / static_cast<double>(count_) : 0.0;
}

double PerplexityAccumulator::ppl() const {
    return std::exp(mean_nll());
}

// llama.cpp's perplexity(): var = mean(nll^2) - mean(nll)^2, error of the mean NLL
// sqrt(var / (count - 1)), and ± ppl * error (d exp(x) = exp(x) dx).
double PerplexityAccumulator::ppl_uncertainty() const {
    if (count_ < 2) return 0.0;
    const double n = static_cast<double>(count_);
    const double mean = sum_ / n;
    const double var = sum2_ / n - mean * mean;
    return var > 0.0 ? std::sqrt(var / (n - 1.0)) * std::exp(mean) : 0.0;
}

// ---- KL divergence ----

// Entries of p_base at or below e^-16 are skipped, as llama.cpp does; a .kld record's floor
// entries (everything 16 nats or more below its top token) are among them.
double kl_divergence(std::span<const float> base_logp, std::span<const float> engine_logp) {
    assert(base_logp.size() == engine_logp.size());
    double sum = 0.0;
    for (size_t i = 0; i < base_logp.size(); ++i) {
        const double lb = base_logp[i];
        if (lb > -16.0) sum += std::exp(lb) * (lb - engine_logp[i]);
    }
    return sum;
}

double KlAccumulator::add(std::span<const float> base_logp, std::span<const float> engine_logp) {
    const double kl = kl_divergence(base_logp, engine_logp);
    values_.push_back(kl);
    sum_ += kl;
    sum2_ += kl * kl;
    if (argmax(base_logp) == argmax(engine_logp)) ++same_top_;
    return kl;
}

double percentile(std::span<const double> sorted, double fraction) {
    if (sorted.empty()) return 0.0;
    if (fraction <= 0.0) return sorted.front();
    if (fraction >= 1.0) return sorted.back();
    const double p = fraction * static_cast<double>(sorted.size() - 1);
    const size_t i = static_cast<size_t>(p);
    const double t = p - static_cast<double>(i);
    return (1.0 - t) * sorted[i] + t * sorted[std::min(i + 1, sorted.size() - 1)];
}

KlStats KlAccumulator::stats() const {
    KlStats s;
    s.count = values_.size();
    if (s.count == 0) return s;
    const MeanAndError m = mean_and_error(sum_, sum2_, s.count);
    s.mean = m.mean;
    s.mean_uncertainty = m.error;

    std::vector<double> sorted = values_;
    std::sort(sorted.begin(), sorted.end());
    s.median = percentile(sorted, 0.5);  // the middle value, or the mean of the two middle ones
    s.p99 = percentile(sorted, 0.99);
    s.p99_9 = percentile(sorted, 0.999);
    s.min = sorted.front();
    s.max = sorted.back();

    const double n = static_cast<double>(s.count);
    s.top1 = static_cast<double>(same_top_) / n;
    if (s.count > 1) s.top1_uncertainty = std::sqrt(s.top1 * (1.0 - s.top1) / (n - 1.0));
    return s;
}

}  // namespace strata
