// The delta rule of a prompt by chunks (delta_net_chunked.h). The arithmetic is
// cpu/delta_net.cpp's delta_rule_chunked; its comment derives it. Per chunk of m tokens with log
// decays G_t cumulated from the chunk's start and the state M0 at its start:
//   kk[s][t] = beta_s exp(G_s - G_t) (k_s . k_t)  for t < s      (C x C, shared by the slices)
//   qk[t][s] = exp(G_t - G_s) (q_t . k_s)         for s <= t
//   d_s      = beta_s (v_s - exp(G_s) M0 k_s) - sum_{t<s} kk[s][t] d_t    (forward substitution)
//   o_t      = exp(G_t) M0 q_t + sum_{s<=t} qk[t][s] d_s                  (then scaled)
//   M        = exp(G_m) M0 + sum_s exp(G_m - G_s) d_s k_s^T
// Rows j of the state (value dimensions) are independent, so a block takes a slice of kSlice of
// them and the head's q/k products are computed by each of its slices.
#include "backend/cuda/delta_net_chunked.h"

#include <cuda_runtime.h>

#include <array>

#include "backend/cuda/cuda_check.h"
#include "model/activation_memory.h"

namespace strata::cuda {

namespace {

constexpr int kChunk = int(kDeltaNetChunk);
constexpr int kSlice = 32;  // value dimensions per block
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
static_assert(kChunk == 64 && kSlice == 32 && kThreads == 256,
              "the tile maps below cover 64 tokens x 32 value dimensions with 16 x 16 threads");

__device__ float sigmoid_of(float x) {
    return 1.0f / (1.0f + expf(-x));
}

__device__ float silu_of(float x) {
    return x / (1.0f + expf(-x));
}

__device__ double warp_sum(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// grid: n tokens; block: kThreads. Warps take the token's q and k head vectors in turn (squares
// summed in double, x / max(|x|, eps), as the CPU); the first threads take the value heads'
// gates.
__global__ void prepare_rows_kernel(DeltaNetShape shape, DeltaNetTensors w, DeltaNetRun run) {
    const int64_t t = blockIdx.x;
    const int S = shape.S;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    float* x = run.mixed + t * int64_t(S) * (2 * shape.k_heads + shape.v_heads);
    for (int v = warp; v < 2 * shape.k_heads; v += kWarps) {
        float* row = x + int64_t(v) * S;
        double sum = 0.0;
        for (int i = lane; i < S; i += 32) sum += double(row[i] * row[i]);
        sum = warp_sum(sum);
        const float inv = 1.0f / fmaxf(sqrtf(float(sum)), shape.eps);
        for (int i = lane; i < S; i += 32) row[i] *= inv;
    }
    float* alpha = run.alpha + t * shape.v_heads;
    float* beta = run.beta + t * shape.v_heads;
    for (int h = int(threadIdx.x); h < shape.v_heads; h += kThreads) {
        const float z = alpha[h] + w.dt_bias[h];
        const float softplus = z > 20.0f ? z : log1pf(expf(z));
        alpha[h] = softplus * w.a[h];
        beta[h] = sigmoid_of(beta[h]);
    }
}

// Shared memory of the chunk kernel, in floats. Rows padded by one so that the threads of a warp,
// reading one column of different rows, fall in different banks.
template <int S>
struct ChunkSmem {
    static constexpr int kQk = S + 1;       // row stride of q and k
    static constexpr int kCc = kChunk + 1;  // row stride of the C x C products
    static constexpr int kSl = kSlice + 1;  // row stride of the slice's rows
    static constexpr int q = 0;             // [C][kQk]
    static constexpr int k = q + kChunk * kQk;
    static constexpr int kk = k + kChunk * kQk;   // [C][kCc]
    static constexpr int qk = kk + kChunk * kCc;  // [C][kCc]
    static constexpr int d = qk + kChunk * kCc;   // [C][kSl]: v, then the right side, then d
    static constexpr int o = d + kChunk * kSl;    // [C][kSl]: exp(G_t) M0 q_t
    static constexpr int m = o + kChunk * kSl;    // [kSlice][kQk]: the state's slice
    static constexpr int g = m + kSlice * kQk;    // [C]: G_t
    static constexpr int b = g + kChunk;          // [C]: beta_t
    static constexpr int wt = b + kChunk;         // [C]: exp(G_m - G_t)
    static constexpr int floats = wt + kChunk;
    static constexpr size_t bytes = size_t(floats) * sizeof(float);
};

// grid: (v_heads, S / kSlice); block: kThreads. Threads form a 16 x 16 grid (ty = tid / 16,
// tx = tid % 16) for the tiles: tokens ty + 16 a, value dimensions tx + 16 b, and so on.
template <int S>
__global__ void __launch_bounds__(kThreads)
    delta_chunks_kernel(DeltaNetShape shape, DeltaNetRun run) {
    using L = ChunkSmem<S>;
    extern __shared__ float smem[];
    float* qs = smem + L::q;
    float* ks = smem + L::k;
    float* kks = smem + L::kk;
    float* qks = smem + L::qk;
    float* ds = smem + L::d;
    float* os = smem + L::o;
    float* ms = smem + L::m;
    float* gs = smem + L::g;
    float* bs = smem + L::b;
    float* ws = smem + L::wt;

    const int h = int(blockIdx.x), j0 = int(blockIdx.y) * kSlice;
    const int kh = shape.grouped ? h / (shape.v_heads / shape.k_heads) : h % shape.k_heads;
    const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
    const int ty = tid / 16, tx = tid % 16;
    const int64_t key_dim = int64_t(S) * shape.k_heads, value_dim = int64_t(S) * shape.v_heads;
    const int64_t channels = 2 * key_dim + value_dim;
    float* state = run.delta_state + int64_t(h) * S * S + int64_t(j0) * S;
    const float scale = 1.0f / sqrtf(float(S));

    for (int e = tid; e < kSlice * S; e += kThreads) {
        ms[(e / S) * L::kQk + e % S] = state[e];
    }

    for (int64_t c0 = 0; c0 < run.n; c0 += kChunk) {
        const int m = int(run.n - c0 < kChunk ? run.n - c0 : kChunk);
        // The chunk's rows; those past m are zeros, so they write nothing (beta 0, g 0).
        for (int e = tid; e < kChunk * S; e += kThreads) {
            const int t = e / S, i = e % S;
            const float* x = run.mixed + (c0 + t) * channels;
            qs[t * L::kQk + i] = t < m ? x[int64_t(kh) * S + i] : 0.0f;
            ks[t * L::kQk + i] = t < m ? x[key_dim + int64_t(kh) * S + i] : 0.0f;
        }
        for (int e = tid; e < kChunk * kSlice; e += kThreads) {
            const int t = e / kSlice, jj = e % kSlice;
            ds[t * L::kSl + jj] =
                t < m ? run.mixed[(c0 + t) * channels + 2 * key_dim + int64_t(h) * S + j0 + jj]
                      : 0.0f;
        }
        if (warp == 0) {
            // G_t: an inclusive scan of the log decays, each lane holding tokens lane, lane + 32.
            float g[2], b[2];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int t = lane + 32 * half;
                g[half] = t < m ? run.alpha[(c0 + t) * shape.v_heads + h] : 0.0f;
                b[half] = t < m ? run.beta[(c0 + t) * shape.v_heads + h] : 0.0f;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const float up = __shfl_up_sync(0xffffffffu, g[half], o);
                    if (lane >= o) g[half] += up;
                }
            }
            g[1] += __shfl_sync(0xffffffffu, g[0], 31);
            const float last = __shfl_sync(0xffffffffu, g[1], 31);
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int t = lane + 32 * half;
                gs[t] = g[half];
                bs[t] = b[half];
                ws[t] = expf(last - g[half]);
            }
        }
        __syncthreads();

