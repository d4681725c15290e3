// Rope, q/k norms and the KV store: one block per (token, head job).
#include "backend/cuda/rope_kv.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cuda/block_sum.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"

namespace strata::cuda {

namespace {

// One thread per element of a head; a latent-attention row (mla_rope_store) is the widest.
constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / 32;

// cos and sin of rotation pair i at position pos, as rope_angles computes them. Every
// operation is an explicitly rounded one, so nvcc cannot contract a product and a sum into an
// FMA the CPU does not do.
__device__ void rope_angle(const RopeParams& rp, int i, int pos, float* c, float* s) {
    float theta = float(pos);
    for (int j = 0; j < i; ++j) theta = __fmul_rn(theta, rp.theta_scale);
    const float ff = rp.freq_factors ? rp.freq_factors[i] : 1.0f;
    // A pair of multi-section rope's position-0 section turns by no angle (as rope_angles).
    const bool still = rp.unrotated && rp.unrotated[i];
    const float extrap = __fdiv_rn(still ? 0.0f : theta, ff);
    const float interp = __fmul_rn(rp.freq_scale, extrap);
    float t = interp;
    if (rp.ext_factor != 0.0f) {
        const float y = __fdiv_rn(__fsub_rn(float(i), rp.corr_low), rp.ramp_denom);
        const float ramp = __fmul_rn(__fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y))), rp.ext_factor);
        t = __fadd_rn(__fmul_rn(interp, __fsub_rn(1.0f, ramp)), __fmul_rn(extrap, ramp));
    }
    float sv, cv;
    sincosf(t, &sv, &cv);  // full-range reduction: t reaches ~1e5 at long contexts
    *c = __fmul_rn(cv, rp.mscale);
    *s = __fmul_rn(sv, rp.mscale);
}

struct RopeJob {
    RopeParams rope;
    GpuKvLayer layer;
    int n_ctx;  // the context: positions beyond it are a bug
    bool q8;    // the cache is Q8_0 (else F16)
    int n_head, n_head_kv, hd_q, hd_k, hd_v;
    // The rotated dimensions of each query and key head start here (latent attention rotates
    // the last n_rot of each, and its grid has no value jobs: a latent row is key and value).
    int rot_q = 0, rot_k = 0;
    float* q;        // [n][n_head][hd_q]
    float* k;        // [n][n_head_kv][hd_k]
    const float* v;  // [n][n_head_kv][hd_v]
    const float* q_norm;
    const float* k_norm;  // [hd_k] each, or null
    float eps;
};

// Stores one head row (hd elements, x[e] held by thread e) at position p of a cache plane of
// `slots` positions per head (slot p % slots: a sliding window's ring, or p itself).
// PRECONDITION: hd is a multiple of 32 for Q8_0; blockDim.x >= hd.
__device__ void store_row(const GpuKvPlane& plane, bool q8, int head, int slots, int p, float x) {
    const int e = int(threadIdx.x);
    const int hd = plane.head_dim;
    const size_t row = size_t(head) * size_t(slots) + size_t(p % slots);
    if (!q8) {
        if (e < hd) reinterpret_cast<__half*>(plane.data)[row * hd + e] = __float2half_rn(x);
        return;
    }
    // Q8_0 as quant::quantize_row: d = amax / 127, codes round(x * (1/d)) half away from zero.
    // One warp per 32-element block; the condition is uniform across the warp.
    if ((e & ~31) >= hd) return;
    float amax = fabsf(x);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const float scaled = isfinite(id) ? __fmul_rn(x, id) : __fdiv_rn(x, d);
    auto* codes = reinterpret_cast<int8_t*>(plane.data);
    codes[row * hd + e] = int8_t(roundf(scaled));
    if ((e & 31) == 0) {
        plane.scales[row * (hd / 32) + e / 32] = __half_as_ushort(__float2half_rn(d));
    }
}

