#include "backend/cpu/delta_net.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace strata::cpu {

namespace {

// Four partial sums, so the compiler can keep them in vector lanes.
float dot(const float* a, const float* b, int n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; ++i) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

// y += a * x
void mad(float* y, const float* x, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

float silu_of(float x) {
    return x / (1.0f + std::exp(-x));
}

}  // namespace

void causal_conv_silu(float* x, int64_t n, int64_t row_stride, int64_t c0, int64_t c1, int d_conv,
                      const float* taps, float* state) {
    assert(d_conv >= 2 && d_conv <= kMaxConvKernel);
    const int keep = d_conv - 1;
    // A block of channels at a time: each token's row is read once for the whole block.
    constexpr int64_t kBlock = 32;
    float window[kBlock][kMaxConvKernel];
    for (int64_t b0 = c0; b0 < c1; b0 += kBlock) {
        const int64_t b1 = std::min(c1, b0 + kBlock);
        for (int64_t c = b0; c < b1; ++c) {
            std::copy_n(state + c * keep, keep, window[c - b0]);
        }
        for (int64_t t = 0; t < n; ++t) {
            float* row = x + t * row_stride;
            for (int64_t c = b0; c < b1; ++c) {
                float* w = window[c - b0];
                w[keep] = row[c];
                const float* tap = taps + c * d_conv;
                float sum = 0.0f;
                for (int i = 0; i < d_conv; ++i) sum += w[i] * tap[i];
                row[c] = silu_of(sum);
                for (int i = 0; i < keep; ++i) w[i] = w[i + 1];
            }
        }
        for (int64_t c = b0; c < b1; ++c) {
            std::copy_n(window[c - b0], keep, state + c * keep);
        }
    }
}

void delta_rule_recurrent(const DeltaHeadRun& r, float* state) {
    const int S = r.S;
    const float scale = 1.0f / std::sqrt(float(S));
    for (int64_t t = 0; t < r.n; ++t) {
        const float* q = r.q + t * r.stride;
        const float* k = r.k + t * r.stride;
        const float* v = r.v + t * r.stride;
        const float decay = std::exp(r.g[t * r.gb_stride]);
        const float beta = r.beta[t * r.gb_stride];
        float* out = r.out + t * r.out_stride;
        // Each value dimension's row of the state is independent: decay, read, write, answer.
        for (int j = 0; j < S; ++j) {
            float* row = state + int64_t(j) * S;
            for (int i = 0; i < S; ++i) row[i] *= decay;
            const float delta = (v[j] - dot(row, k, S)) * beta;
            mad(row, k, delta, S);
            out[j] = dot(row, q, S) * scale;
        }
    }
}

int64_t delta_chunk_scratch_floats(int S) {
    const int64_t C = kDeltaChunk;
    return C + 2 * C * C + 2 * C * S;
}

// Within a chunk of m tokens with log decays cumulated from its start, G_t, and the state M0 at
// its start, the state before token s's write is exp(G_s) M0 + sum_{r<s} exp(G_s - G_r) d_r k_r^T,
// so the writes d_s = beta_s (v_s - that state k_s) solve a unit lower-triangular system:
//   d_s = beta_s (v_s - exp(G_s) M0 k_s) - sum_{r<s} beta_s exp(G_s - G_r) (k_s . k_r) d_r.
// Then o_t = exp(G_t) M0 q_t + sum_{s<=t} exp(G_t - G_s) (q_t . k_s) d_s (scaled), and the state
// after the chunk is exp(G_m) M0 + sum_s exp(G_m - G_s) d_s k_s^T.
void delta_rule_chunked(const DeltaHeadRun& r, float* state, float* scratch) {
    const int S = r.S;
    const int64_t C = kDeltaChunk;
    const float scale = 1.0f / std::sqrt(float(S));
    float* G = scratch;      // [C]
    float* kk = G + C;       // [C][C]: beta_s exp(G_s - G_r) (k_s . k_r), r < s
    float* qk = kk + C * C;  // [C][C]: exp(G_t - G_s) (q_t . k_s), s <= t
    float* D = qk + C * C;   // [C][S]: the writes d_s
    float* M0x = D + C * S;  // [C][S]: M0 k_s, then M0 q_t
    for (int64_t c0 = 0; c0 < r.n; c0 += C) {
        const int64_t m = std::min(C, r.n - c0);
        const auto q = [&](int64_t t) { return r.q + (c0 + t) * r.stride; };
        const auto k = [&](int64_t t) { return r.k + (c0 + t) * r.stride; };
        const auto v = [&](int64_t t) { return r.v + (c0 + t) * r.stride; };
        float cum = 0.0f;
        for (int64_t t = 0; t < m; ++t) {
            cum += r.g[(c0 + t) * r.gb_stride];
            G[t] = cum;
        }
        for (int64_t s = 0; s < m; ++s) {
            const float beta = r.beta[(c0 + s) * r.gb_stride];
            for (int64_t t = 0; t < s; ++t) {
                kk[s * C + t] = beta * std::exp(G[s] - G[t]) * dot(k(s), k(t), S);
            }
            for (int j = 0; j < S; ++j) M0x[s * S + j] = dot(state + int64_t(j) * S, k(s), S);
        }
        for (int64_t s = 0; s < m; ++s) {
            const float beta = r.beta[(c0 + s) * r.gb_stride];
            const float decay = std::exp(G[s]);
            float* d = D + s * S;
            const float* vs = v(s);
            for (int j = 0; j < S; ++j) d[j] = beta * (vs[j] - decay * M0x[s * S + j]);
            for (int64_t t = 0; t < s; ++t) mad(d, D + t * S, -kk[s * C + t], S);
        }
        for (int64_t t = 0; t < m; ++t) {
            for (int64_t s = 0; s <= t; ++s) {
                qk[t * C + s] = std::exp(G[t] - G[s]) * dot(q(t), k(s), S);
            }
            for (int j = 0; j < S; ++j) M0x[t * S + j] = dot(state + int64_t(j) * S, q(t), S);
        }
        for (int64_t t = 0; t < m; ++t) {
            float* out = r.out + (c0 + t) * r.out_stride;
            const float decay = std::exp(G[t]);
            for (int j = 0; j < S; ++j) out[j] = decay * M0x[t * S + j];
            for (int64_t s = 0; s <= t; ++s) mad(out, D + s * S, qk[t * C + s], S);
            for (int j = 0; j < S; ++j) out[j] *= scale;
        }
        // The state after the chunk: rows j = value dimensions.
        const float last = G[m - 1];
        const float decay = std::exp(last);
        for (int j = 0; j < S; ++j) {
            float* row = state + int64_t(j) * S;
            for (int i = 0; i < S; ++i) row[i] *= decay;
            for (int64_t s = 0; s < m; ++s) mad(row, k(s), std::exp(last - G[s]) * D[s * S + j], S);
        }
    }
}

}  // namespace strata::cpu