        // The C x C products (tokens r = ty + 16 a against c = tx + 16 b) and the state's
        // slice against each token's k and q (tokens ty + 16 a, value dimensions tx + 16 b).
        {
            float kk[4][4] = {}, qk[4][4] = {}, mk[4][2] = {}, mq[4][2] = {};
#pragma unroll 4
            for (int i = 0; i < S; ++i) {
                float kr[4], qr[4], kc[4], mv[2];
#pragma unroll
                for (int a = 0; a < 4; ++a) {
                    kr[a] = ks[(ty + 16 * a) * L::kQk + i];
                    qr[a] = qs[(ty + 16 * a) * L::kQk + i];
                    kc[a] = ks[(tx + 16 * a) * L::kQk + i];
                }
#pragma unroll
                for (int b = 0; b < 2; ++b) mv[b] = ms[(tx + 16 * b) * L::kQk + i];
#pragma unroll
                for (int a = 0; a < 4; ++a) {
#pragma unroll
                    for (int b = 0; b < 4; ++b) {
                        kk[a][b] += kr[a] * kc[b];
                        qk[a][b] += qr[a] * kc[b];
                    }
#pragma unroll
                    for (int b = 0; b < 2; ++b) {
                        mk[a][b] += mv[b] * kr[a];
                        mq[a][b] += mv[b] * qr[a];
                    }
                }
            }
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                const int r = ty + 16 * a;
                const float gr = gs[r], br = bs[r];
#pragma unroll
                for (int b = 0; b < 4; ++b) {
                    const int c = tx + 16 * b;
                    const float decay = c <= r ? expf(gr - gs[c]) : 0.0f;
                    kks[r * L::kCc + c] = c < r ? br * decay * kk[a][b] : 0.0f;
                    qks[r * L::kCc + c] = decay * qk[a][b];
                }
                const float er = expf(gr);
#pragma unroll
                for (int b = 0; b < 2; ++b) {
                    const int jj = tx + 16 * b;
                    float& d = ds[r * L::kSl + jj];
                    d = br * (d - er * mk[a][b]);
                    os[r * L::kSl + jj] = er * mq[a][b];
                }
            }
        }
        __syncthreads();

