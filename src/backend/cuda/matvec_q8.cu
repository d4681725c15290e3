// matvec_q8.h: the activation quantizer kernel, the scratch layout and the dispatch over weight
// formats (their kernels: matvec_q8_k.cu, matvec_q8_32.cu).
#include "backend/cuda/matvec_q8.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matvec_q8_act.h"
#include "backend/cuda/matvec_q8_kernel.cuh"
#include "quant/quant.h"

namespace strata::cuda {

namespace {

// The activation type the CPU backend pairs with weights of type t (quant::vec_dot_type), or
// F32 when matvec_q8 does not handle t (float weights, IQ4_NL, IQ4_XS, MXFP4).
TensorType act_type_for(TensorType t) {
    switch (t) {
        case TensorType::Q4_0:
        case TensorType::Q4_1:
        case TensorType::Q5_0:
        case TensorType::Q5_1:
        case TensorType::Q8_0:
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K:
            return quant::vec_dot_type(t);
        default:
            return TensorType::F32;
    }
}

size_t align16(size_t v) {
    return (v + 15) & ~size_t(15);
}

// ---- activation quantizer -----------------------------------------------------------------------

constexpr int kQuantThreads = 256;

// Q8_0 / Q8_1: a warp per 32-element block, a lane per element (blocks of all n tokens in a row:
// warp g is token g / (cols / 32), block g % (cols / 32)).
// PRECONDITION: blockDim.x == kQuantThreads, cols a multiple of 32; `q1`: Q8_1 (s) else Q8_0 (sum).
__global__ void __launch_bounds__(kQuantThreads)
    quantize_q8_32(const float* __restrict__ x, int64_t cols, int64_t blocks, bool q1,
                   int8_t* __restrict__ codes, float2* __restrict__ ds) {
    // The matvec behind may start now (its weight loads do not depend on us; it waits for our
    // results before reading them).
    q8k::allow_dependent_launch();
    const int64_t g = (int64_t(blockIdx.x) * kQuantThreads + threadIdx.x) >> 5;
    const int lane = int(threadIdx.x) & 31;
    if (g >= blocks) return;
    const int64_t nb = cols / 32;
    const int64_t t = g / nb, b = g % nb;
    const int64_t e = t * cols + b * 32 + lane;
    const float v = x[e];
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const q8act::Q8Scale sc = q8act::q8_scale(amax);
    const int q = q8act::q8_code(sc, v);
    codes[e] = int8_t(q);
    int sum = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
        const float d = __half2float(__float2half_rn(sc.d));
        const float s = q1 ? __half2float(__float2half_rn(q8act::q8_1_sum(sc.d, sum))) : float(sum);
        ds[t * nb + b] = make_float2(d, s);
    }
}

// Q8_K: a warp per 256-element block, lane l quantizing elements 8l .. 8l + 7.
// PRECONDITION: blockDim.x == kQuantThreads, cols a multiple of 256, x 16-byte aligned.
__global__ void __launch_bounds__(kQuantThreads)
    quantize_q8_k(const float* __restrict__ x, int64_t cols, int64_t blocks,
                  int8_t* __restrict__ codes, float* __restrict__ dout,
                  int16_t* __restrict__ bsums) {
    q8k::allow_dependent_launch();
    const int64_t g = (int64_t(blockIdx.x) * kQuantThreads + threadIdx.x) >> 5;
    const int lane = int(threadIdx.x) & 31;
    if (g >= blocks) return;
    const int64_t nb = cols / 256;
    const int64_t t = g / nb, b = g % nb;
    const int64_t e = t * cols + b * 256 + 8 * lane;
    const float4 v0 = *reinterpret_cast<const float4*>(x + e);
    const float4 v1 = *reinterpret_cast<const float4*>(x + e + 4);
    const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    // The first value of largest magnitude: the lane's first, then across lanes the larger
    // magnitude, the lower index on ties.
    float mag = 0, val = 0;
    int idx = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if (fabsf(v[k]) > mag) {
            mag = fabsf(v[k]);
            val = v[k];
            idx = 8 * lane + k;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float omag = __shfl_xor_sync(0xffffffffu, mag, o);
        const float oval = __shfl_xor_sync(0xffffffffu, val, o);
        const int oidx = __shfl_xor_sync(0xffffffffu, idx, o);
        if (omag > mag || (omag == mag && oidx < idx)) {
            mag = omag;
            val = oval;
            idx = oidx;
        }
    }
    const float iscale = mag != 0 ? q8act::q8k_iscale(val) : 0.0f;
    uint32_t w[2] = {0, 0};
    int sum = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const int q = mag != 0 ? q8act::q8k_code(iscale, v[k]) : 0;
        sum += q;
        w[k / 4] |= uint32_t(uint8_t(int8_t(q))) << (8 * (k % 4));
    }
    *reinterpret_cast<uint2*>(codes + e) = make_uint2(w[0], w[1]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // lanes 2j, 2j + 1: the 16 codes of group j
    if ((lane & 1) == 0) bsums[t * (cols / 16) + b * 16 + lane / 2] = int16_t(sum);
    if (lane == 0) dout[t * nb + b] = mag != 0 ? q8act::q8k_d(iscale) : 0.0f;
}

}  // namespace

