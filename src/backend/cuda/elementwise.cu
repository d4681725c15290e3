#include "backend/cuda/elementwise.h"

#include <cassert>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/glu.cuh"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quantize_q8.cuh"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t count) {
    const int64_t b = (count + kThreads - 1) / kThreads;
    return int(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Threads of a norm block: a row of 4096 is one float4 per thread, so the pass is one round of
// loads, not a latency-bound loop (a decode step runs two norms per layer).
constexpr int kNormThreads = 1024;

// The quantized form of a norm's output rows (Q8Rows), as the kernel takes it: token-major
// codes and block scales (q8detail::ScratchLayout).
struct NormQuant {
    bool on = false;
    q8warp::Kind kind = q8warp::Kind::Q8_0;
    q8warp::RowOut rows{};
};

// One block per row. With `add`: x[r] += add[r] first (each thread adds the elements it then
// reads back), the residual add of the block before fused into this pass. V4: d a multiple of
// 4 and every row 16-byte aligned (float4 accesses). With q.on, the row's output is then
// quantized, a warp per block (read back from y: the block's own writes, after a barrier).
// Launched with launch_pdl.
// PRECONDITION: blockDim.x == kNormThreads.
template <bool V4>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(float* x, const float* __restrict__ add, const float* __restrict__ w, float* y,
                    int64_t d, float eps, NormQuant q) {
    pdl_trigger();
    pdl_wait();
    float* xr = x + blockIdx.x * d;
    float* yr = y + blockIdx.x * d;
    const float* ar = add ? add + blockIdx.x * d : nullptr;
    float ss = 0;
    if constexpr (V4) {
        for (int64_t i = threadIdx.x; i < d / 4; i += blockDim.x) {
            float4 v = reinterpret_cast<const float4*>(xr)[i];
            if (ar) {
                const float4 a = reinterpret_cast<const float4*>(ar)[i];
                v = make_float4(v.x + a.x, v.y + a.y, v.z + a.z, v.w + a.w);
                reinterpret_cast<float4*>(xr)[i] = v;
            }
            ss += v.x * v.x;
            ss += v.y * v.y;
            ss += v.z * v.z;
            ss += v.w * v.w;
        }
    } else {
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            float v = xr[i];
            if (ar) {
                v += ar[i];
                xr[i] = v;
            }
            ss += v * v;
        }
    }
    __shared__ float part[kNormThreads / 32];
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < kNormThreads / 32 ? part[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0) part[0] = v;
    }
    __syncthreads();
    const float scale = 1.0f / sqrtf(part[0] / float(d) + eps);
    if constexpr (V4) {
        for (int64_t i = threadIdx.x; i < d / 4; i += blockDim.x) {
            const float4 v = reinterpret_cast<const float4*>(xr)[i];
            float4 o = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
            if (w) {
                const float4 g = reinterpret_cast<const float4*>(w)[i];
                o = make_float4(o.x * g.x, o.y * g.y, o.z * g.z, o.w * g.w);
            }
            reinterpret_cast<float4*>(yr)[i] = o;
        }
    } else {
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
        }
    }
    if (!q.on) return;
    __syncthreads();
    const int64_t qk = q.kind == q8warp::Kind::Q8_K ? 256 : 32, nb = d / qk;
    const int64_t r = blockIdx.x;
    const q8warp::RowOut out{q.rows.codes + r * d, q.rows.ds + r * nb, q.rows.d + r * nb,
                             q.rows.bsums + r * (d / 16)};
    for (int64_t b = threadIdx.x / 32; b < nb; b += kNormThreads / 32) {
        q8warp::row_block(q.kind, yr, b, int(threadIdx.x % 32), out);
    }
}