        // Forward substitution, each value dimension's column within one warp: 4 columns a
        // warp, 8 lanes a column splitting the sum over earlier tokens.
        {
            const int jj = warp * 4 + lane / 8, p = lane % 8;
            for (int s = 1; s < m; ++s) {
                float part = 0.0f;
                for (int t = p; t < s; t += 8) part += kks[s * L::kCc + t] * ds[t * L::kSl + jj];
                part += __shfl_xor_sync(0xffffffffu, part, 4);
                part += __shfl_xor_sync(0xffffffffu, part, 2);
                part += __shfl_xor_sync(0xffffffffu, part, 1);
                if (p == 0) ds[s * L::kSl + jj] -= part;
                __syncwarp();
            }
        }
        __syncthreads();

        // The outputs (tokens ty + 16 a, value dimensions tx + 16 b), before the gated norm.
        {
            float o[4][2];
#pragma unroll
            for (int a = 0; a < 4; ++a) {
#pragma unroll
                for (int b = 0; b < 2; ++b) o[a][b] = os[(ty + 16 * a) * L::kSl + tx + 16 * b];
            }
            for (int s = 0; s < m; ++s) {
                float d[2], q[4];
#pragma unroll
                for (int b = 0; b < 2; ++b) d[b] = ds[s * L::kSl + tx + 16 * b];
#pragma unroll
                for (int a = 0; a < 4; ++a) q[a] = qks[(ty + 16 * a) * L::kCc + s];
#pragma unroll
                for (int a = 0; a < 4; ++a) {
#pragma unroll
                    for (int b = 0; b < 2; ++b) o[a][b] += q[a] * d[b];
                }
            }
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                const int t = ty + 16 * a;
                if (t >= m) continue;
                float* out = run.out + (c0 + t) * value_dim + int64_t(h) * S + j0;
#pragma unroll
                for (int b = 0; b < 2; ++b) out[tx + 16 * b] = o[a][b] * scale;
            }
        }
        // The state after the chunk (value dimensions tx + 16 a, key dimensions ty + 16 b):
        // read only by the next chunk's products, after the barrier below.
        {
            constexpr int kCols = S / 16;
            const float decay = expf(gs[kChunk - 1]);
            float acc[2][kCols];
#pragma unroll
            for (int a = 0; a < 2; ++a) {
#pragma unroll
                for (int b = 0; b < kCols; ++b) {
                    acc[a][b] = decay * ms[(tx + 16 * a) * L::kQk + ty + 16 * b];
                }
            }
            for (int s = 0; s < m; ++s) {
                float d[2], k[kCols];
                const float wt = ws[s];
#pragma unroll
                for (int a = 0; a < 2; ++a) d[a] = wt * ds[s * L::kSl + tx + 16 * a];
#pragma unroll
                for (int b = 0; b < kCols; ++b) k[b] = ks[s * L::kQk + ty + 16 * b];
#pragma unroll
                for (int a = 0; a < 2; ++a) {
#pragma unroll
                    for (int b = 0; b < kCols; ++b) acc[a][b] += d[a] * k[b];
                }
            }
#pragma unroll
            for (int a = 0; a < 2; ++a) {
#pragma unroll
                for (int b = 0; b < kCols; ++b) {
                    ms[(tx + 16 * a) * L::kQk + ty + 16 * b] = acc[a][b];
                }
            }
        }
        __syncthreads();
    }

    for (int e = tid; e < kSlice * S; e += kThreads) {
        state[e] = ms[(e / S) * L::kQk + e % S];
    }
}

