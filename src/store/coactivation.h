// Routing statistics of a MoE model, learnt while it runs and kept between runs: how often each
// (layer, expert) is chosen, and which experts of layer L+1 follow the experts chosen in layer L
// for the same token (counted once per token per layer pair). The expert cache predicts
// the next layer's experts from them and warms its cache at start with the most chosen ones.
//
// Kept per model in the cache directory under the file's identity (file size, tensor table and
// samples of the weights, so a renamed or copied file keeps its statistics and a different file
// with the same name or shape does not get them): experts-<identity>.stats. The file has a magic, a
// version, the identity, the shape and a checksum of the counts; anything else is ignored with a
// warning.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/model_info.h"
#include "util/result.h"

namespace strata {

// The identity statistics are keyed by: a 64-bit hash of the file size, every tensor's name,
// type, shape and offset, and three 4 KiB samples of the tensor data (start, middle, end).
uint64_t model_identity(const ModelInfo& info);
// <cache_dir>/experts-<identity as 16 hex digits>.stats
std::string expert_statistics_path(const std::string& cache_dir, const ModelInfo& info);

class CoactivationStats {
  public:
    void reset(int n_layer, int n_expert);
    int n_layer() const { return n_layer_; }
    int n_expert() const { return n_expert_; }
    uint64_t tokens_recorded() const { return tokens_; }

    // One layer's routing of a batch: n tokens x k choices, token-major. Pairs are counted
    // against the previous call's choices when that was layer - 1 with the same batch shape.
    void record(int layer, std::span<const int32_t> choices, int k);
    // Experts of `layer` that most often followed `previous` (experts chosen in layer - 1),
    // best first, at most `count`, only those seen at least once.
    std::vector<int32_t> predict(int layer, std::span<const int32_t> previous, size_t count) const;
    // The same into `out` (experts), reusing its scratch: allocates nothing once warm.
    struct Prediction {
        std::vector<int32_t> experts;
        std::vector<uint64_t> score;
        std::vector<int32_t> order;
    };
    void predict(int layer, std::span<const int32_t> previous, size_t count, Prediction& out) const;
    uint32_t frequency(int layer, int expert) const;
    // The (layer, expert) pairs chosen most often, best first.
    std::vector<std::pair<int, int>> most_frequent(size_t count) const;

    // Replaces the file atomically (written beside it, then renamed).
    Result<void> save(const std::string& path, uint64_t identity) const;
    // Errors when the file is not a statistics file of this shape and identity, or is damaged;
    // the statistics are left as they were then.
    Result<void> load(const std::string& path, uint64_t identity);

  private:
    uint16_t& pair(int layer, int a, int b) {
        return pairs_[(size_t(layer - 1) * size_t(n_expert_) + size_t(a)) * size_t(n_expert_) +
                      size_t(b)];
    }
    uint16_t pair(int layer, int a, int b) const {
        return pairs_[(size_t(layer - 1) * size_t(n_expert_) + size_t(a)) * size_t(n_expert_) +
                      size_t(b)];
    }
    void bump_pair(int layer, int a, int b);

    int n_layer_ = 0, n_expert_ = 0;
    uint64_t tokens_ = 0;
    std::vector<uint32_t> freq_;   // [layer][expert]
    std::vector<uint16_t> pairs_;  // [layer - 1][a][b] for layers 1..n_layer-1; halved on overflow
    std::vector<int32_t> last_;    // the previous call's choices
    int last_layer_ = -1, last_k_ = 0;
};

}  // namespace strata
