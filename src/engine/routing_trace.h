// A routing trace: which experts every layer chooses for every token, as a file. Benchmarks of
// the expert cache replay one through a model (EngineOptions::forced_routing) to measure
// streaming under a routing pattern the model's own router would not produce — real models'
// temporal locality, on a synthetic model whose random router has none. The forward pass then
// computes with the trace's experts (weighted by the router's probabilities of them), so its
// output is not the model's: for speed measurements only.
//
// File format (text): a first line "strata-routing-trace 1 <layers> <experts> <k> <tokens>",
// then one line per token with layers x k expert ids, layer by layer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace strata::engine {

struct RoutingTrace {
    int n_layer = 0, n_expert = 0, k = 0;
    std::vector<int32_t> ids;  // [token][layer][k]

    size_t tokens() const { return n_layer && k ? ids.size() / size_t(n_layer * k) : 0; }
    // The choices of `layer` for the token at `position` (the trace repeats when it runs out).
    std::span<const int32_t> choices(int64_t position, int layer) const;

    static Result<RoutingTrace> load(const std::string& path);
    Result<void> save(const std::string& path) const;
};

// A trace with temporal locality, the way real MoE routing behaves: for every token and layer,
// each of the previous token's experts is kept with probability `stay`, and the others are drawn
// without repeats from a Zipf(`skew`) popularity over a random order of the layer's experts
// (some experts are popular, most are rare). Deterministic for a seed.
RoutingTrace make_local_trace(int n_layer, int n_expert, int k, size_t tokens, double stay,
                              double skew, uint64_t seed);

}  // namespace strata::engine
