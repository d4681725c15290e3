// The 32-element formats with a linear grid: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//
// The quantizers follow the reference engine's rounding rules exactly, so that quantizing a
// float tensor gives the bytes llama-quantize writes:
//   Q4_0 / Q5_0: d = (value of largest magnitude) / -8 (-16), so that value lands on the code
//                with the longer half of the grid; codes are trunc(x / d + 8.5) (16.5), capped;
//   Q4_1 / Q5_1: d = (max - min) / 15 (31), m = min, codes trunc((x - min) / d + 0.5), capped;
//   Q8_0 / Q8_1: d = amax / 127, codes roundf(x / d) (half away from zero), computed as
//                x * (1 / d).
// In every case the quotient uses the float d before it is rounded to fp16 for storage.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/float_formats.h"
#include "quant/reference.h"

#include "quant/strict_fp.h"

namespace strata::quant::ref {

namespace {

// The 32 fifth bits of a Q5 block, bit j for element j.
uint32_t load_qh(const uint8_t* qh) {
    uint32_t v;
    std::memcpy(&v, qh, sizeof v);
    return v;
}
void store_qh(uint8_t* qh, uint32_t v) {
    std::memcpy(qh, &v, sizeof v);
}

// Signed value of largest magnitude (the first one on ties) and its magnitude.
struct SignedMax {
    float value = 0;
    float magnitude = 0;
};
SignedMax signed_max(const float* x, int n) {
    SignedMax m;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > m.magnitude) {
            m.magnitude = std::fabs(x[j]);
            m.value = x[j];
        }
    }
    return m;
}

struct MinMax {
    float min = std::numeric_limits<float>::max();
    float max = -std::numeric_limits<float>::max();
};
MinMax min_max(const float* x, int n) {
    MinMax r;
    for (int j = 0; j < n; ++j) {
        r.min = std::min(r.min, x[j]);
        r.max = std::max(r.max, x[j]);
    }
    return r;
}

// Multiplication by 1 / d, as the reference computes x / d. When 1 / d overflows (|d| < 2^-128:
// a block of values near the bottom of the float range) the reference has no defined result;
// a true division keeps the codes in range there.
class InverseScale {
  public:
    explicit InverseScale(float d, float id) : d_(d), id_(id), finite_(std::isfinite(id)) {}
    explicit InverseScale(float d) : InverseScale(d, d != 0 ? 1.0f / d : 0.0f) {}
    float operator()(float x) const { return finite_ ? x * id_ : x / d_; }

  private:
    float d_, id_;
    bool finite_;
};

float abs_max(const float* x, int n) {
    float amax = 0;
    for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
}

// Shared by Q4_0 and Q5_0: the codes of one block with `levels` codes (16 or 32), offset
// levels / 2. Returns the float scale.
float quantize_symmetric(const float* x, int levels, uint8_t* q) {
    const float half = float(levels / 2);
    const float d = signed_max(x, kQK).value / -half;
    const InverseScale scaled(d);
    for (int j = 0; j < kQK; ++j) {
        q[j] = uint8_t(std::min(levels - 1, int(scaled(x[j]) + (half + 0.5f))));
    }
    return d;
}

// Shared by Q4_1 and Q5_1. Returns {d, min}.
MinMax quantize_affine(const float* x, int levels, uint8_t* q, float* d_out) {
    const MinMax mm = min_max(x, kQK);
    const float d = (mm.max - mm.min) / float(levels - 1);
    const InverseScale scaled(d);
    for (int j = 0; j < kQK; ++j) {
        q[j] = uint8_t(std::min(levels - 1, int(scaled(x[j] - mm.min) + 0.5f)));
    }
    *d_out = d;
    return mm;
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
    for (int j = 0; j < kQK / 2; ++j) {
        qs[j] = uint8_t((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
    }
}

uint32_t fifth_bits(const uint8_t* q) {
    uint32_t qh = 0;
    for (int j = 0; j < kQK; ++j) qh |= uint32_t((q[j] >> 4) & 1) << j;
    return qh;
}

}  // namespace

// ---- dequantization ---------------------------------------------------------------------------

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = float((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + kQK / 2] = float((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = float(x[i].qs[j] & 0x0f) * d + m;
            y[j + kQK / 2] = float(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = (x[i].qs[j] & 0x0f) | int(((qh >> j) & 1) << 4);
            const int hi = (x[i].qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
            y[j] = float(lo - 16) * d;
            y[j + kQK / 2] = float(hi - 16) * d;
        }
    }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = (x[i].qs[j] & 0x0f) | int(((qh >> j) & 1) << 4);
            const int hi = (x[i].qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
            y[j] = float(lo) * d + m;
            y[j + kQK / 2] = float(hi) * d + m;
        }
    }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
    }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
    }
}

// ---- quantization (file formats) --------------------------------------------------------------

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
    uint8_t q[kQK];
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        y[i].d = fp32_to_fp16(quantize_symmetric(x, 16, q));
        pack_nibbles(q, y[i].qs);
    }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
    uint8_t q[kQK];
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        y[i].d = fp32_to_fp16(quantize_symmetric(x, 32, q));
        pack_nibbles(q, y[i].qs);
        store_qh(y[i].qh, fifth_bits(q));
    }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
    uint8_t q[kQK];
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        float d;
        const MinMax mm = quantize_affine(x, 16, q, &d);
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mm.min);
        pack_nibbles(q, y[i].qs);
    }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
    uint8_t q[kQK];
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        float d;
        const MinMax mm = quantize_affine(x, 32, q, &d);
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mm.min);
        pack_nibbles(q, y[i].qs);
        store_qh(y[i].qh, fifth_bits(q));
    }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        const float d = abs_max(x, kQK) / 127.0f;
        const InverseScale scaled(d);
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(std::round(scaled(x[j])));
    }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        const float d = abs_max(x, kQK) / 127.0f;
        const InverseScale scaled(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = int8_t(std::round(scaled(x[j])));
            sum += y[i].qs[j];
        }
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(float(sum) * d);
    }
}

// ---- quantization (activations, as the x86 CPU backend does it) ------------------------------
//
// ggml's AVX2 quantize_row_q8_0 / q8_1 take id = 127 / amax directly and round with
// _mm256_round_ps(_MM_ROUND_NEAREST), i.e. half to even. The results differ from the file
// quantizers above only in rare codes (ties, and x * id landing on the other side of a half
// because 127 / amax and 1 / (amax / 127) differ in the last bit): about 4 codes per million on
// Gaussian data, more where values sit on halves.

namespace {
// One Q8 activation block: codes into q, returns d; sum of the codes into *sum.
float quantize_q8_activation_block(const float* x, int8_t* q, int* sum) {
    const float amax = abs_max(x, kQK);
    const float d = amax / 127.0f;
    const InverseScale scaled(d, amax != 0 ? 127.0f / amax : 0.0f);
    int s = 0;
    for (int j = 0; j < kQK; ++j) {
        q[j] = int8_t(std::nearbyint(scaled(x[j])));  // default rounding mode: half to even
        s += q[j];
    }
    *sum = s;
    return d;
}
}  // namespace

void quantize_q8_0_activations(const float* x, BlockQ8_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        int sum;
        y[i].d = fp32_to_fp16(quantize_q8_activation_block(x, y[i].qs, &sum));
    }
}

void quantize_q8_1_activations(const float* x, BlockQ8_1* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK) {
        int sum;
        const float d = quantize_q8_activation_block(x, y[i].qs, &sum);
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(d * float(sum));
    }
}

}  // namespace strata::quant::ref
