#include "engine/ffn.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "engine/ops.h"

namespace strata::engine {

void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                const float* x, int64_t n, float* out, FfnBuffers& buf, ThreadPool& pool) {
    const int64_t n_ff = gate.rows();
    buf.gate.resize(size_t(n * n_ff));
    buf.up.resize(size_t(n * n_ff));
    buf.hidden.resize(size_t(n * n_ff));
    const LinearOut gate_up[] = {{&gate, nullptr, buf.gate.data()}, {&up, nullptr, buf.up.data()}};
    linear_multi(gate_up, x, n, pool);
    swiglu(buf.gate.data(), buf.up.data(), buf.hidden.data(), n * n_ff);
    linear(down, nullptr, buf.hidden.data(), out, n, pool);
}

void route_token(const float* logits, const MoeConfig& cfg, int32_t* choice, float* weight) {
    std::vector<float> probs(logits, logits + cfg.n_expert);
    softmax(probs.data(), cfg.n_expert);
    std::vector<int32_t> order(size_t(cfg.n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + cfg.n_used, order.end(),
                      [&](int32_t a, int32_t b) {
                          return probs[a] != probs[b] ? probs[a] > probs[b] : a < b;
                      });
    float sum = 0.0f;
    for (int k = 0; k < cfg.n_used; ++k) {
        choice[k] = order[k];
        weight[k] = probs[order[k]];
        sum += weight[k];
    }
    if (cfg.norm_weights) {
        for (int k = 0; k < cfg.n_used; ++k) weight[k] /= sum;
    }
}

namespace {

// The trace's experts in place of the router's, weighted by the router's probabilities.
void force_route(const float* logits, const MoeConfig& cfg, std::span<const int32_t> experts,
                 int32_t* choice, float* weight) {
    std::vector<float> probs(logits, logits + cfg.n_expert);
    softmax(probs.data(), cfg.n_expert);
    float sum = 0.0f;
    for (int i = 0; i < cfg.n_used; ++i) {
        choice[i] = experts[size_t(i)];
        weight[i] = probs[size_t(choice[i])];
        sum += weight[i];
    }
    if (cfg.norm_weights && sum > 0) {
        for (int i = 0; i < cfg.n_used; ++i) weight[i] /= sum;
    }
}

}  // namespace

Result<void> moe_ffn(WeightStore& store, int layer, const TensorView& router,
                     const MoeConfig& cfg, const float* x, int64_t n, int64_t n_embd, float* out,
                     MoeBuffers& buf, MoeLayerStats* stats, ThreadPool& pool) {
    const int k = cfg.n_used;
    buf.router_logits.resize(size_t(n * cfg.n_expert));
    linear(router, nullptr, x, buf.router_logits.data(), n, pool);
    buf.choice.resize(size_t(n * k));
    buf.weight.resize(size_t(n * k));
    for (int64_t t = 0; t < n; ++t) {
        const float* logits = &buf.router_logits[size_t(t * cfg.n_expert)];
        if (cfg.forced) {
            force_route(logits, cfg, cfg.forced->choices(cfg.pos0 + t, layer),
                        &buf.choice[size_t(t * k)], &buf.weight[size_t(t * k)]);
        } else {
            route_token(logits, cfg, &buf.choice[size_t(t * k)], &buf.weight[size_t(t * k)]);
        }
    }
    // A streaming store reads the next layer's likely experts while this one computes: its
    // router applied to this hidden state (of the last token) is a cheap, usually good guess.
    if (const TensorView* next = store.early_router(layer + 1); next && n > 0) {
        std::vector<float> logits(size_t(cfg.n_expert));
        linear(*next, nullptr, x + (n - 1) * n_embd, logits.data(), 1, pool);
        std::vector<int32_t> guess(static_cast<size_t>(k));
        std::vector<float> guess_weight(static_cast<size_t>(k));
        route_token(logits.data(), cfg, guess.data(), guess_weight.data());
        store.hint_experts(layer + 1, guess);
    }
    store.prepare_experts(layer, buf.choice, k);
    // Each expert once, for every (token, slot) that chose it.
    buf.slot_out.resize(size_t(n * k * n_embd));
    std::vector<int64_t> users;
    for (int e = 0; e < cfg.n_expert; ++e) {
        users.clear();
        for (int64_t i = 0; i < n * k; ++i) {
            if (buf.choice[size_t(i)] == e) users.push_back(i);
        }
        if (users.empty()) continue;
        STRATA_ASSIGN(const ExpertView ev, store.acquire_expert(layer, e));
        const int64_t m = int64_t(users.size());
        buf.x_rows.resize(size_t(m * n_embd));
        for (int64_t u = 0; u < m; ++u) {
            std::memcpy(&buf.x_rows[size_t(u * n_embd)], x + (users[size_t(u)] / k) * n_embd,
                        sizeof(float) * size_t(n_embd));
        }
        buf.y_rows.resize(size_t(m * n_embd));
        swiglu_ffn(ev.gate, ev.up, ev.down, buf.x_rows.data(), m, buf.y_rows.data(), buf.ffn,
                   pool);
        store.release_expert(layer, e);
        for (int64_t u = 0; u < m; ++u) {
            const int64_t slot = users[size_t(u)];
            const float w = buf.weight[size_t(slot)];
            float* dst = &buf.slot_out[size_t(slot * n_embd)];
            const float* src = &buf.y_rows[size_t(u * n_embd)];
            for (int64_t i = 0; i < n_embd; ++i) dst[i] = src[i] * w;
        }
        if (stats) ++stats->expert_loads;
    }
    // Weighted outputs summed in slot order, as the reference engine adds them.
    for (int64_t t = 0; t < n; ++t) {
        float* o = out + t * n_embd;
        std::memcpy(o, &buf.slot_out[size_t(t * k * n_embd)], sizeof(float) * size_t(n_embd));
        for (int s = 1; s < k; ++s) add_into(o, &buf.slot_out[size_t((t * k + s) * n_embd)], n_embd);
    }
    if (stats) stats->token_choices += uint64_t(n * k);
    return {};
}

}  // namespace strata::engine
