#include "backend/cpu/ops.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/matmul.h"
#include "quant/quant.h"

namespace strata::cpu {

void rms_norm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                   ThreadPool& pool) {
    if (rows * n < (1 << 16)) {
        for (int64_t r = 0; r < rows; ++r) rms_norm_row(x + r * n, w, y + r * n, n, eps);
        return;
    }
    pool.parallel_for(rows, 4, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) rms_norm_row(x + r * n, w, y + r * n, n, eps);
    });
}

void add_into(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void axpy(float* y, float a, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float silu(float x) {
    return x / (1.0f + std::exp(-x));
}
float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}

void swiglu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool) {
    constexpr int64_t kPerTask = 1 << 15;  // a few microseconds
    if (n <= kPerTask) {
        swiglu(gate, up, out, n);
        return;
    }
    pool.parallel_for(n, kPerTask,
                      [&](int64_t b, int64_t e, int) { swiglu(gate + b, up + b, out + b, e - b); });
}

namespace {

// e^x for x <= 0, within 2 ulp of the exact value (for the x given; the rounding of x itself
// scales the error by |x|), in branch-free float arithmetic that the compiler vectorizes (the
// softmax of attention calls it for every score; libm's expf is a call per element).
// e^x = 2^k e^r with k = round(x / ln 2) and r = x - k ln 2, |r| <= ln 2 / 2; ln 2 is split in
// two so that k * kLn2High is exact; e^r is its Taylor series to r^7 (truncation below 1e-8
// relative). Where 2^k would be subnormal (x below about -87.3, and -inf) the result is 0.
inline float exp_nonpositive(float x) {
    constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23: x + it rounds x to an integer
    constexpr float kLn2High = 0.693145751953125f;
    constexpr float kLn2Low = 1.42860676533018e-6f;
    const float xc = std::max(x, -104.0f);  // k >= -150: 2^k below still gives 0
    const float k = (xc * 1.44269504088896f + kRoundShift) - kRoundShift;
    const float r = (xc - k * kLn2High) - k * kLn2Low;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t biased = std::max(static_cast<int32_t>(k) + 127, 0);  // 0: 2^k taken as 0
    return p * std::bit_cast<float>(biased << 23);
}

}  // namespace

// silu(g) = g / (1 + e^-g), with e^-|g| from exp_nonpositive and g's sign applied by a select
// (for g < 0 the same value is g e^g / (1 + e^g)): branch-free, so the loop vectorizes. libm's
// expf, a call per element, cost a decode step's experts about 3 ns an element.
__attribute__((target_clones("avx512f", "avx2", "default"))) void swiglu(const float* gate,
                                                                         const float* up,
                                                                         float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        const float e = exp_nonpositive(-std::fabs(g));
        const float top = g >= 0.0f ? g : g * e;
        out[i] = top / (1.0f + e) * up[i];
    }
}

