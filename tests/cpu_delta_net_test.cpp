// The Gated DeltaNet's pieces on the CPU (backend/cpu/delta_net.h) against a plain double-
// precision reference on fresh random data: the causal convolution, whole and cut into calls
// that carry its state; the delta rule, one token at a time and by chunks (prompts of several
// chunks and a ragged end), both from a random state, outputs and the state afterwards.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/delta_net.h"

namespace strata::cpu {
namespace {

std::vector<float> normal(size_t n, std::mt19937& rng, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

// y[t][c] = silu(sum_i taps[c][i] * in[t + i][c]), in = zeros(K-1) then x.
std::vector<double> conv_reference(const std::vector<float>& x, int64_t n, int64_t channels,
                                   const std::vector<float>& taps, int K) {
    std::vector<double> y(size_t(n * channels));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < channels; ++c) {
            double sum = 0;
            for (int i = 0; i < K; ++i) {
                const int64_t src = t + i - (K - 1);
                if (src >= 0)
                    sum += double(taps[size_t(c * K + i)]) * x[size_t(src * channels + c)];
            }
            y[size_t(t * channels + c)] = sum / (1.0 + std::exp(-sum));
        }
    }
    return y;
}

TEST(CpuDeltaNet, ConvolutionCarriesItsStateAcrossCalls) {
    std::mt19937 rng(5u);
    const int K = 4;
    const int64_t n = 23, channels = 70;
    const std::vector<float> x = normal(size_t(n * channels), rng);
    const std::vector<float> taps = normal(size_t(channels * K), rng, 0.5f);
    const std::vector<double> want = conv_reference(x, n, channels, taps, K);

    // Whole, in two channel ranges; then the same tokens in calls of 1, 2, 7 and 13 tokens.
    std::vector<float> whole = x, state(size_t(channels * (K - 1)), 0.0f);
    causal_conv_silu(whole.data(), n, channels, 0, 33, K, taps.data(), state.data());
    causal_conv_silu(whole.data(), n, channels, 33, channels, K, taps.data(), state.data());
    std::vector<float> pieces = x, carried(size_t(channels * (K - 1)), 0.0f);
    int64_t t0 = 0;
    for (int64_t len : {1, 2, 7, 13}) {
        causal_conv_silu(pieces.data() + t0 * channels, len, channels, 0, channels, K, taps.data(),
                         carried.data());
        t0 += len;
    }
    ASSERT_EQ(t0, n);
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(whole[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
        EXPECT_EQ(pieces[i], whole[i]) << i;
    }
    // The state is the last K-1 inputs of each channel, oldest first.
    for (int64_t c = 0; c < channels; ++c) {
        for (int i = 0; i < K - 1; ++i) {
            EXPECT_EQ(state[size_t(c * (K - 1) + i)], x[size_t((n - (K - 1) + i) * channels + c)]);
            EXPECT_EQ(carried[size_t(c * (K - 1) + i)], state[size_t(c * (K - 1) + i)]);
        }
    }
}

// A run of one head's tokens: q and k unit vectors, v, log decays g <= 0, beta in (0, 1).
struct HeadData {
    int S;
    int64_t n;
    std::vector<float> q, k, v, g, beta, state;
};

HeadData random_head(int S, int64_t n, std::mt19937& rng) {
    HeadData h{S,
               n,
               normal(size_t(n * S), rng),
               normal(size_t(n * S), rng),
               normal(size_t(n * S), rng),
               {},
               {},
               normal(size_t(S * S), rng, 0.3f)};
    for (auto* m : {&h.q, &h.k}) {
        for (int64_t t = 0; t < n; ++t) {
            double sum = 0;
            for (int i = 0; i < S; ++i)
                sum += double((*m)[size_t(t * S + i)]) * (*m)[size_t(t * S + i)];
            for (int i = 0; i < S; ++i) (*m)[size_t(t * S + i)] /= float(std::sqrt(sum));
        }
    }
    std::uniform_real_distribution<float> decay(-2.0f, 0.0f), strength(0.0f, 1.0f);
    for (int64_t t = 0; t < n; ++t) {
        h.g.push_back(decay(rng));
        h.beta.push_back(strength(rng));
    }
    return h;
}

// M <- exp(g) M; M += beta (v - M k) k^T; o = M q / sqrt(S), with M[j][i] (value j, key i).
void delta_reference(const HeadData& h, std::vector<double>& out, std::vector<double>& M) {
    const int S = h.S;
    M.assign(h.state.begin(), h.state.end());
    out.assign(size_t(h.n * S), 0.0);
    for (int64_t t = 0; t < h.n; ++t) {
        const float* q = &h.q[size_t(t * S)];
        const float* k = &h.k[size_t(t * S)];
        const float* v = &h.v[size_t(t * S)];
        for (double& m : M) m *= std::exp(double(h.g[size_t(t)]));
        for (int j = 0; j < S; ++j) {
            double mk = 0;
            for (int i = 0; i < S; ++i) mk += M[size_t(j * S + i)] * k[i];
            const double d = (v[j] - mk) * h.beta[size_t(t)];
            for (int i = 0; i < S; ++i) M[size_t(j * S + i)] += d * k[i];
            double o = 0;
            for (int i = 0; i < S; ++i) o += M[size_t(j * S + i)] * q[i];
            out[size_t(t * S + j)] = o / std::sqrt(double(S));
        }
    }
}

void expect_delta_forms_match(int S, int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    const HeadData h = random_head(S, n, rng);
    std::vector<double> want_out, want_state;
    delta_reference(h, want_out, want_state);

    std::vector<float> out_rec(size_t(n * S)), out_chunk(size_t(n * S));
    std::vector<float> state_rec = h.state, state_chunk = h.state;
    std::vector<float> scratch(size_t(delta_chunk_scratch_floats(S)));
    const auto run = [&](std::vector<float>& out) {
        return DeltaHeadRun{h.q.data(), h.k.data(), h.v.data(), S, h.g.data(), h.beta.data(),
                            1,          out.data(), S,          n, S};
    };
    delta_rule_recurrent(run(out_rec), state_rec.data());
    delta_rule_chunked(run(out_chunk), state_chunk.data(), scratch.data());
    // The state stays of the order of |v| / |k|^2 (each write moves M k towards v); float sums
    // of S products and C chunk terms stay within a few 1e-5 of double precision.
    for (size_t i = 0; i < want_out.size(); ++i) {
        EXPECT_NEAR(out_rec[i], want_out[i], 2e-4 * (1 + std::fabs(want_out[i]))) << i;
        EXPECT_NEAR(out_chunk[i], want_out[i], 2e-4 * (1 + std::fabs(want_out[i]))) << i;
    }
    for (size_t i = 0; i < want_state.size(); ++i) {
        EXPECT_NEAR(state_rec[i], want_state[i], 2e-4 * (1 + std::fabs(want_state[i]))) << i;
        EXPECT_NEAR(state_chunk[i], want_state[i], 2e-4 * (1 + std::fabs(want_state[i]))) << i;
    }
}

TEST(CpuDeltaNet, RecurrentAndChunkedFormsMatchTheReference) {
    expect_delta_forms_match(16, 1, 11u);                     // a decode step
    expect_delta_forms_match(16, kDeltaChunk - 1, 12u);       // less than a chunk
    expect_delta_forms_match(32, 3 * kDeltaChunk + 17, 13u);  // several chunks, a ragged end
    expect_delta_forms_match(64, 2 * kDeltaChunk, 14u);       // whole chunks
}

// A prompt by chunks, then decode steps one at a time, continue the same state as the whole run
// one token at a time.
TEST(CpuDeltaNet, ChunkedPromptThenStepsContinueTheState) {
    std::mt19937 rng(21u);
    const int S = 32;
    const int64_t n = 100, prompt = 70;
    const HeadData h = random_head(S, n, rng);
    std::vector<double> want_out, want_state;
    delta_reference(h, want_out, want_state);
    std::vector<float> out(size_t(n * S)), state = h.state;
    std::vector<float> scratch(size_t(delta_chunk_scratch_floats(S)));
    const auto part = [&](int64_t t0, int64_t len) {
        return DeltaHeadRun{&h.q[size_t(t0 * S)],
                            &h.k[size_t(t0 * S)],
                            &h.v[size_t(t0 * S)],
                            S,
                            &h.g[size_t(t0)],
                            &h.beta[size_t(t0)],
                            1,
                            &out[size_t(t0 * S)],
                            S,
                            len,
                            S};
    };
    delta_rule_chunked(part(0, prompt), state.data(), scratch.data());
    for (int64_t t = prompt; t < n; ++t) delta_rule_recurrent(part(t, 1), state.data());
    for (size_t i = 0; i < want_out.size(); ++i) {
        EXPECT_NEAR(out[i], want_out[i], 2e-4 * (1 + std::fabs(want_out[i]))) << i;
    }
    for (size_t i = 0; i < want_state.size(); ++i) {
        EXPECT_NEAR(state[i], want_state[i], 2e-4 * (1 + std::fabs(want_state[i]))) << i;
    }
}

}  // namespace
}  // namespace strata::cpu
