// The statistics llama.cpp's perplexity tool prints, computed the same way so that strata's
// numbers can be set beside llama.cpp's:
//   * perplexity = exp(mean NLL of the scored tokens), with llama.cpp's ± (the standard error of
//     the mean NLL, sqrt(var / (count - 1)), carried through exp: ± ppl * that error), and the
//     running value it prints after each chunk;
//   * KL(p_base || p_engine) per scored position as in `--kl-divergence`: summed over the base
//     tokens whose log-probability is above -16 (entries at a .kld file's 16-nat floor and
//     anything as unlikely carry < e^-16 each and are skipped), without renormalising p_base;
//     plus top-1 agreement (argmax of base == argmax of engine, first index on ties) and
//     mean ± error, median, percentiles and maximum over all positions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace strata {

// out[i] = logits[i] - logsumexp(logits): max subtracted, exp summed in double.
void log_softmax(std::span<const float> logits, std::vector<float>& out);

// Index of the largest value; the first one on ties.
size_t argmax(std::span<const float> values);

class PerplexityAccumulator {
  public:
    // One scored token's negative log-likelihood, -log p(next token).
    void add(double nll);
    // Records the running perplexity, as llama.cpp prints after each chunk.
    void end_chunk() { chunk_ppl_.push_back(ppl()); }

    size_t count() const { return count_; }
    double mean_nll() const;
    double ppl() const;
    // llama.cpp's "+/-" of the final estimate; 0 while undefined (fewer than 2 tokens).
    double ppl_uncertainty() const;
    const std::vector<double>& chunk_ppl() const { return chunk_ppl_; }

  private:
    double sum_ = 0.0, sum2_ = 0.0;
    size_t count_ = 0;
    std::vector<double> chunk_ppl_;
};

struct KlStats {
    size_t count = 0;
    double mean = 0.0, mean_uncertainty = 0.0;
    double median = 0.0, p99 = 0.0, p99_9 = 0.0, min = 0.0, max = 0.0;
    double top1 = 0.0, top1_uncertainty = 0.0;  // fraction of positions with the same argmax
};

class KlAccumulator {
  public:
    // One scored position: the base model's log-probabilities (e.g. a decoded .kld record) and
    // the engine's (log_softmax of its logits), both over the whole vocabulary. Returns this
    // position's KL divergence.
    double add(std::span<const float> base_logp, std::span<const float> engine_logp);

    size_t count() const { return values_.size(); }
    const std::vector<double>& values() const { return values_; }
    KlStats stats() const;

  private:
    std::vector<double> values_;
    double sum_ = 0.0, sum2_ = 0.0;
    size_t same_top_ = 0;
};

// KL(p_base || p_engine) of one position, as KlAccumulator::add computes it.
double kl_divergence(std::span<const float> base_logp, std::span<const float> engine_logp);

// llama.cpp's percentile of sorted values: linear interpolation at fraction * (n - 1).
double percentile(std::span<const double> sorted, double fraction);

}  // namespace strata