// Compiled for AVX-512, AVX2 and the baseline, picked by the CPU at load time; every operation
// is the same in each (no contraction into FMA, fixed lanes: CMakeLists.txt), so the weights are
// the same bits on every path.
__attribute__((target_clones("avx512f", "avx2", "default"))) void swiglu_oai(
    const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit);
        const float u = std::clamp(up[i], -limit, limit);
        // sigmoid(a g) = 1 / (1 + e^-ag), through e^-|ag| so the exponential never overflows.
        const float e = exp_nonpositive(-std::fabs(alpha * g));
        const float sig = alpha * g >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
        out[i] = g * sig * (u + 1.0f);
    }
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit,
                ThreadPool& pool) {
    constexpr int64_t kPerTask = 1 << 15;
    if (n <= kPerTask) return swiglu_oai(gate, up, out, n, alpha, limit);
    pool.parallel_for(n, kPerTask, [&](int64_t b, int64_t e, int) {
        swiglu_oai(gate + b, up + b, out + b, e - b, alpha, limit);
    });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void softmax(float* x, int64_t n,
                                                                          float sink) {
    // Eight lanes for the maximum and the sum, so that neither is one long dependency chain and
    // both vectorize; the tail goes through the same lanes.
    constexpr int kLanes = 8;
    float lane_max[kLanes];
    std::fill(lane_max, lane_max + kLanes, -std::numeric_limits<float>::infinity());
    const int64_t whole = n / kLanes * kLanes;
    for (int64_t i = 0; i < whole; i += kLanes) {
        for (int l = 0; l < kLanes; ++l)
            lane_max[l] = x[i + l] > lane_max[l] ? x[i + l] : lane_max[l];
    }
    for (int64_t i = whole; i < n; ++i) {
        float& m = lane_max[i - whole];
        m = x[i] > m ? x[i] : m;
    }
    float max = lane_max[0];
    for (int l = 1; l < kLanes; ++l) max = std::max(max, lane_max[l]);
    max = std::max(max, sink);
    for (int64_t i = 0; i < n; ++i) x[i] = exp_nonpositive(x[i] - max);
    double lane_sum[kLanes] = {};
    for (int64_t i = 0; i < whole; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) lane_sum[l] += double(x[i + l]);
    }
    for (int64_t i = whole; i < n; ++i) lane_sum[i - whole] += double(x[i]);
    // No sink (-inf) adds an exact 0: the same bits as a softmax without one.
    const double sum = ((lane_sum[0] + lane_sum[1]) + (lane_sum[2] + lane_sum[3])) +
                       ((lane_sum[4] + lane_sum[5]) + (lane_sum[6] + lane_sum[7])) +
                       double(exp_nonpositive(sink - max));
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

cpu::QuantMatrix quant_matrix(const TensorView& W) {
    cpu::QuantMatrix m;
    m.type = W.type;
    m.data = W.data;
    m.cols = W.ne[0];
    m.rows = W.rows();
    m.row_stride = W.row_bytes;
    return m;
}

namespace {
void add_bias(const TensorView* bias, float* Y, int64_t rows, int64_t n) {
    if (!bias || !bias->present()) return;
    for (int64_t t = 0; t < n; ++t) add_into(Y + t * rows, bias->f32(), rows);
}
}  // namespace

void linear_multi(std::span<const LinearOut> outs, const float* X, int64_t n, ThreadPool& pool) {
    cpu::QuantMatrix ms[4];
    float* ys[4];
    assert(outs.size() <= 4);
    for (size_t i = 0; i < outs.size(); ++i) {
        ms[i] = quant_matrix(*outs[i].W);
        ys[i] = outs[i].Y;
    }
    cpu::matmul_multi({ms, outs.size()}, X, {ys, outs.size()}, n, pool);
    for (const LinearOut& o : outs) add_bias(o.bias, o.Y, o.W->rows(), n);
}

void linear(const TensorView& W, const TensorView* bias, const float* X, float* Y, int64_t n,
            ThreadPool& pool) {
    const cpu::QuantMatrix m = quant_matrix(W);
    if (n == 1) {
        cpu::matvec(m, X, Y, pool);
    } else {
        cpu::matmul(m, X, Y, n, pool);
    }
    add_bias(bias, Y, m.rows, n);
}

void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                const float* x, int64_t n, float* out, FfnBuffers& buf, ThreadPool& pool) {
    const int64_t n_ff = gate.rows();
    buf.gate.resize(size_t(n * n_ff));
    buf.up.resize(size_t(n * n_ff));
    const LinearOut gate_up[] = {{&gate, nullptr, buf.gate.data()}, {&up, nullptr, buf.up.data()}};
    linear_multi(gate_up, x, n, pool);
    swiglu(buf.gate.data(), buf.up.data(), buf.gate.data(), n * n_ff, pool);
    linear(down, nullptr, buf.gate.data(), out, n, pool);
}

void FfnBuffers::reserve(int64_t rows, int64_t width) {
    gate.reserve(size_t(rows * width));
    up.reserve(size_t(rows * width));
}

void embedding_row(const TensorView& table, int32_t token, float* out) {
    assert(token >= 0 && token < table.rows());
    quant::dequantize_row(table.type, table.data + static_cast<size_t>(token) * table.row_bytes,
                          out, table.ne[0]);
}

}  // namespace strata::cpu