// The norm launch: float4 accesses when every row and the weight allow them.
void launch_rms_norm(float* x, const float* add, const float* w, float* y, int64_t rows, int64_t d,
                     float eps, cudaStream_t s, Pdl pdl, Q8Rows q8) {
    const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool v4 =
        d % 4 == 0 && aligned(x) && aligned(y) && (!add || aligned(add)) && (!w || aligned(w));
    NormQuant q;
    if (q8.act_type != TensorType::F32) {
        // The quantizer's preconditions, on the norm's output rows.
        assert(d % (q8.act_type == TensorType::Q8_K ? 256 : 32) == 0);
        assert(q8.act_type != TensorType::Q8_K || (aligned(y) && d % 4 == 0));
        const q8detail::ScratchLayout l = q8detail::scratch_layout(q8.act_type, d, int(rows));
        auto* base = static_cast<uint8_t*>(q8.scratch);
        q.on = true;
        q.kind = q8warp::kind_of(q8.act_type);
        q.rows = {
            reinterpret_cast<int8_t*>(base + l.codes), reinterpret_cast<float2*>(base + l.scales),
            reinterpret_cast<float*>(base + l.scales), reinterpret_cast<int16_t*>(base + l.bsums)};
    }
    const dim3 grid{unsigned(rows)}, block{unsigned(kNormThreads)};
    if (v4) {
        launch_pdl(pdl, rms_norm_kernel<true>, grid, block, 0, s, x, add, w, y, d, eps, q);
    } else {
        launch_pdl(pdl, rms_norm_kernel<false>, grid, block, 0, s, x, add, w, y, d, eps, q);
    }
}

__global__ void add_kernel(float* __restrict__ y, const float* __restrict__ x, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
         i += int64_t(gridDim.x) * blockDim.x)
        y[i] += x[i];
}

__global__ void swiglu_kernel(const float* gate, const float* __restrict__ up, float* out,
                              int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
         i += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// grid: (row blocks, slots).
__global__ void expert_glu_kernel(float* h, const float* __restrict__ u, int64_t rows,
                                  const int32_t* __restrict__ ids, ExpertBiases b, Glu glu) {
    const int64_t slot = blockIdx.y;
    const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (r >= rows) return;
    const int64_t e = b.ids ? b.ids[slot] : ids ? ids[slot] : 0;
    const size_t i = size_t(slot) * size_t(rows) + size_t(r);
    float g = h[i], v = u[i];
    if (b.gate) g += b.gate[e * b.gate_stride + r];
    if (b.up) v += b.up[e * b.up_stride + r];
    h[i] = glu_value(glu, g, v);
}

__global__ void add_expert_bias_kernel(float* y, int64_t rows, const int32_t* __restrict__ ids,
                                       const float* __restrict__ bias, int64_t stride) {
    const int64_t slot = blockIdx.y;
    const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (r >= rows) return;
    const int64_t e = ids ? ids[slot] : 0;
    y[size_t(slot) * size_t(rows) + size_t(r)] += bias[e * stride + r];
}

__global__ void sigmoid_scale_kernel(float* rows, const float* __restrict__ g, int64_t d) {
    const float s = 1.0f / (1.0f + expf(-g[blockIdx.x]));
    float* r = rows + blockIdx.x * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) r[i] *= s;
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int64_t* __restrict__ slots,
                                   int k, int64_t d, float* __restrict__ out) {
    const float* src = x + (slots[blockIdx.x] / k) * d;
    float* dst = out + blockIdx.x * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i];
}

__global__ void scatter_weighted_kernel(const float* __restrict__ y,
                                        const int64_t* __restrict__ slots,
                                        const float* __restrict__ w, int64_t d,
                                        float* __restrict__ slot_out) {
    const float wu = w[blockIdx.x];
    const float* src = y + blockIdx.x * d;
    float* dst = slot_out + slots[blockIdx.x] * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i] * wu;
}

__global__ void sum_slots_kernel(const float* __restrict__ slot_out, int k, int64_t d,
                                 float* __restrict__ out) {
    const float* src = slot_out + blockIdx.x * int64_t(k) * d;
    float* dst = out + blockIdx.x * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        float v = src[i];
        for (int s = 1; s < k; ++s) v += src[int64_t(s) * d + i];
        dst[i] = v;
    }
}

