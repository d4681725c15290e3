// The per-element arithmetic of the activation quantizer of matvec_q8 (Q8_0, Q8_1, Q8_K codes
// exactly as quant::quantize_row_activations makes them), as functions the device kernel
// (matvec_q8.cu) runs in parallel and the host tests run serially against the CPU's bytes.
//
// Every float operation is a separate IEEE round-to-nearest operation (the __*_rn intrinsics on
// the device, plain operators with no add to contract on the host), because a fused
// multiply-add would change codes that sit on a rounding boundary.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/device_common.cuh"

namespace strata::cuda::q8act {

// ---- Q8_0 / Q8_1 (blocks of 32; ggml's AVX2 quantize_row_q8_0 / q8_1) -------------------------
// d = amax / 127; codes nearbyint(x * (127 / amax)), or x / d where 127 / amax overflows.
struct Q8Scale {
    float d;   // before rounding to fp16
    float id;  // 127 / amax (0 when amax is 0)
    bool finite;
};
STRATA_HD Q8Scale q8_scale(float amax) {
    Q8Scale s;
    s.d = div_rn(amax, 127.0f);
    s.id = amax != 0 ? div_rn(127.0f, amax) : 0.0f;
    s.finite = is_finite(s.id);
    return s;
}
STRATA_HD int q8_code(const Q8Scale& s, float x) {
    return round_half_even(s.finite ? mul_rn(x, s.id) : div_rn(x, s.d));
}
// Q8_1's s before rounding to fp16: d * sum of the codes.
STRATA_HD float q8_1_sum(float d, int code_sum) {
    return mul_rn(d, float(code_sum));
}

// ---- Q8_K (blocks of 256; ggml's quantize_row_q8_K) ------------------------------------------
// max = the first value of largest magnitude; iscale = -127 / max; codes min(127, round-even(
// iscale * x)); d = 1 / iscale. A block of zeros: d = 0, codes 0. The caller handles amax == 0.
STRATA_HD float q8k_iscale(float max) {
    return div_rn(-127.0f, max);
}
STRATA_HD int q8k_code(float iscale, float x) {
    const int q = round_half_even(mul_rn(iscale, x));
    return q < 127 ? q : 127;
}
STRATA_HD float q8k_d(float iscale) {
    return div_rn(1.0f, iscale);
}

// Serial versions of whole blocks, built from the functions above, for the host tests (the
// device kernel splits the same steps over a warp). d and s are the floats before fp16 rounding.
STRATA_HD void quantize_q8_block(const float* x, int8_t* q, float* d, float* s) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const Q8Scale sc = q8_scale(amax);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        q[j] = int8_t(q8_code(sc, x[j]));
        sum += q[j];
    }
    *d = sc.d;
    *s = q8_1_sum(sc.d, sum);
}
STRATA_HD void quantize_q8k_block(const float* x, int8_t* q, float* d, int16_t* bsums) {
    float amax = 0, max = 0;
    for (int j = 0; j < 256; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    const float iscale = amax != 0 ? q8k_iscale(max) : 0.0f;
    for (int j = 0; j < 256; ++j) q[j] = int8_t(amax != 0 ? q8k_code(iscale, x[j]) : 0);
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += q[16 * g + l];
        bsums[g] = int16_t(sum);
    }
    *d = amax != 0 ? q8k_d(iscale) : 0.0f;
}

}  // namespace strata::cuda::q8act
