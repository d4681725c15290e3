// Gated DeltaNet kernels: the causal convolution, the delta rule with the gated output norm, the
// gated query's split and sigmoid product, and the ungrouping of fused projections (delta_net.h).
#include "backend/cuda/delta_net.h"

#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/delta_net_chunked.h"

namespace strata::cuda {

namespace {

constexpr int kConvThreads = 128;
constexpr int kConvBatch = 8;
// Runs this long or longer go by chunks (delta_net_chunked.h); shorter ones, decode steps among
// them, token by token, where the chunks' fixed cost would not pay.
constexpr int64_t kChunkedFrom = 16;
// A decode step's cost is each warp's chain of rows (two warp sums a row, one after the other):
// a block of 32 warps gives a warp S / 32 rows, 4 for head size 128.
constexpr int kDeltaWarps = 32;
constexpr int kDeltaThreads = 32 * kDeltaWarps;
constexpr int kElementThreads = 256;

__device__ float silu_of(float x) {
    return x / (1.0f + expf(-x));
}

__device__ float sigmoid_of(float x) {
    return 1.0f / (1.0f + expf(-x));
}

__device__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ double warp_sum(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// grid: channels / kConvThreads blocks; one thread per channel walks the run's tokens in order,
// its window of the last d_conv inputs in registers (indices unrolled to constants). The inputs of
// kConvBatch tokens are loaded together before any is replaced, so a prompt waits on memory once
// a batch rather than once a token.
__global__ void conv_silu_kernel(float* x, int64_t n, int64_t channels, int d_conv,
                                 const float* taps, float* state) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const int keep = d_conv - 1;
    float w[kGpuMaxConvKernel];
    float tap[kGpuMaxConvKernel];
#pragma unroll
    for (int i = 0; i < kGpuMaxConvKernel; ++i) {
        w[i] = i < keep ? state[c * keep + i] : 0.0f;
        tap[i] = i < d_conv ? taps[c * d_conv + i] : 0.0f;
    }
    for (int64_t t0 = 0; t0 < n; t0 += kConvBatch) {
        float in[kConvBatch];
#pragma unroll
        for (int b = 0; b < kConvBatch; ++b) {
            in[b] = t0 + b < n ? x[(t0 + b) * channels + c] : 0.0f;
        }
#pragma unroll
        for (int b = 0; b < kConvBatch; ++b) {
            if (t0 + b >= n) break;
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < kGpuMaxConvKernel; ++i) {
                if (i < keep) sum += w[i] * tap[i];
                if (i == keep) sum += in[b] * tap[i];
            }
            x[(t0 + b) * channels + c] = silu_of(sum);
            // Shift the window: the oldest input leaves, this one enters at keep - 1.
#pragma unroll
            for (int i = 0; i + 1 < kGpuMaxConvKernel; ++i) {
                if (i + 1 < keep) w[i] = w[i + 1];
                if (i + 1 == keep) w[i] = in[b];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < kGpuMaxConvKernel; ++i) {
        if (i < keep) state[c * keep + i] = w[i];
    }
}

// grid: v_heads blocks; block: kDeltaThreads. Warp w holds state rows j = w + kDeltaWarps * r,
// lane l the elements i = l + 32 * e of each: kRows x kElems registers per thread. Per token:
// warps 0 and 1 load and L2-normalise q and k, warp 2 loads v, warp 3 works out the decay and
// beta; then every warp updates its rows and answers their output values; then warp 0 applies
// the gated RMS norm and writes the token's output.
template <int S>
__global__ void __launch_bounds__(kDeltaThreads)
    delta_rule_kernel(DeltaNetShape shape, DeltaNetTensors w, DeltaNetRun run) {
    constexpr int kRows = S / kDeltaWarps;
    constexpr int kElems = S / 32;
    __shared__ float q_s[S], k_s[S], v_s[S], o_s[S];
    __shared__ float gate_s[2];  // exp(g), beta
    const int h = int(blockIdx.x);
    const int kh = shape.grouped ? h / (shape.v_heads / shape.k_heads) : h % shape.k_heads;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int64_t key_dim = int64_t(S) * shape.k_heads, value_dim = int64_t(S) * shape.v_heads;
    const int64_t channels = 2 * key_dim + value_dim;
    float* state = run.delta_state + int64_t(h) * S * S;

    float m[kRows][kElems];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < kElems; ++e)
            m[r][e] = state[(warp + kDeltaWarps * r) * S + lane + 32 * e];
    }
    const float scale = 1.0f / sqrtf(float(S));