// grid: n x ceil(v_heads / kWarps); a warp per (token, value head): RMSNorm(o) * norm * silu(z),
// as cpu::rms_norm_row then the gate.
__global__ void gated_norm_kernel(DeltaNetShape shape, const float* norm, DeltaNetRun run) {
    const int h = int(blockIdx.y) * kWarps + int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    if (h >= shape.v_heads) return;
    const int S = shape.S;
    const int64_t at = int64_t(blockIdx.x) * S * shape.v_heads + int64_t(h) * S;
    float* o = run.out + at;
    const float* z = run.z + at;
    double sum = 0.0;
    for (int i = lane; i < S; i += 32) sum += double(o[i]) * double(o[i]);
    sum = warp_sum(sum);
    const float inv = 1.0f / sqrtf(float(sum / double(S)) + shape.eps);
    for (int i = lane; i < S; i += 32) o[i] = (o[i] * inv) * norm[i] * silu_of(z[i]);
}

template <int S>
bool configure_chunks() {
    static const bool fits = [] {
        int device = 0, optin = 0;
        STRATA_CUDA(cudaGetDevice(&device));
        STRATA_CUDA(
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
        if (ChunkSmem<S>::bytes > size_t(optin)) return false;
        STRATA_CUDA(cudaFuncSetAttribute(delta_chunks_kernel<S>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(ChunkSmem<S>::bytes)));
        return true;
    }();
    return fits;
}

template <int S>
void launch_chunks(const DeltaNetShape& shape, const DeltaNetRun& run, cudaStream_t s) {
    const dim3 grid(unsigned(shape.v_heads), unsigned(S / kSlice));
    delta_chunks_kernel<S><<<grid, kThreads, ChunkSmem<S>::bytes, s>>>(shape, run);
    STRATA_CUDA_LAUNCHED();
}

}  // namespace

bool delta_net_chunked_fits(int S) {
    switch (S) {
        case 32:
            return configure_chunks<32>();
        case 64:
            return configure_chunks<64>();
        case 128:
            return configure_chunks<128>();
        default:
            return false;
    }
}

void delta_rule_chunked(const DeltaNetShape& shape, const DeltaNetTensors& w,
                        const DeltaNetRun& run, cudaStream_t s) {
    if (run.n <= 0) return;
    prepare_rows_kernel<<<unsigned(run.n), kThreads, 0, s>>>(shape, w, run);
    STRATA_CUDA_LAUNCHED();
    switch (shape.S) {
        case 32:
            launch_chunks<32>(shape, run, s);
            break;
        case 64:
            launch_chunks<64>(shape, run, s);
            break;
        default:
            launch_chunks<128>(shape, run, s);
            break;
    }
    const dim3 grid(unsigned(run.n), unsigned((shape.v_heads + kWarps - 1) / kWarps));
    gated_norm_kernel<<<grid, kThreads, 0, s>>>(shape, w.norm, run);
    STRATA_CUDA_LAUNCHED();
}

}  // namespace strata::cuda
