// Rotary position embedding on the GPU, fused with the per-head q/k RMS norms and the store of
// the new keys and values into the KV cache: one launch per layer, which reads the token
// position from device memory so a captured decode graph replays it at the next position.
//
// The arithmetic is model/rope.cpp's, operation for operation: theta_i is built by the same
// repeated float multiplication theta *= base^(-2/n_rot) (a closed form pos * base^(-2i/n_rot)
// differs from it by up to ~0.01 rad at position 128k, far more than the fp32 noise of the
// rotation), then divided by the frequency factor, scaled linearly or by YaRN with every product
// rounded on its own, so the angles are bit-identical to the CPU's and only cosf/sinf (within 2
// ulp) differ. The norms sum squares in double as cpu::rms_norm_row does; F16 and Q8_0 stores
// round exactly as quant::fp32_to_fp16 and quant::quantize_row do.
#pragma once

#include <cstdint>

#include "backend/cuda/kv_cache_gpu.h"
#include "backend/tuning.h"
#include "gpu/gpu.h"
#include "model/rope.h"
#include "util/result.h"

// cudaStream_t as the CUDA runtime declares it (driver_types.h), so code built without the CUDA
// include path (the tests) can include this header.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace strata::cuda {

// What the rope kernel needs, by value; every derived constant is computed on the host by the
// same expressions as rope_angles(), so host and device agree bit for bit.
struct RopeParams {
    int n_rot = 0;
    bool neox = false;
    float theta_scale = 1.0f;  // freq_base^(-2/n_rot), by std::pow as on the CPU
    float freq_scale = 1.0f;
    float ext_factor = 0.0f;
    float corr_low = 0.0f;
    float ramp_denom = 1.0f;  // max(0.001, corr_high - corr_low)
    float mscale = 1.0f;      // attn_factor, times YaRN's magnitude correction when ext_factor != 0
    const float* freq_factors = nullptr;  // device, n_rot/2 divisors of theta, or null
    // device, n_rot/2 flags (RopeConfig::unrotated_pairs: multi-section rope's pairs that turn
    // by no angle), or null when every pair turns
    const unsigned char* unrotated = nullptr;
};

class GpuRope {
  public:
    // Uploads rc.freq_factors and rc.unrotated_pairs. Errors: an odd n_rot, or fewer factors than
    // n_rot/2.
    static Result<GpuRope> create(const RopeConfig& rc);

    const RopeConfig& config() const { return rc_; }
    const RopeParams& params() const { return params_; }

  private:
    RopeConfig rc_;
    RopeParams params_;
    gpu::DeviceBuffer freq_factors_, unrotated_;
};

// For each of the n tokens t at position p = *pos0 + t (pos0: one int32 in device memory):
//   - per-head RMS norm of q (n_head heads) and k (n_head_kv heads) when q_norm / k_norm (device,
//     head_dim_k floats) are non-null: x / sqrt(mean(x^2) + eps) * w;
//   - rotary embedding of q and k, in place;
//   - k and v (rows of n_head_kv * head_dim_k and n_head_kv * head_dim_v floats) converted to the
//     cache type and stored at position p of the layer (in slot p % slots of a sliding window's
//     ring: a batch stores no more tokens than the ring has slots, or two would share one).
// q: n rows of n_head * head_dim_k floats; k, v as above; all device memory, enqueued on s and
// launched as `pdl` says (the backend's Tuning::pdl; pdl.cuh).
// PRECONDITION: the layer is held with these head sizes; n_rot <= head_dim_k;
//               *pos0 + n <= kv.n_ctx() (a kernel past it traps: a bug, not an input error);
//               n <= the layer's slots.
void rope_store_kv(const GpuRope& rope, GpuKvCache& kv, int layer, int n_head, int n_head_kv,
                   int head_dim_k, int head_dim_v, float* q, float* k, const float* v,
                   const float* q_norm, const float* k_norm, float eps, int64_t n,
                   const int32_t* pos0, cudaStream_t s, Pdl pdl);

// A latent-attention layer's (mla.h) rope and store: for each of the n tokens at *pos0 + t, the
// last n_rot values of each query head (q: n rows of n_head * head_dim_q floats, rotated from
// `nope` on) and of the latent row (latent: n rows of `width` floats, rotated from `rank` on)
// turn in place, and the latent row is stored at position p of the layer's key plane (one head
// of `width` values). No norms.
// PRECONDITION: the layer is held as a latent layer (GpuKvCache); width <= 1024.
void mla_rope_store(const GpuRope& rope, GpuKvCache& kv, int layer, int n_head, int head_dim_q,
                    int nope, float* q, float* latent, int width, int rank, int64_t n,
                    const int32_t* pos0, cudaStream_t s, Pdl pdl);

}  // namespace strata::cuda
