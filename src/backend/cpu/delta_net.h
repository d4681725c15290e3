// The Gated DeltaNet of hybrid models (qwen35, qwen3next) on the CPU: the short causal convolution
// with its carried inputs, and the gated delta rule over a run of tokens, recurrent (one token
// after the other, a decode step's form) or chunked (a prompt's: a chunk of tokens at a time as
// small matrix products against the state at the chunk's start).
//
// Shapes, per sequence and layer:
//   conv state   [channels][d_conv - 1]   the last d_conv - 1 inputs of each channel, oldest first
//   delta state  [v_heads][S][S]          row j of head h: value dimension j over key dimensions
// A token's mixed row is [q: k_heads x S][k: k_heads x S][v: v_heads x S]; value head h reads key
// head ModelHparams::ssm_key_head(h) (h % k_heads for qwen35, h / (v_heads / k_heads) for
// qwen3next).
#pragma once

#include <cstdint>

#include "model/activation_memory.h"

namespace strata::cpu {

// Convolution taps the state can carry; the published models use 4.
inline constexpr int kMaxConvKernel = 16;

// x (n rows of `channels`, stride `row_stride` floats) is replaced in place by
// silu(sum_i taps[c][i] * in[t + i]) where in = the state's d_conv - 1 inputs then x's; the state
// then holds the last d_conv - 1 inputs. Channels [c0, c1) only (callers split channels).
void causal_conv_silu(float* x, int64_t n, int64_t row_stride, int64_t c0, int64_t c1, int d_conv,
                      const float* taps, float* state);

// One value head's delta rule over n tokens. q, k, v: the token's vectors at q + t * stride
// (S floats each, q and k L2-normalised); g (log decay, <= 0) and beta at g[t * gb_stride];
// state: S x S (above), updated; out: S floats at out + t * out_stride, already scaled by
// 1/sqrt(S).
struct DeltaHeadRun {
    const float* q;
    const float* k;
    const float* v;
    int64_t stride;  // floats between consecutive tokens' q (and k, v)
    const float* g;
    const float* beta;
    int64_t gb_stride;
    float* out;
    int64_t out_stride;
    int64_t n;
    int S;
};
void delta_rule_recurrent(const DeltaHeadRun& r, float* state);

// The same by chunks of kDeltaChunk tokens; `scratch` holds delta_chunk_scratch_floats(S).
inline constexpr int kDeltaChunk = int(kDeltaNetChunk);
int64_t delta_chunk_scratch_floats(int S);
void delta_rule_chunked(const DeltaHeadRun& r, float* state, float* scratch);

}  // namespace strata::cpu