// grid: (n tokens, n_head + 2 * n_head_kv jobs, or n_head + 1 for a latent row); block:
// round_up(max(hd_q, hd_k, hd_v), 32) threads.
// Job j < n_head: query head j (norm, rope); then key heads (norm, rope, store); then value
// heads (store).
// PRECONDITION: hd_q, hd_k, hd_v <= kMaxThreads; rotated dimensions within each head;
//               *pos0 + n <= n_ctx.
// Launched with launch_pdl.
__global__ void rope_store_kernel(RopeJob J, const int32_t* pos0) {
    pdl_trigger();
    pdl_wait();
    __shared__ float x[kMaxThreads];
    __shared__ double red[kMaxWarps];
    const int t = int(blockIdx.x);
    const int job = int(blockIdx.y);
    const int e = int(threadIdx.x);
    const int p = *pos0 + t;
    if (p < 0 || p >= J.n_ctx) __trap();  // the engine checks the context first: a bug

    enum { Query, Key, Value } kind;
    int head;
    float* row = nullptr;
    const float* src;
    const float* norm = nullptr;
    int hd = J.hd_k, rot = J.rot_k;
    if (job < J.n_head) {
        kind = Query;
        head = job;
        hd = J.hd_q;
        rot = J.rot_q;
        row = J.q + (size_t(t) * J.n_head + head) * J.hd_q;
        norm = J.q_norm;
        src = row;
    } else if (job < J.n_head + J.n_head_kv) {
        kind = Key;
        head = job - J.n_head;
        row = J.k + (size_t(t) * J.n_head_kv + head) * J.hd_k;
        norm = J.k_norm;
        src = row;
    } else {
        kind = Value;
        head = job - J.n_head - J.n_head_kv;
        hd = J.hd_v;
        src = J.v + (size_t(t) * J.n_head_kv + head) * J.hd_v;
    }

    float val = e < hd ? src[e] : 0.0f;
    if (norm) {
        // cpu::rms_norm_row: squares summed in double, scale = 1 / sqrtf(mean + eps).
        const double sq = e < hd ? double(val) * double(val) : 0.0;
        const double sum = block_sum(sq, red);
        const float mean = float(sum / double(hd));
        const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, J.eps)));
        if (e < hd) val = __fmul_rn(__fmul_rn(val, scale), norm[e]);
    }
    if (kind != Value && J.rope.n_rot > 0) {
        if (e < hd) x[e] = val;
        __syncthreads();
        const int half = J.rope.n_rot / 2;
        for (int i = e; i < half; i += int(blockDim.x)) {
            float c, s;
            rope_angle(J.rope, i, p, &c, &s);
            // normal: dimensions 2i and 2i+1; NEOX: i and i + n_rot/2 (rope_apply)
            const int a = rot + (J.rope.neox ? i : 2 * i);
            const int b = rot + (J.rope.neox ? i + half : 2 * i + 1);
            const float x0 = x[a], x1 = x[b];
            x[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
            x[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
        }
        __syncthreads();
        if (e < hd) val = x[e];
    }
    if (row && e < hd) row[e] = val;
    if (kind == Key) store_row(J.layer.k, J.q8, head, J.layer.slots, p, val);
    if (kind == Value) store_row(J.layer.v, J.q8, head, J.layer.slots, p, val);
}

}  // namespace