    for (int64_t t = 0; t < run.n; ++t) {
        const float* x = run.mixed + t * channels;
        if (warp < 2) {
            // As the CPU: squares of floats summed in double, x / max(|x|, eps).
            const float* src = x + (warp == 0 ? 0 : key_dim) + int64_t(kh) * S;
            float* dst = warp == 0 ? q_s : k_s;
            float vals[kElems];
            double sum = 0.0;
#pragma unroll
            for (int e = 0; e < kElems; ++e) {
                vals[e] = src[lane + 32 * e];
                sum += double(vals[e] * vals[e]);
            }
            sum = warp_sum(sum);
            const float inv = 1.0f / fmaxf(sqrtf(float(sum)), shape.eps);
#pragma unroll
            for (int e = 0; e < kElems; ++e) dst[lane + 32 * e] = vals[e] * inv;
        } else if (warp == 2) {
            const float* src = x + 2 * key_dim + int64_t(h) * S;
#pragma unroll
            for (int e = 0; e < kElems; ++e) v_s[lane + 32 * e] = src[lane + 32 * e];
        } else if (warp == 3 && lane == 0) {
            const float z = run.alpha[t * shape.v_heads + h] + w.dt_bias[h];
            const float softplus = z > 20.0f ? z : log1pf(expf(z));
            gate_s[0] = expf(softplus * w.a[h]);
            gate_s[1] = sigmoid_of(run.beta[t * shape.v_heads + h]);
        }
        __syncthreads();
        const float decay = gate_s[0], beta = gate_s[1];
        float kv[kElems], qv[kElems];
#pragma unroll
        for (int e = 0; e < kElems; ++e) {
            kv[e] = k_s[lane + 32 * e];
            qv[e] = q_s[lane + 32 * e];
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            const int j = warp + kDeltaWarps * r;
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < kElems; ++e) {
                m[r][e] *= decay;
                dot += m[r][e] * kv[e];
            }
            const float delta = (v_s[j] - warp_sum(dot)) * beta;
            float answer = 0.0f;
#pragma unroll
            for (int e = 0; e < kElems; ++e) {
                m[r][e] += kv[e] * delta;
                answer += m[r][e] * qv[e];
            }
            answer = warp_sum(answer);
            if (lane == 0) o_s[j] = answer * scale;
        }
        __syncthreads();
        if (warp == 0) {
            // RMSNorm(o) * norm * silu(z), as cpu::rms_norm_row then the gate.
            double sum = 0.0;
#pragma unroll
            for (int e = 0; e < kElems; ++e) {
                const float o = o_s[lane + 32 * e];
                sum += double(o) * double(o);
            }
            sum = warp_sum(sum);
            const float mean = float(sum / double(S));
            const float inv = 1.0f / sqrtf(mean + shape.eps);
            const float* zt = run.z + t * value_dim + int64_t(h) * S;
            float* out = run.out + t * value_dim + int64_t(h) * S;
#pragma unroll
            for (int e = 0; e < kElems; ++e) {
                const int i = lane + 32 * e;
                out[i] = (o_s[i] * inv) * w.norm[i] * silu_of(zt[i]);
            }
        }
        // The next token's loads (warps 0..3) write q_s, k_s, v_s, read only after this token's
        // updates (the barrier above); o_s is written again only after the next barrier, which
        // warp 0 reaches once it has read it.
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < kElems; ++e)
            state[(warp + kDeltaWarps * r) * S + lane + 32 * e] = m[r][e];
    }
}

__global__ void split_query_gate_kernel(const float* mixed, float* q, float* gate, int64_t count,
                                        int hd) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int64_t head_row = i / hd, d = i % hd;
    q[i] = mixed[head_row * 2 * hd + d];
    gate[i] = mixed[head_row * 2 * hd + hd + d];
}

__global__ void sigmoid_mul_kernel(float* rows, const float* gate, int64_t count) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) rows[i] *= sigmoid_of(gate[i]);
}

