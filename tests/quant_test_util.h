// Helpers shared by the quant_*_test.cpp files: whole-row conversions into owning buffers, error
// statistics, and random test data with the distributions the round-trip tests use.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/quant.h"

namespace strata::test {

// Bytes of a quantized row; 8-byte aligned storage so any block struct can live in it.
class QuantBuffer {
  public:
    QuantBuffer() = default;
    explicit QuantBuffer(size_t bytes) : words_((bytes + 7) / 8), bytes_(bytes) {}
    void* data() { return words_.data(); }
    const void* data() const { return words_.data(); }
    const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
    uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }
    size_t size() const { return bytes_; }

  private:
    std::vector<uint64_t> words_;
    size_t bytes_ = 0;
};

inline QuantBuffer quantize(TensorType t, const std::vector<float>& x) {
    QuantBuffer q(quant::quant_row_bytes(t, int64_t(x.size())).value());
    quant::quantize_row(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}

inline std::vector<float> dequantize(TensorType t, const void* bytes, int64_t n) {
    std::vector<float> y(size_t(n), std::nanf(""));
    quant::dequantize_row(t, bytes, y.data(), n);
    return y;
}
inline std::vector<float> dequantize(TensorType t, const QuantBuffer& q, int64_t n) {
    return dequantize(t, q.data(), n);
}

inline int block_size(TensorType t) {
    return int(tensor_type_info(t)->block_size);
}
inline int block_bytes(TensorType t) {
    return int(tensor_type_info(t)->type_size);
}

// Sum of squared errors against a reference, and of the reference's squares.
struct ErrorStats {
    double sum_sq_err = 0;
    double sum_sq_ref = 0;
    double max_abs_err = 0;
    uint64_t n = 0;

    void add(const float* ref, const float* got, size_t count) {
        for (size_t i = 0; i < count; ++i) {
            const double e = double(got[i]) - double(ref[i]);
            sum_sq_err += e * e;
            sum_sq_ref += double(ref[i]) * double(ref[i]);
            max_abs_err = std::max(max_abs_err, std::fabs(e));
        }
        n += count;
    }
    void add(const ErrorStats& o) {
        sum_sq_err += o.sum_sq_err;
        sum_sq_ref += o.sum_sq_ref;
        max_abs_err = std::max(max_abs_err, o.max_abs_err);
        n += o.n;
    }
    // RMS error relative to the RMS of the reference.
    double rel_rms() const { return sum_sq_ref > 0 ? std::sqrt(sum_sq_err / sum_sq_ref) : 0; }
};

// Kinds of 32-element runs the round-trip tests feed the quantizers.
enum class Pattern {
    kGaussian,     // N(0, 1) * scale
    kUniform,      // U(-1, 1) * scale
    kOutliers,     // N(0, 1) * scale with ~3% of values 30x larger
    kAllZero,      // exact zeros
    kConstant,     // one value repeated (sign from the rng)
    kTiny,         // N(0, 1) * 1e-6: scales become fp16 subnormals
    kSkewed,       // 0.6 + 0.2 * N(0, 1): all one sign, away from zero
    kMixedScales,  // N(0, 1) * 10^U(-3, 1) per 16 values
};
inline const char* pattern_name(Pattern p) {
    switch (p) {
        case Pattern::kGaussian:
            return "gaussian";
        case Pattern::kUniform:
            return "uniform";
        case Pattern::kOutliers:
            return "outliers";
        case Pattern::kAllZero:
            return "all-zero";
        case Pattern::kConstant:
            return "constant";
        case Pattern::kTiny:
            return "tiny";
        case Pattern::kSkewed:
            return "skewed";
        case Pattern::kMixedScales:
            return "mixed-scales";
    }
    return "?";
}
inline constexpr Pattern kAllPatterns[] = {
    Pattern::kGaussian, Pattern::kUniform, Pattern::kOutliers, Pattern::kAllZero,
    Pattern::kConstant, Pattern::kTiny,    Pattern::kSkewed,   Pattern::kMixedScales,
};

// n values (n a multiple of 16) following pattern p.
inline std::vector<float> make_values(Pattern p, size_t n, std::mt19937& rng, float scale = 1) {
    std::normal_distribution<float> normal(0, 1);
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::vector<float> x(n);
    switch (p) {
        case Pattern::kGaussian:
            for (auto& v : x) v = normal(rng) * scale;
            break;
        case Pattern::kUniform:
            for (auto& v : x) v = uniform(rng) * scale;
            break;
        case Pattern::kOutliers:
            for (auto& v : x) v = normal(rng) * scale * (uniform(rng) > 0.94f ? 30.0f : 1.0f);
            break;
        case Pattern::kAllZero:
            break;
        case Pattern::kConstant: {
            const float c = (uniform(rng) > 0 ? 1 : -1) * (0.25f + std::fabs(normal(rng))) * scale;
            for (auto& v : x) v = c;
            break;
        }
        case Pattern::kTiny:
            for (auto& v : x) v = normal(rng) * 1e-6f;
            break;
        case Pattern::kSkewed:
            for (auto& v : x) v = (0.6f + 0.2f * normal(rng)) * scale;
            break;
        case Pattern::kMixedScales:
            for (size_t i = 0; i < n; i += 16) {
                const float s = std::pow(10.0f, 2 * uniform(rng) - 1) * scale;
                for (size_t j = i; j < i + 16 && j < n; ++j) x[j] = normal(rng) * s;
            }
            break;
    }
    return x;
}

}  // namespace strata::test