Result<GpuRope> GpuRope::create(const RopeConfig& rc) {
    if (rc.n_rot < 0 || rc.n_rot % 2 != 0 || rc.n_rot > kGpuMaxHeadDim) {
        return err("rope: the rotated dimension count must be even and at most ",
                   std::to_string(kGpuMaxHeadDim), " (it is ", std::to_string(rc.n_rot), ")");
    }
    const size_t half = size_t(rc.n_rot / 2);
    if (!rc.freq_factors.empty() && rc.freq_factors.size() < half) {
        return err("rope: ", std::to_string(rc.freq_factors.size()), " frequency factors for ",
                   std::to_string(half), " rotation pairs");
    }
    GpuRope g;
    g.rc_ = rc;
    RopeParams& p = g.params_;
    p.n_rot = rc.n_rot;
    p.neox = rc.style == RopeStyle::Neox;
    // The same expressions as rope_angles(), evaluated on the host so the values are its own.
    p.theta_scale =
        rc.n_rot > 0 ? std::pow(rc.freq_base, -2.0f / static_cast<float>(rc.n_rot)) : 1.0f;
    p.freq_scale = rc.freq_scale;
    p.ext_factor = rc.ext_factor;
    p.corr_low = rc.corr_low;
    p.ramp_denom = std::max(0.001f, rc.corr_high - rc.corr_low);
    p.mscale = rc.attn_factor;
    if (rc.ext_factor != 0.0f) p.mscale *= 1.0f + 0.1f * std::log(1.0f / rc.freq_scale);
    if (!rc.freq_factors.empty() && half > 0) {
        STRATA_ASSIGN(g.freq_factors_, gpu::DeviceBuffer::allocate(half * sizeof(float)));
        STRATA_TRY(gpu::copy(g.freq_factors_.data(), rc.freq_factors.data(), half * sizeof(float),
                             gpu::CopyKind::HostToDevice));
        p.freq_factors = reinterpret_cast<const float*>(g.freq_factors_.data());
    }
    if (!rc.unrotated_pairs.empty() && half > 0) {
        if (rc.unrotated_pairs.size() < half) {
            return err("rope: ", std::to_string(rc.unrotated_pairs.size()), " section flags for ",
                       std::to_string(half), " rotation pairs");
        }
        std::vector<unsigned char> flags(half);
        for (size_t i = 0; i < half; ++i) flags[i] = rc.unrotated_pairs[i] ? 1 : 0;
        STRATA_ASSIGN(g.unrotated_, gpu::DeviceBuffer::allocate(half));
        STRATA_TRY(gpu::copy(g.unrotated_.data(), flags.data(), half, gpu::CopyKind::HostToDevice));
        p.unrotated = reinterpret_cast<const unsigned char*>(g.unrotated_.data());
    }
    // (nvcc's front end does not apply C++20's implicit move to a converting return)
    return Result<GpuRope>(std::move(g));
}

void rope_store_kv(const GpuRope& rope, GpuKvCache& kv, int layer, int n_head, int n_head_kv,
                   int head_dim_k, int head_dim_v, float* q, float* k, const float* v,
                   const float* q_norm, const float* k_norm, float eps, int64_t n,
                   const int32_t* pos0, cudaStream_t s, Pdl pdl) {
    if (n <= 0) return;
    const GpuKvLayer& L = kv.layer(layer);
    RopeJob J;
    J.rope = rope.params();
    J.layer = L;
    J.n_ctx = int(kv.n_ctx());
    J.q8 = kv.type() == KvType::Q8_0;
    J.n_head = n_head;
    J.n_head_kv = n_head_kv;
    J.hd_q = head_dim_k;
    J.hd_k = head_dim_k;
    J.hd_v = head_dim_v;
    J.q = q;
    J.k = k;
    J.v = v;
    J.q_norm = q_norm;
    J.k_norm = k_norm;
    J.eps = eps;
    const int threads = (std::max(head_dim_k, head_dim_v) + 31) / 32 * 32;
    const dim3 grid(unsigned(n), unsigned(n_head + 2 * n_head_kv));
    launch_pdl(pdl, rope_store_kernel, grid, dim3(unsigned(threads)), 0, s, J, pos0);
}

void mla_rope_store(const GpuRope& rope, GpuKvCache& kv, int layer, int n_head, int head_dim_q,
                    int nope, float* q, float* latent, int width, int rank, int64_t n,
                    const int32_t* pos0, cudaStream_t s, Pdl pdl) {
    if (n <= 0) return;
    RopeJob J{};
    J.rope = rope.params();
    J.layer = kv.layer(layer);
    J.n_ctx = int(kv.n_ctx());
    J.q8 = kv.type() == KvType::Q8_0;
    J.n_head = n_head;
    J.n_head_kv = 1;
    J.hd_q = head_dim_q;
    J.hd_k = width;
    J.hd_v = 0;
    J.rot_q = nope;
    J.rot_k = rank;
    J.q = q;
    J.k = latent;
    const int threads = (std::max(head_dim_q, width) + 31) / 32 * 32;
    const dim3 grid(unsigned(n), unsigned(n_head + 1));
    launch_pdl(pdl, rope_store_kernel, grid, dim3(unsigned(threads)), 0, s, J, pos0);
}

}  // namespace strata::cuda
