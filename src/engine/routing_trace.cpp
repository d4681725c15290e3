#include "engine/routing_trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

namespace strata::engine {

std::span<const int32_t> RoutingTrace::choices(int64_t position, int layer) const {
    const size_t n = tokens();
    const size_t t = size_t(position < 0 ? 0 : position) % std::max<size_t>(n, 1);
    return {ids.data() + (t * size_t(n_layer) + size_t(layer)) * size_t(k), size_t(k)};
}

Result<RoutingTrace> RoutingTrace::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return err("cannot open the routing trace " + path);
    std::string magic;
    int version = 0;
    size_t tokens = 0;
    RoutingTrace t;
    in >> magic >> version >> t.n_layer >> t.n_expert >> t.k >> tokens;
    if (!in || magic != "strata-routing-trace" || version != 1) {
        return err(path + " is not a routing trace (strata-routing-trace 1 ...)");
    }
    if (t.n_layer <= 0 || t.n_expert <= 0 || t.k <= 0 || t.k > t.n_expert || tokens == 0 ||
        tokens > (1u << 24) || size_t(t.n_layer) * size_t(t.k) > (1u << 20)) {
        return err(path + ": implausible trace shape");
    }
    t.ids.resize(tokens * size_t(t.n_layer) * size_t(t.k));
    for (int32_t& id : t.ids) {
        if (!(in >> id) || id < 0 || id >= t.n_expert) {
            return err(path + ": missing or out-of-range expert id");
        }
    }
    return t;
}

Result<void> RoutingTrace::save(const std::string& path) const {
    std::ofstream out(path);
    out << "strata-routing-trace 1 " << n_layer << " " << n_expert << " " << k << " " << tokens()
        << "\n";
    const size_t row = size_t(n_layer) * size_t(k);
    for (size_t i = 0; i < ids.size(); ++i) out << ids[i] << ((i + 1) % row ? " " : "\n");
    out.flush();
    if (!out) return err("cannot write " + path);
    return {};
}

RoutingTrace make_local_trace(int n_layer, int n_expert, int k, size_t tokens, double stay,
                              double skew, uint64_t seed) {
    RoutingTrace t{n_layer, n_expert, k, {}};
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    // Per layer: a random order of the experts and Zipf weights over it.
    std::vector<std::discrete_distribution<int>> popularity;
    std::vector<std::vector<int>> order(static_cast<size_t>(n_layer));
    for (int l = 0; l < n_layer; ++l) {
        order[size_t(l)].resize(size_t(n_expert));
        std::iota(order[size_t(l)].begin(), order[size_t(l)].end(), 0);
        std::shuffle(order[size_t(l)].begin(), order[size_t(l)].end(), rng);
        std::vector<double> w(static_cast<size_t>(n_expert));
        for (int r = 0; r < n_expert; ++r) w[size_t(r)] = 1.0 / std::pow(double(r + 1), skew);
        popularity.emplace_back(w.begin(), w.end());
    }
    std::vector<int32_t> prev, cur;
    t.ids.reserve(tokens * size_t(n_layer) * size_t(k));
    for (size_t tok = 0; tok < tokens; ++tok) {
        for (int l = 0; l < n_layer; ++l) {
            cur.clear();
            if (tok > 0) {
                const int32_t* p =
                    t.ids.data() + ((tok - 1) * size_t(n_layer) + size_t(l)) * size_t(k);
                for (int i = 0; i < k; ++i) {
                    if (u(rng) < stay) cur.push_back(p[i]);
                }
            }
            while (int(cur.size()) < k) {
                const int32_t e = order[size_t(l)][size_t(popularity[size_t(l)](rng))];
                if (std::find(cur.begin(), cur.end(), e) == cur.end()) cur.push_back(e);
            }
            t.ids.insert(t.ids.end(), cur.begin(), cur.end());
        }
    }
    return t;
}

}  // namespace strata::engine
