// The Gated DeltaNet of hybrid models (qwen35, qwen3next) on the GPU, the gated query's two small
// operations and the ungrouping of qwen3next's fused projections. The arithmetic is
// cpu/delta_net.cpp's and cpu_backend.cpp's (Backend::delta_net in backend.h says what it
// computes); the state layouts are the CPU's:
//   conv state   [channels][d_conv - 1]   the last d_conv - 1 inputs of each channel, oldest first
//   delta state  [v_heads][S][S]          row j of head h: value dimension j over key dimensions
// A token's mixed row is [q: k_heads x S][k: k_heads x S][v: v_heads x S]; value head h reads key
// head h % k_heads (qwen35), or h / (v_heads / k_heads) where the value heads are grouped
// (qwen3next).
//
// One run (a sequence's consecutive rows) per call: the convolution (a thread per channel along
// the run's tokens), then for a decode step or a short run the delta rule with the gated output
// norm token by token (a block per value head, its S x S state held in registers for the whole
// run: read once, written once), for a prompt the same by chunks (delta_net_chunked.h). Nothing
// synchronises with the host, so a decode step's calls are captured in its CUDA graph.
#pragma once

#include <cstdint>

#include "util/result.h"

// cudaStream_t as the CUDA runtime declares it (driver_types.h), so code built without the CUDA
// include path (the tests) can include this header.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace strata::cuda {

// Convolution taps and delta-rule head sizes the kernels take.
inline constexpr int kGpuMaxConvKernel = 8;
bool delta_net_head_size_supported(int S);  // 32, 64 and 128
// An error naming what the GPU cannot run for these sizes, or nothing.
Result<void> check_delta_net_sizes(int S, int d_conv, int k_heads, int v_heads);

struct DeltaNetShape {
    int S = 0;             // head size of q, k and v
    int k_heads = 0;       // key heads
    int v_heads = 0;       // value heads
    int d_conv = 0;        // convolution taps
    float eps = 0;         // the L2 norms' floor and the output RMS norm's epsilon
    bool grouped = false;  // value heads grouped per key head (ModelHparams::ssm_grouped_heads)
    int64_t channels() const { return int64_t(S) * (2 * k_heads + v_heads); }
    int64_t value_dim() const { return int64_t(S) * v_heads; }
};

struct DeltaNetTensors {
    const float* conv1d;   // [channels][d_conv]
    const float* dt_bias;  // [v_heads]
    const float* a;        // [v_heads], A = -exp(A_log)
    const float* norm;     // [S]
};

// One sequence's run of n rows; every pointer is at the run's first row, in device memory.
struct DeltaNetRun {
    float* mixed;        // [n][channels]: replaced by silu(conv) of itself
    float* alpha;        // [n][v_heads]: before softplus (a prompt's chunks replace it)
    float* beta;         // [n][v_heads]: before sigmoid (likewise)
    const float* z;      // [n][value_dim]: the output gate
    float* out;          // [n][value_dim]
    float* conv_state;   // [channels][d_conv - 1], updated
    float* delta_state;  // [v_heads][S][S], updated
    int64_t n = 0;
};

// PRECONDITION: check_delta_net_sizes passed for the shape.
void delta_net(const DeltaNetShape& shape, const DeltaNetTensors& w, const DeltaNetRun& run,
               cudaStream_t s);

// q and gate ([n][heads][hd] each) from mixed ([n][heads][2 hd], each head's query then gate).
void split_query_gate(const float* mixed, float* q, float* gate, int64_t n, int heads, int hd,
                      cudaStream_t s);

// rows[i] *= sigmoid(gate[i]) for count values.
void sigmoid_mul(float* rows, const float* gate, int64_t count, cudaStream_t s);

// Backend::ungroup_columns on device memory: each of n rows of `from` is `groups` groups of the
// parts' widths side by side; part p of group g goes to to[p] + row * to_cols[p] + to_col[p] +
// g * width[p]. Parts past `parts` are unused.
inline constexpr int kMaxUngroupParts = 4;
struct UngroupParts {
    float* to[kMaxUngroupParts] = {};
    int64_t width[kMaxUngroupParts] = {}, to_col[kMaxUngroupParts] = {},
            to_cols[kMaxUngroupParts] = {};
    int parts = 0;
};
void ungroup_columns(const float* from, int64_t groups, const UngroupParts& parts, int64_t n,
                     cudaStream_t s);

}  // namespace strata::cuda