__global__ void set_int_kernel(int32_t* dst, int32_t value) {
    *dst = value;
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t d, float eps,
              cudaStream_t s, Pdl pdl, Q8Rows q) {
    if (rows <= 0) return;
    // x is only read without an add.
    launch_rms_norm(const_cast<float*>(x), nullptr, w, y, rows, d, eps, s, pdl, q);
}

void add_rms_norm(float* h, const float* x, const float* w, float* y, int64_t rows, int64_t d,
                  float eps, cudaStream_t s, Pdl pdl, Q8Rows q) {
    if (rows <= 0) return;
    launch_rms_norm(h, x, w, y, rows, d, eps, s, pdl, q);
}

void add(float* y, const float* x, int64_t count, cudaStream_t s) {
    if (count <= 0) return;
    add_kernel<<<blocks_for(count), kThreads, 0, s>>>(y, x, count);
    STRATA_CUDA_LAUNCHED();
}

void swiglu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t s) {
    if (count <= 0) return;
    swiglu_kernel<<<blocks_for(count), kThreads, 0, s>>>(gate, up, out, count);
    STRATA_CUDA_LAUNCHED();
}

void expert_glu(float* h, const float* u, int64_t rows, int64_t slots, const int32_t* ids,
                const ExpertBiases& b, Glu glu, cudaStream_t s) {
    if (rows <= 0 || slots <= 0) return;
    const dim3 grid(unsigned((rows + kThreads - 1) / kThreads), unsigned(slots));
    expert_glu_kernel<<<grid, kThreads, 0, s>>>(h, u, rows, ids, b, glu);
    STRATA_CUDA_LAUNCHED();
}

void add_expert_bias(float* y, int64_t rows, int64_t slots, const int32_t* ids, const float* bias,
                     int64_t stride, cudaStream_t s) {
    if (rows <= 0 || slots <= 0 || !bias) return;
    const dim3 grid(unsigned((rows + kThreads - 1) / kThreads), unsigned(slots));
    add_expert_bias_kernel<<<grid, kThreads, 0, s>>>(y, rows, ids, bias, stride);
    STRATA_CUDA_LAUNCHED();
}

void sigmoid_scale(float* rows, const float* g, int64_t n, int64_t d, cudaStream_t s) {
    if (n <= 0) return;
    sigmoid_scale_kernel<<<unsigned(n), kThreads, 0, s>>>(rows, g, d);
    STRATA_CUDA_LAUNCHED();
}

void gather_rows(const float* x, const int64_t* slots, int k, int64_t m, int64_t d, float* out,
                 cudaStream_t s) {
    if (m <= 0) return;
    gather_rows_kernel<<<unsigned(m), kThreads, 0, s>>>(x, slots, k, d, out);
    STRATA_CUDA_LAUNCHED();
}

void scatter_weighted(const float* y, const int64_t* slots, const float* w, int64_t m, int64_t d,
                      float* slot_out, cudaStream_t s) {
    if (m <= 0) return;
    scatter_weighted_kernel<<<unsigned(m), kThreads, 0, s>>>(y, slots, w, d, slot_out);
    STRATA_CUDA_LAUNCHED();
}

void sum_slots(const float* slot_out, int k, int64_t n, int64_t d, float* out, cudaStream_t s) {
    if (n <= 0) return;
    sum_slots_kernel<<<unsigned(n), kThreads, 0, s>>>(slot_out, k, d, out);
    STRATA_CUDA_LAUNCHED();
}

void set_int(int32_t* dst, int32_t value, cudaStream_t s) {
    set_int_kernel<<<1, 1, 0, s>>>(dst, value);
    STRATA_CUDA_LAUNCHED();
}

}  // namespace strata::cuda