// One thread per value of `from`: its group, then its part within the group.
__global__ void ungroup_columns_kernel(const float* from, int64_t groups, int64_t group_cols,
                                       UngroupParts parts, int64_t count) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int64_t row = i / (groups * group_cols), in_row = i % (groups * group_cols);
    const int64_t g = in_row / group_cols;
    int64_t c = in_row % group_cols;
    for (int p = 0; p < parts.parts; ++p) {
        if (c < parts.width[p]) {
            parts.to[p][row * parts.to_cols[p] + parts.to_col[p] + g * parts.width[p] + c] =
                from[i];
            return;
        }
        c -= parts.width[p];
    }
}

unsigned blocks_for(int64_t count, int threads) {
    return unsigned((count + threads - 1) / threads);
}

}  // namespace

bool delta_net_head_size_supported(int S) {
    return S == 32 || S == 64 || S == 128;
}

Result<void> check_delta_net_sizes(int S, int d_conv, int k_heads, int v_heads) {
    if (!delta_net_head_size_supported(S)) {
        return err("the GPU delta net takes head sizes 32, 64 and 128; this model's is ",
                   std::to_string(S), " (run it on the CPU: --gpu-mem 0)");
    }
    if (d_conv < 2 || d_conv > kGpuMaxConvKernel) {
        return err("the GPU delta net takes convolutions of 2 to ",
                   std::to_string(kGpuMaxConvKernel), " taps; this model's has ",
                   std::to_string(d_conv), " (run it on the CPU: --gpu-mem 0)");
    }
    if (k_heads <= 0 || v_heads <= 0) return err("the delta net has no heads");
    return {};
}

void delta_net(const DeltaNetShape& shape, const DeltaNetTensors& w, const DeltaNetRun& run,
               cudaStream_t s) {
    if (run.n <= 0) return;
    const int64_t channels = shape.channels();
    conv_silu_kernel<<<blocks_for(channels, kConvThreads), kConvThreads, 0, s>>>(
        run.mixed, run.n, channels, shape.d_conv, w.conv1d, run.conv_state);
    STRATA_CUDA_LAUNCHED();
    if (run.n >= kChunkedFrom && delta_net_chunked_fits(shape.S)) {
        delta_rule_chunked(shape, w, run, s);
        return;
    }
    switch (shape.S) {
        case 32:
            delta_rule_kernel<32><<<shape.v_heads, kDeltaThreads, 0, s>>>(shape, w, run);
            break;
        case 64:
            delta_rule_kernel<64><<<shape.v_heads, kDeltaThreads, 0, s>>>(shape, w, run);
            break;
        default:
            delta_rule_kernel<128><<<shape.v_heads, kDeltaThreads, 0, s>>>(shape, w, run);
            break;
    }
    STRATA_CUDA_LAUNCHED();
}

void split_query_gate(const float* mixed, float* q, float* gate, int64_t n, int heads, int hd,
                      cudaStream_t s) {
    const int64_t count = n * heads * hd;
    if (count <= 0) return;
    split_query_gate_kernel<<<blocks_for(count, kElementThreads), kElementThreads, 0, s>>>(
        mixed, q, gate, count, hd);
    STRATA_CUDA_LAUNCHED();
}

void sigmoid_mul(float* rows, const float* gate, int64_t count, cudaStream_t s) {
    if (count <= 0) return;
    sigmoid_mul_kernel<<<blocks_for(count, kElementThreads), kElementThreads, 0, s>>>(rows, gate,
                                                                                      count);
    STRATA_CUDA_LAUNCHED();
}

void ungroup_columns(const float* from, int64_t groups, const UngroupParts& parts, int64_t n,
                     cudaStream_t s) {
    int64_t group_cols = 0;
    for (int p = 0; p < parts.parts; ++p) group_cols += parts.width[p];
    const int64_t count = n * groups * group_cols;
    if (count <= 0) return;
    ungroup_columns_kernel<<<blocks_for(count, kElementThreads), kElementThreads, 0, s>>>(
        from, groups, group_cols, parts, count);
    STRATA_CUDA_LAUNCHED();
}

}  // namespace strata::cuda