namespace q8k {

bool device_has_pdl() {
    static const bool has = [] {
        int dev = 0, major = 0;
        STRATA_CUDA(cudaGetDevice(&dev));
        STRATA_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        return major >= 9;
    }();
    return has;
}

}  // namespace q8k

namespace q8detail {

ScratchLayout scratch_layout(TensorType act_type, int64_t cols, int n) {
    ScratchLayout l;
    l.codes = 0;
    l.scales = align16(size_t(n) * size_t(cols));
    if (act_type == TensorType::Q8_K) {
        l.bsums = align16(l.scales + size_t(n) * size_t(cols / 256) * sizeof(float));
        l.end = align16(l.bsums + size_t(n) * size_t(cols / 16) * sizeof(int16_t));
    } else {
        l.bsums = l.scales;
        l.end = align16(l.scales + size_t(n) * size_t(cols / 32) * sizeof(float2));
    }
    return l;
}

ScratchView scratch_view(TensorType act_type, int64_t cols, int n, const void* scratch) {
    const ScratchLayout l = scratch_layout(act_type, cols, n);
    const auto* base = static_cast<const uint8_t*>(scratch);
    return {reinterpret_cast<const int8_t*>(base + l.codes),
            reinterpret_cast<const float2*>(base + l.scales),
            reinterpret_cast<const float*>(base + l.scales),
            reinterpret_cast<const int16_t*>(base + l.bsums)};
}

void launch_quantize_activations(TensorType act_type, const float* x, int n, int64_t cols,
                                 void* scratch, cudaStream_t stream) {
    const ScratchLayout l = scratch_layout(act_type, cols, n);
    auto* base = static_cast<uint8_t*>(scratch);
    auto* codes = reinterpret_cast<int8_t*>(base + l.codes);
    const int64_t qk = act_type == TensorType::Q8_K ? 256 : 32;
    const int64_t blocks = int64_t(n) * (cols / qk);
    const unsigned grid = unsigned((blocks * 32 + kQuantThreads - 1) / kQuantThreads);
    if (act_type == TensorType::Q8_K) {
        quantize_q8_k<<<grid, kQuantThreads, 0, stream>>>(
            x, cols, blocks, codes, reinterpret_cast<float*>(base + l.scales),
            reinterpret_cast<int16_t*>(base + l.bsums));
    } else {
        quantize_q8_32<<<grid, kQuantThreads, 0, stream>>>(
            x, cols, blocks, act_type == TensorType::Q8_1, codes,
            reinterpret_cast<float2*>(base + l.scales));
    }
    STRATA_CUDA_LAUNCHED();
}

}  // namespace q8detail

bool matvec_q8_supports(TensorType t) {
    return act_type_for(t) != TensorType::F32;
}

size_t matvec_q8_scratch_bytes(int64_t max_cols, int max_tokens) {
    const int64_t c = (max_cols + 255) / 256 * 256;
    const int n = max_tokens > kMaxQ8Tokens ? max_tokens : kMaxQ8Tokens;
    const size_t a = q8detail::scratch_layout(TensorType::Q8_0, c, n).end;
    const size_t b = q8detail::scratch_layout(TensorType::Q8_K, c, n).end;
    return a > b ? a : b;
}

TensorType matvec_q8_act_type(TensorType t) {
    return act_type_for(t);
}

void launch_quantize_for(TensorType weight, const float* x, int n, int64_t cols, void* scratch,
                         cudaStream_t stream) {
    q8detail::launch_quantize_activations(act_type_for(weight), x, n, cols, scratch, stream);
}

namespace {

// The kernel arguments of weights w on activations of n tokens quantized into the scratch.
q8k::Args args_for(const WeightRows& w, int n, const float* bias, float* y, const void* scratch) {
    const q8detail::ScratchView v =
        q8detail::scratch_view(act_type_for(w.type), w.cols, n, scratch);
    q8k::Args a;
    a.w = w.data;
    a.stride = w.row_stride;
    a.rows = w.rows;
    a.cols = w.cols;
    a.act.codes = v.codes;
    a.act.ds = v.ds;
    a.act.d = v.d;
    a.act.bsums = v.bsums;
    a.act.cols = w.cols;
    a.bias = bias;
    a.y = y;
    return a;
}

void launch_args(TensorType t, const q8k::Args& a, int n, cudaStream_t stream) {
    if (act_type_for(t) == TensorType::Q8_K) {
        q8k::launch_k(t, a, n, stream);
    } else {
        q8k::launch_32(t, a, n, stream);
    }
}

}  // namespace

void launch_matvec_q8_quantized(const WeightRows& w, int n, const float* bias, float* y,
                                const void* scratch, cudaStream_t stream) {
    launch_args(w.type, args_for(w, n, bias, y, scratch), n, stream);
}

bool launch_matvec_q8_parts(std::span<const WeightRows> w, int n,
                            std::span<const float* const> biases, std::span<float* const> ys,
                            const void* scratch, cudaStream_t stream) {
    static const bool enabled = [] {
        const char* v = std::getenv("STRATA_QKV_PARTS");
        return !(v && v[0] == '0');
    }();
    if (!enabled) return false;
    static_assert(kMaxQ8Parts == q8k::Args::kMaxParts);
    q8k::Args a = args_for(w[0], n, biases[0], ys[0], scratch);
    a.rows = 0;
    for (size_t i = 0; i < w.size(); ++i) {
        a.parts[i] = {w[i].data, w[i].row_stride, ys[i], biases[i], w[i].rows};
        a.rows += w[i].rows;
    }
    a.n_parts = int(w.size());
    launch_args(w[0].type, a, n, stream);
    return true;
}

void launch_swiglu_q8(const WeightRows& gate, const WeightRows& up, float* y, const void* scratch,
                      cudaStream_t stream) {
    q8k::Args a = args_for(gate, 1, nullptr, y, scratch);
    a.w2 = up.data;
    a.stride2 = up.row_stride;
    launch_args(gate.type, a, 1, stream);
}

void launch_expert_ffn_q8(const WeightRows& gate, size_t gate_stride, const WeightRows& up,
                          size_t up_stride, const WeightRows& down, size_t down_stride,
                          const int32_t* ids, int slots, const float* x, bool x_per_slot, float* h,
                          float* y, void* scratch, cudaStream_t stream) {
    const int nx = x_per_slot ? slots : 1;
    launch_quantize_for(gate.type, x, nx, gate.cols, scratch, stream);
    q8k::Args a = args_for(gate, nx, nullptr, h, scratch);
    a.w2 = up.data;
    a.stride2 = up.row_stride;
    a.ids = ids;
    a.expert_stride = gate_stride;
    a.expert_stride2 = up_stride;
    a.y_slot_stride = gate.rows;
    a.slots = slots;
    a.act_per_slot = x_per_slot;
    launch_args(gate.type, a, 1, stream);

    launch_quantize_for(down.type, h, slots, down.cols, scratch, stream);
    // Slot s's activations are token s of the rows just quantized.
    q8k::Args b = args_for(down, slots, nullptr, y, scratch);
    b.ids = ids;
    b.expert_stride = down_stride;
    b.y_slot_stride = down.rows;
    b.slots = slots;
    b.act_per_slot = true;
    launch_args(down.type, b, 1, stream);
}

void launch_matvec_q8(const WeightRows& w, const float* x, int n, const float* bias, float* y,
                      void* scratch, cudaStream_t stream) {
    launch_quantize_for(w.type, x, n, w.cols, scratch, stream);
    launch_matvec_q8_quantized(w, n, bias, y, scratch, stream);
}

}  // namespace strata::cuda
