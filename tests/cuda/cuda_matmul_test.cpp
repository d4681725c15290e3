// The CUDA backend's quantized matrix products (backend/cuda/quant_matmul.h) for every weight type,
// against double-precision references computed the CPU backend's way: x rounded as
// quant::quantize_row_activations rounds it for quant::vec_dot_type(weight type), dequantized
// (x'), and dotted with quant::dequantize_row's weights; for Q4_1 / Q5_1 plus, per block,
// m * (s - d * sum q): what the CPU's fp16 Q8_1 sum s changes in the minimum term.
//
// On the host (no GPU needed): the device decoders (backend/cuda/formats_*.cuh), the activation
// rounding (formats_activations.cuh) and the matvec's per-chunk arithmetic (matvec_chunk.cuh)
// are plain functions; they are run here on random data: dequant8 must give
// quant::dequantize_row's floats bit for bit, the rounding quantize_row_activations's codes and
// scales bit for bit, and the chunk arithmetic the reference within the matvec's bound below.
//
// On the GPU (skipped, with the reason, where there is none): the prompt GEMM's activation kernel
// (whose block reductions the matvec's shares) bit for bit against the host rounding;
// Matmul::linear for n = 1..512 tokens on several shapes; and embed_rows, which must equal
// dequantize_row exactly.
//
// Bounds, with u = 2^-24 (fp32's unit roundoff), mag = sum_c |w_c x'_c| and aff = sum_c |o_c x'_c|
// (o_c the minimum term of the affine formats, which the kernels sum apart from d * q):
//   decode matvec: every product is exact (integer dots of the codes; fp16 / bf16 values) or
//     rounded once (F32), then scaled (at most two roundings) and summed: per lane at most 8 terms
//     per chunk of 2048 columns, then 5 sums across the warp and the bias; the reference's own
//     float rounding of the weights and of Q8_K values adds 2: with a factor 2 to spare,
//     |error| <= 2u (8 * chunks + 16) (mag + aff);
//   int8 tensor-core GEMM (prompts without cuBLAS or with Tuning::prompt_mmq All; Q4_0..Q8_0 and
//     Q2_K..Q6_K with a multiple of 256 columns):
//     exact integer products per block or 256-column step, each scaled (at most three roundings)
//     and added in turn: at most cols / 32 sums, so 2u (cols / 32 + 16) (mag + aff);
//   prompt GEMM (cuBLAS), summing in an order of its choosing:
//     F32: fp32 FMAs, each rounding at most u times a partial sum (<= mag) and independent in
//       sign: 4 standard deviations of that random walk, and some: u (4 sqrt(cols) + 16) mag;
//     F16, BF16: exact products (x' is the CPU's fp16 / bf16), fp32 accumulation in tensor
//       cores (which truncate), steps of 16 columns: 2 ulps of mag a step,
//       2^-22 (cols / 16 + 16) mag;
//     block formats: that, plus w and x' each rounded to fp16 (2^-11 relative, 2^-25 absolute
//       below fp16's normal range): (2^-10 + 2^-21) mag + 2^-24 sum_c (|w_c| + |x'_c|), plus the
//       Q8_1 term above in full (the GEMM takes the minimum times exact sums, not fp16 ones);
//   and 2u |bias| for the bias's addition, 1e-12 absolute everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_chunk.cuh"
#include "backend/cuda/mmq.h"
#include "backend/cuda/quant_matmul.h"
#include "cuda/device_buffers.h"
#include "gpu/gpu.h"
#include "quant/quant.h"
#include "test_support.h"

namespace strata {
namespace {

constexpr TensorType kTypes[] = {
    TensorType::F32,  TensorType::F16,    TensorType::BF16,   TensorType::Q4_0,
    TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,
    TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,
    TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4,
};

int block_size(TensorType t) {
    return int(tensor_type_info(t)->block_size);
}
int block_bytes(TensorType t) {
    return int(tensor_type_info(t)->type_size);
}
bool is_float(TensorType t) {
    return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16;
}
// The alignment rows of t are guaranteed (their block struct's; the element size for floats).
size_t row_alignment(TensorType t) {
    if (t == TensorType::F32) return 4;
    if (t == TensorType::MXFP4) return 1;
    return 2;
}

// ---- weights ------------------------------------------------------------------------------------

enum class Fill {
    Quantized,     // random rows through quant::quantize_row: realistic codes and scales
    RandomBlocks,  // random bytes with sane scales: every code, every sub-block scale
};

struct Weights {
    TensorType type;
    int64_t rows = 0, cols = 0;
    size_t stride = 0;              // bytes between rows
    size_t offset = 0;              // of row 0 in `storage` (to misalign the rows)
    std::vector<uint64_t> storage;  // 8-byte aligned bytes
    std::vector<float> ref;         // rows x cols, by quant::dequantize_row

    const uint8_t* row(int64_t r) const {
        return reinterpret_cast<const uint8_t*>(storage.data()) + offset + size_t(r) * stride;
    }
    uint8_t* row(int64_t r) {
        return reinterpret_cast<uint8_t*>(storage.data()) + offset + size_t(r) * stride;
    }
    size_t bytes() const { return offset + size_t(rows) * stride; }
};

uint16_t random_half(std::mt19937& rng, float lo_log2, float hi_log2) {
    std::uniform_real_distribution<float> e(lo_log2, hi_log2);
    const float v = std::exp2(e(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    return quant::fp32_to_fp16(v);
}
void put16(uint8_t* p, uint16_t v) {
    std::memcpy(p, &v, 2);
}

// Random bytes, then every scale field set to a value that keeps |w| below ~64 (so the GEMM's
// fp16 staging cannot overflow) and above fp16's subnormals.
void randomize_block(TensorType t, uint8_t* b, std::mt19937& rng) {
    for (int i = 0; i < block_bytes(t); ++i) b[i] = uint8_t(rng());
    auto scale = [&](size_t offset) { put16(b + offset, random_half(rng, -12, -6)); };
    switch (t) {
        case TensorType::Q4_0:
            return scale(offsetof(quant::BlockQ4_0, d));
        case TensorType::Q4_1:
            scale(offsetof(quant::BlockQ4_1, d));
            return put16(b + offsetof(quant::BlockQ4_1, m), random_half(rng, -9, -4));
        case TensorType::Q5_0:
            return scale(offsetof(quant::BlockQ5_0, d));
        case TensorType::Q5_1:
            scale(offsetof(quant::BlockQ5_1, d));
            return put16(b + offsetof(quant::BlockQ5_1, m), random_half(rng, -9, -4));
        case TensorType::Q8_0:
            return scale(offsetof(quant::BlockQ8_0, d));
        case TensorType::IQ4_NL:
            return scale(offsetof(quant::BlockIQ4_NL, d));
        case TensorType::MXFP4:
            b[offsetof(quant::BlockMXFP4, e)] = uint8_t(116 + rng() % 15);
            return;
        case TensorType::Q2_K:
            scale(offsetof(quant::BlockQ2_K, d));
            return scale(offsetof(quant::BlockQ2_K, dmin));
        case TensorType::Q3_K:
            return scale(offsetof(quant::BlockQ3_K, d));
        case TensorType::Q4_K:
            scale(offsetof(quant::BlockQ4_K, d));
            return scale(offsetof(quant::BlockQ4_K, dmin));
        case TensorType::Q5_K:
            scale(offsetof(quant::BlockQ5_K, d));
            return scale(offsetof(quant::BlockQ5_K, dmin));
        case TensorType::Q6_K:
            return scale(offsetof(quant::BlockQ6_K, d));
        case TensorType::IQ4_XS:
            return scale(offsetof(quant::BlockIQ4_XS, d));
        default:
            FAIL() << "no random blocks for " << tensor_type_name(t);
    }
}

// rows x cols of type t, rows `pad` bytes longer than their data, row 0 `offset` bytes into the
// storage; the gaps filled with bytes that must never be read into a result.
Weights make_weights(TensorType t, int64_t rows, int64_t cols, Fill fill, size_t pad, size_t offset,
                     std::mt19937& rng) {
    Weights w;
    w.type = t;
    w.rows = rows;
    w.cols = cols;
    w.stride = quant::quant_row_bytes(t, cols).value() + pad;
    w.offset = offset;
    w.storage.assign((w.bytes() + 7) / 8, 0x7f7f7f7f7f7f7f7full);  // NaN-ish garbage in the gaps
    w.ref.resize(size_t(rows * cols));
    std::normal_distribution<float> normal(0, 1);
    std::uniform_real_distribution<float> log_scale(-2, 1);
    std::vector<float> values(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        if (fill == Fill::Quantized || is_float(t)) {
            const float s = std::pow(10.0f, log_scale(rng));
            for (float& v : values) v = normal(rng) * s;
            // quantize_row wants its output aligned to the block struct: go through a copy.
            std::vector<uint64_t> tmp((w.stride + 7) / 8);
            quant::quantize_row(t, values.data(), tmp.data(), cols);
            std::memcpy(w.row(r), tmp.data(), w.stride - pad);
        } else {
            for (int64_t b = 0; b < cols / block_size(t); ++b) {
                randomize_block(t, w.row(r) + size_t(b) * size_t(block_bytes(t)), rng);
            }
        }
        std::vector<uint64_t> copy((w.stride + 7) / 8);
        std::memcpy(copy.data(), w.row(r), w.stride - pad);
        quant::dequantize_row(t, copy.data(), w.ref.data() + r * cols, cols);
    }
    return w;
}

// Magnitude of the minimum term an affine format adds to each element of a row (0 for the other
// formats): the kernel sums it apart from the d * q part, so float rounding is relative to both.
std::vector<double> offset_magnitudes(TensorType t, const uint8_t* row, int64_t cols) {
    std::vector<double> o(size_t(cols), 0.0);
    const int bs = block_size(t);
    for (int64_t b = 0; b < cols / bs; ++b) {
        const uint8_t* block = row + size_t(b) * size_t(block_bytes(t));
        for (int e = 0; e < bs; ++e) {
            double v = 0;
            if (t == TensorType::Q4_1 || t == TensorType::Q5_1) {
                uint16_t m;  // m follows d in both blocks
                std::memcpy(&m, block + 2, 2);
                v = std::fabs(quant::fp16_to_fp32(m));
            } else if (t == TensorType::Q2_K) {
                quant::BlockQ2_K q;
                std::memcpy(&q, block, sizeof q);
                v = std::fabs(quant::fp16_to_fp32(q.dmin)) * (q.scales[e / 16] >> 4);
            } else if (t == TensorType::Q4_K || t == TensorType::Q5_K) {
                uint16_t dmin;  // d, dmin, scales[12] start both blocks
                uint8_t scales[12];
                std::memcpy(&dmin, block + 2, 2);
                std::memcpy(scales, block + 4, 12);
                v = std::fabs(quant::fp16_to_fp32(dmin)) * quant::k4_scale_min(scales, e / 32).min;
            }
            o[size_t(b * bs + e)] = v;
        }
    }
    return o;
}

// The signed minimum m of block b of a Q4_1 / Q5_1 row.
float block_minimum(const uint8_t* row, TensorType t, int64_t b) {
    uint16_t m;  // m follows d in both blocks
    std::memcpy(&m, row + size_t(b) * size_t(block_bytes(t)) + 2, 2);
    return quant::fp16_to_fp32(m);
}

// Activations with some larger entries, like hidden states.
std::vector<float> make_activations(int64_t n, int64_t cols, std::mt19937& rng) {
    std::normal_distribution<float> normal(0, 1);
    std::uniform_real_distribution<float> uniform(0, 1);
    std::vector<float> x(size_t(n * cols));
    for (float& v : x) v = normal(rng) * (uniform(rng) < 0.02f ? 20.0f : 1.0f);
    return x;
}

// ---- references ---------------------------------------------------------------------------------

// n tokens of activations as the CPU multiplies them with weights of type `weight`, from the quant
// module alone: x' (dequantized codes, or rounded floats) and, for Q8_1, s - d * sum q per block.
struct CpuActivations {
    std::vector<float> x;          // n x cols
    std::vector<double> q8_1_err;  // n x cols / 32 (Q8_1 only)
};

CpuActivations cpu_activations(TensorType weight, const std::vector<float>& x, int64_t n,
                               int64_t cols) {
    const TensorType act = quant::vec_dot_type(weight);
    CpuActivations a;
    a.x.resize(size_t(n * cols));
    std::vector<uint64_t> buf((quant::quant_row_bytes(act, cols).value() + 7) / 8);
    for (int64_t t = 0; t < n; ++t) {
        quant::quantize_row_activations(act, x.data() + t * cols, buf.data(), cols);
        quant::dequantize_row(act, buf.data(), a.x.data() + t * cols, cols);
        if (act != TensorType::Q8_1) continue;
        const auto* blocks = reinterpret_cast<const quant::BlockQ8_1*>(buf.data());
        for (int64_t b = 0; b < cols / 32; ++b) {
            int sum = 0;
            for (const int8_t q : blocks[b].qs) sum += q;
            a.q8_1_err.push_back(double(quant::fp16_to_fp32(blocks[b].s)) -
                                 double(quant::fp16_to_fp32(blocks[b].d)) * sum);
        }
    }
    return a;
}

enum class Path { Matvec, Mmq, Gemm };

struct Expected {
    std::vector<double> value, tolerance;  // n x rows
};

Expected expected(const Weights& w, const CpuActivations& a, int64_t n,
                  const std::vector<float>* bias, Path path) {
    static_assert(offsetof(quant::BlockQ4_1, m) == 2 && offsetof(quant::BlockQ5_1, m) == 2);
    static_assert(offsetof(quant::BlockQ4_K, scales) == 4 &&
                  offsetof(quant::BlockQ5_K, scales) == 4);
    Expected e;
    e.value.resize(size_t(n * w.rows));
    e.tolerance.resize(size_t(n * w.rows));
    const bool block_format = !is_float(w.type);
    const bool q8_1 = quant::vec_dot_type(w.type) == TensorType::Q8_1;
    const double u = std::exp2(-24), cols = double(w.cols);
    const double chunks = std::ceil(cols / 2048);
    for (int64_t r = 0; r < w.rows; ++r) {
        const float* wr = w.ref.data() + r * w.cols;
        const std::vector<double> offsets = block_format
                                                ? offset_magnitudes(w.type, w.row(r), w.cols)
                                                : std::vector<double>(size_t(w.cols));
        for (int64_t t = 0; t < n; ++t) {
            const float* xt = a.x.data() + t * w.cols;
            double sum = 0, mag = 0, aff = 0, abs_w = 0, abs_x = 0;
            for (int64_t c = 0; c < w.cols; ++c) {
                const double wc = wr[c], xc = xt[c];
                sum += wc * xc;
                mag += std::fabs(wc * xc);
                aff += std::fabs(xc) * offsets[size_t(c)];
                abs_w += std::fabs(wc);
                abs_x += std::fabs(xc);
            }
            double q8_1_term = 0;  // the CPU's fp16 Q8_1 sums in the minimum term
            for (int64_t b = 0; q8_1 && b < w.cols / 32; ++b) {
                q8_1_term +=
                    block_minimum(w.row(r), w.type, b) * a.q8_1_err[size_t(t * (w.cols / 32) + b)];
            }
            const double bias_r = bias ? (*bias)[size_t(r)] : 0.0;
            double tol = 1e-12 + 2 * u * std::fabs(bias_r);  // the bias's addition
            if (path == Path::Matvec) {
                tol += 2 * u * (8 * chunks + 16) * (mag + aff);
            } else if (path == Path::Mmq) {
                tol += 2 * u * (cols / 32 + 16) * (mag + aff);
            } else if (w.type == TensorType::F32) {
                tol += u * (4 * std::sqrt(cols) + 16) * mag;
            } else {
                tol += std::exp2(-22) * (cols / 16 + 16) * mag;
                if (block_format) {
                    tol += (std::exp2(-10) + std::exp2(-21)) * mag + u * (abs_w + abs_x) +
                           std::fabs(q8_1_term);
                }
            }
            e.value[size_t(t * w.rows + r)] = sum + q8_1_term + bias_r;
            e.tolerance[size_t(t * w.rows + r)] = tol;
        }
    }
    return e;
}

// Number of outputs outside their bound (the first few printed).
int count_bad(const std::vector<float>& got, const Expected& e, const std::string& what) {
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(double(got[i]) - e.value[i]);
        if (!(err <= e.tolerance[i])) {
            if (++bad <= 5) {
                ADD_FAILURE() << what << ": output " << i << " = " << got[i] << ", expected "
                              << e.value[i] << " +- " << e.tolerance[i] << " (error " << err << ")";
            }
        }
    }
    return bad;
}

std::string type_param_name(const testing::TestParamInfo<TensorType>& info) {
    return std::string(tensor_type_name(info.param));
}

// ---- the device code on the host
// -----------------------------------------------------------------

// One token's activations rounded by the device code (formats_activations.cuh) for activation type
// `act`, the blocks' reductions done in order: per block the codes, the step (d as the kernels
// multiply with it) and Q8_1's s; or, for the float types, the rounded floats.
struct HostRounding {
    std::vector<int8_t> codes;    // cols
    std::vector<float> step;      // cols / block elements
    std::vector<float> q8_1_sum;  // cols / 32 (Q8_1)
    std::vector<float> floats;    // cols (F32, F16, BF16)
};

HostRounding round_row_on_host(TensorType act, const float* x, int64_t cols) {
    HostRounding h;
    if (act == TensorType::F32 || act == TensorType::F16 || act == TensorType::BF16) {
        for (int64_t e = 0; e < cols; ++e) {
            h.floats.push_back(
                act == TensorType::F16    ? cuda::round_float_activation<TensorType::F16>(x[e])
                : act == TensorType::BF16 ? cuda::round_float_activation<TensorType::BF16>(x[e])
                                          : cuda::round_float_activation<TensorType::F32>(x[e]));
        }
        return h;
    }
    const int bs = cuda::activation_block_elems(act);
    for (int64_t b0 = 0; b0 < cols; b0 += bs) {
        const float* xb = x + b0;
        float amax = 0, max = 0;  // max: the first x of largest magnitude
        for (int e = 0; e < bs; ++e) {
            if (std::fabs(xb[e]) > amax) {
                amax = std::fabs(xb[e]);
                max = xb[e];
            }
        }
        if (act == TensorType::Q8_K) {
            const cuda::Q8KScale s = cuda::q8k_scale(max);
            for (int e = 0; e < bs; ++e) h.codes.push_back(int8_t(cuda::q8k_code(xb[e], s)));
            h.step.push_back(s.d);
            continue;
        }
        const cuda::Q8Scale s = cuda::q8_scale(amax);
        int sum = 0;
        for (int e = 0; e < bs; ++e) {
            const int q = cuda::q8_code(xb[e], s);
            h.codes.push_back(int8_t(q));
            sum += q;
        }
        h.step.push_back(cuda::q8_step(s));
        if (act == TensorType::Q8_1) h.q8_1_sum.push_back(cuda::q8_1_sum(s, sum));
    }
    return h;
}

// What the activation-rounding kernel writes (matvec_kernels.cuh), computed the same way on the
// host: the codes in the layout of formats.cuh.
struct HostActivations {
    std::vector<int8_t> q;
    std::vector<float> step, q8_1_sums, x;
    std::vector<int> sums;
    int q_stride = 0;

    cuda::QuantizedActivations view() {
        return {q.data(), step.data(), sums.data(), q8_1_sums.data(), x.data(), q_stride};
    }
};

template <class F>
HostActivations quantize_on_host(const std::vector<float>& x, int64_t n, int64_t cols) {
    constexpr TensorType kAct = cuda::activation_type(F::kType);
    HostActivations a;
    a.q_stride = int((cols + cuda::kGroupElems - 1) / cuda::kGroupElems * cuda::kGroupElems);
    a.q.assign(size_t(n * a.q_stride), 0);
    a.sums.assign(size_t(n * cols / 16), 0);
    for (int64_t t = 0; t < n; ++t) {
        HostRounding h = round_row_on_host(kAct, x.data() + t * cols, cols);
        a.x.insert(a.x.end(), h.floats.begin(), h.floats.end());
        a.step.insert(a.step.end(), h.step.begin(), h.step.end());
        a.q8_1_sums.insert(a.q8_1_sums.end(), h.q8_1_sum.begin(), h.q8_1_sum.end());
        if constexpr (!F::kFloat) {
            h.codes.resize(size_t(a.q_stride), 0);  // one token's, in element order
            for (int64_t e = 0; e < cols; ++e) {
                a.sums[size_t((t * cols + e) / 16)] += h.codes[size_t(e)];
            }
            for (int p = 0; p < a.q_stride; ++p) {
                const int first = p / cuda::kGroupElems * cuda::kGroupElems;  // of p's group
                a.q[size_t(t * a.q_stride + p)] =
                    h.codes[size_t(first + cuda::activation_element<F>(p % cuda::kGroupElems))];
            }
        }
    }
    return a;
}

// The matvec of kN tokens (x holds at least kN) as the kernel computes it: chunks staged in an
// aligned buffer, chunk_dot for each of 32 lanes, lanes summed.
template <class F, int kN>
std::vector<float> matvec_on_host(const Weights& w, const std::vector<float>& x, bool x_aligned) {
    alignas(16) static uint8_t stage[cuda::chunk_bytes<F>() + 16];
    std::vector<float> y(size_t(kN * w.rows));
    HostActivations act = quantize_on_host<F>(x, kN, w.cols);
    const bool own_x = cuda::activation_type(F::kType) != TensorType::F32;
    const float* xs = F::kFloat && own_x ? act.x.data() : x.data();
    const int nblocks = int(w.cols / F::kBlockElems);
    for (int64_t r = 0; r < w.rows; ++r) {
        float lanes[32][kN] = {};
        for (int b0 = 0; b0 < nblocks; b0 += cuda::chunk_blocks<F>()) {
            const int nb = std::min(cuda::chunk_blocks<F>(), nblocks - b0);
            std::memset(stage, 0xee, sizeof stage);
            std::memcpy(stage, w.row(r) + size_t(b0) * F::kBlockBytes, size_t(nb) * F::kBlockBytes);
            for (int lane = 0; lane < 32; ++lane) {
                if constexpr (F::kFloat) {
                    cuda::chunk_dot_float<F, kN>(stage, b0, nb, lane, xs, int(w.cols), kN,
                                                 x_aligned, lanes[lane]);
                } else {
                    cuda::chunk_dot<F, kN>(stage, b0, nb, lane, act.view(), int(w.cols), kN,
                                           lanes[lane]);
                }
            }
        }
        for (int t = 0; t < kN; ++t) {
            float s = 0;
            for (const auto& lane : lanes) s += lane[t];
            y[size_t(t * w.rows + r)] = s;
        }
    }
    return y;
}

// Rows of activations that probe the rounding: Gaussian values; exact ties (amax 127, so that
// 127 / amax = 1 and x + 0.5 lands on a half); a value and its negation as the largest magnitude
// (the sign Q8_K takes); zeros; values near the bottom of the float range (Q8_0 / Q8_1 then
// divide: 127 / amax overflows); huge values. cols a multiple of 256.
std::vector<float> rounding_probes(int64_t cols, std::mt19937& rng, bool tiny) {
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> x(static_cast<size_t>(cols));
    for (int64_t b0 = 0; b0 < cols; b0 += 32) {
        float* xb = x.data() + b0;
        const int kind = int((b0 / 32) % 8);
        for (int e = 0; e < 32; ++e) {
            const float g = normal(rng);
            switch (kind) {
                case 0:
                    xb[e] = g;
                    break;
                case 1:  // ties: codes k + 0.5 for amax 127
                    xb[e] = std::clamp(std::round(g * 30), -120.0f, 120.0f) +
                            (rng() & 1 ? 0.5f : -0.5f);
                    break;
                case 2:
                    xb[e] = g * 1e-3f;
                    break;
                case 3:
                    xb[e] = 0;
                    break;
                case 4:
                    xb[e] = tiny ? g * 2e-38f : g * 1e-30f;
                    break;
                case 5:
                    xb[e] = g * 1e30f;
                    break;
                default:
                    xb[e] = g * 10;
                    break;
            }
        }
        if (kind == 1) xb[rng() % 32] = 127.0f;
        if (kind == 6) {  // +-largest, either first
            const float a = std::fabs(normal(rng)) * 40 + 50;
            const int i = int(rng() % 32), j = int(rng() % 32);
            xb[i] = rng() & 1 ? a : -a;
            if (j != i) xb[j] = -xb[i];
        }
    }
    // Q8_K blocks: the largest magnitude sometimes twice with both signs, across warps.
    for (int64_t b0 = 0; b0 + 256 <= cols; b0 += 256) {
        if (rng() % 2 == 0) continue;
        const int i = int(rng() % 256), j = int(rng() % 256);
        x[size_t(b0 + i)] = 1e3f;
        x[size_t(b0 + j)] = rng() & 1 ? -1e3f : 1e3f;
    }
    return x;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

TEST(CudaActivationRounding, TypesAreTheCpus) {
    for (const TensorType t : kTypes) {
        EXPECT_EQ(cuda::activation_type(t), quant::vec_dot_type(t)) << tensor_type_name(t);
    }
}

// The device rounding code, run on the host, gives quantize_row_activations's codes and scales
// bit for bit.
TEST(CudaActivationRounding, EqualsQuantizeRowActivations) {
    std::mt19937 rng(21);
    constexpr int64_t kCols = 256 * 8;
    for (const TensorType act : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K,
                                 TensorType::F16, TensorType::BF16, TensorType::F32}) {
        for (int rep = 0; rep < 20; ++rep) {
            // Q8_K's codes are undefined where -127 / max overflows: no tiny blocks for it.
            const std::vector<float> x = rounding_probes(kCols, rng, act != TensorType::Q8_K);
            const HostRounding h = round_row_on_host(act, x.data(), kCols);
            std::vector<uint64_t> buf((quant::quant_row_bytes(act, kCols).value() + 7) / 8);
            quant::quantize_row_activations(act, x.data(), buf.data(), kCols);
            const std::string what =
                std::string(tensor_type_name(act)) + " rep " + std::to_string(rep);
            if (act == TensorType::Q8_0 || act == TensorType::Q8_1) {
                const bool q8_1 = act == TensorType::Q8_1;
                const auto* b0 = reinterpret_cast<const quant::BlockQ8_0*>(buf.data());
                const auto* b1 = reinterpret_cast<const quant::BlockQ8_1*>(buf.data());
                for (int64_t b = 0; b < kCols / 32; ++b) {
                    const int8_t* qs = q8_1 ? b1[b].qs : b0[b].qs;
                    const uint16_t d = q8_1 ? b1[b].d : b0[b].d;
                    ASSERT_EQ(bits(h.step[size_t(b)]), bits(quant::fp16_to_fp32(d)))
                        << what << " block " << b;
                    if (q8_1) {
                        ASSERT_EQ(bits(h.q8_1_sum[size_t(b)]), bits(quant::fp16_to_fp32(b1[b].s)))
                            << what << " block " << b;
                    }
                    for (int e = 0; e < 32; ++e) {
                        ASSERT_EQ(h.codes[size_t(b * 32 + e)], qs[e])
                            << what << " element " << b * 32 + e;
                    }
                }
            } else if (act == TensorType::Q8_K) {
                const auto* blocks = reinterpret_cast<const quant::BlockQ8_K*>(buf.data());
                for (int64_t b = 0; b < kCols / 256; ++b) {
                    ASSERT_EQ(bits(h.step[size_t(b)]), bits(blocks[b].d)) << what << " block " << b;
                    for (int e = 0; e < 256; ++e) {
                        ASSERT_EQ(h.codes[size_t(b * 256 + e)], blocks[b].qs[e])
                            << what << " element " << b * 256 + e;
                    }
                }
            } else {
                std::vector<float> want(static_cast<size_t>(kCols));
                quant::dequantize_row(act, buf.data(), want.data(), kCols);
                for (int64_t e = 0; e < kCols; ++e) {
                    ASSERT_EQ(bits(h.floats[size_t(e)]), bits(want[size_t(e)]))
                        << what << " element " << e;
                }
            }
        }
    }
}

// The float roundings at the edges: ties, subnormals, the end of fp16's range, Inf, NaN.
TEST(CudaActivationRounding, FloatEdges) {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> values = {0.0f,
                                       -0.0f,
                                       1.0f + std::exp2(-11.0f),
                                       1.0f + 3 * std::exp2(-11.0f),  // fp16 ties
                                       1.0f + std::exp2(-8.0f),
                                       1.0f + 3 * std::exp2(-8.0f),  // bf16 ties
                                       65504.0f,
                                       65519.0f,
                                       65520.0f,
                                       1e6f,
                                       -1e6f,
                                       3e-8f,
                                       6e-8f,
                                       1e-40f,
                                       -1e-45f,
                                       std::numeric_limits<float>::max(),
                                       inf,
                                       -inf};
    for (const float v : values) {
        EXPECT_EQ(bits(cuda::round_float_activation<TensorType::F16>(v)),
                  bits(quant::fp16_to_fp32(quant::fp32_to_fp16(v))))
            << v;
        EXPECT_EQ(bits(cuda::round_float_activation<TensorType::BF16>(v)),
                  bits(quant::bf16_to_fp32(quant::fp32_to_bf16(v))))
            << v;
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(cuda::round_float_activation<TensorType::F16>(nan)));
    EXPECT_TRUE(std::isnan(cuda::round_float_activation<TensorType::BF16>(nan)));
}

class CudaFormatsOnHost : public testing::TestWithParam<TensorType> {};

// Columns that are not a whole number of chunks (2048 elements), with a partial last chunk.
int64_t odd_cols(TensorType t) {
    const int bs = block_size(t);
    return bs == 32 ? 32 * (64 + 45) : (bs == 256 ? 256 * 11 : 2048 + 99);
}

TEST_P(CudaFormatsOnHost, DequantizeEqualsReference) {
    const TensorType t = GetParam();
    std::mt19937 rng(11);
    for (const Fill fill : {Fill::Quantized, Fill::RandomBlocks}) {
        const Weights w = make_weights(t, 4, odd_cols(t), fill, 0, 0, rng);
        for (int64_t r = 0; r < w.rows; ++r) {
            for (int64_t g = 0; g < (w.cols + 7) / 8; ++g) {
                float got[8];
                const int count = int(std::min<int64_t>(8, w.cols - 8 * g));
                cuda::with_format(t, [&](auto format) {
                    cuda::dequant_group<decltype(format)>(w.row(r), int(g), count, got);
                });
                for (int i = 0; i < count; ++i) {
                    const float want = w.ref[size_t(r * w.cols + 8 * g + i)];
                    ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0)
                        << "row " << r << " element " << 8 * g + i << ": " << got[i] << " vs "
                        << want;
                }
            }
        }
    }
}

TEST_P(CudaFormatsOnHost, ChunkArithmeticMatchesReference) {
    const TensorType t = GetParam();
    std::mt19937 rng(12);
    for (const Fill fill : {Fill::Quantized, Fill::RandomBlocks}) {
        for (const int64_t cols : {int64_t(block_size(t) == 1 ? 99 : 256), odd_cols(t)}) {
            const Weights w = make_weights(t, 13, cols, fill, 0, 0, rng);
            const std::vector<float> x = make_activations(3, cols, rng);
            const std::string what =
                std::string(tensor_type_name(t)) + " cols " + std::to_string(cols);
            // x rows 16-byte aligned or not (only the float formats read rows of floats).
            for (const bool x_aligned : {true, false}) {
                if ((x_aligned && cols % 4 != 0) || (!x_aligned && !is_float(t))) continue;
                std::vector<float> y3, y1;
                cuda::with_format(t, [&](auto format) {
                    y3 = matvec_on_host<decltype(format), 3>(w, x, x_aligned);
                    y1 = matvec_on_host<decltype(format), 1>(w, x, x_aligned);
                });
                const CpuActivations a3 = cpu_activations(t, x, 3, cols);
                const CpuActivations a1 = cpu_activations(t, x, 1, cols);
                EXPECT_EQ(count_bad(y3, expected(w, a3, 3, nullptr, Path::Matvec), what), 0);
                EXPECT_EQ(count_bad(y1, expected(w, a1, 1, nullptr, Path::Matvec), what), 0);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaFormatsOnHost, testing::ValuesIn(kTypes), type_param_name);

TEST(CudaMatmulTypes, SupportsTheCpuBackendsTypes) {
    for (const TensorType t : kAllTensorTypes) {
        const bool listed = std::find(std::begin(kTypes), std::end(kTypes), t) != std::end(kTypes);
        EXPECT_EQ(cuda::linear_supports(t), listed) << tensor_type_name(t);
    }
}

// ---- on the GPU
// ------------------------------------------------------------------------------------

// A view of weights copied to the GPU (the whole storage, so row 0 keeps its offset).
struct DeviceWeights {
    gpu::DeviceBuffer bytes;
    TensorView view;
};
DeviceWeights upload(const Weights& w) {
    DeviceWeights d;
    d.bytes = test::upload(w.storage.data(), w.bytes());
    d.view.type = w.type;
    d.view.data = d.bytes.data() + w.offset;
    d.view.ne = {w.cols, w.rows, 1, 1};
    d.view.row_bytes = w.stride;
    d.view.where = {MemoryKind::Device, 0};
    return d;
}

struct Case {
    int64_t rows, cols;
    Fill fill;
    size_t pad;
    bool misaligned;  // rows start at the type's row alignment, not 16 bytes
    bool bias;
    std::vector<int64_t> ns;
    int64_t max_weight_elements = 0;  // 0: rows * cols (no tiling)
};

// `tuning` is the Matmul's: which GEMM prompt products take.
void run_case(TensorType t, const Case& c, uint32_t seed, const Tuning& tuning = {}) {
    std::mt19937 rng(seed);
    const Weights w =
        make_weights(t, c.rows, c.cols, c.fill, c.pad, c.misaligned ? row_alignment(t) : 0, rng);
    const DeviceWeights dw = upload(w);
    const int64_t max_n = *std::max_element(c.ns.begin(), c.ns.end());
    auto matmul =
        cuda::Matmul::create(c.max_weight_elements ? c.max_weight_elements : c.rows * c.cols, max_n,
                             c.cols, nullptr, tuning);
    ASSERT_TRUE(matmul.ok()) << matmul.error().message;
    if (!tuning.prompt_cublas) {
        EXPECT_EQ((*matmul)->gemm_engine(), "matvec");
    }
    std::vector<float> bias;
    gpu::DeviceBuffer dbias;
    if (c.bias) {
        std::normal_distribution<float> normal(0, 1);
        for (int64_t r = 0; r < c.rows; ++r) bias.push_back(normal(rng));
        dbias = test::upload(bias.data(), bias.size() * 4);
    }
    for (const int64_t n : c.ns) {
        const std::vector<float> x = make_activations(n, c.cols, rng);
        const gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
        gpu::DeviceBuffer dy = gpu::DeviceBuffer::allocate(size_t(n * c.rows) * 4).value();
        (*matmul)->linear(dw.view, c.bias ? reinterpret_cast<const float*>(dbias.data()) : nullptr,
                          reinterpret_cast<const float*>(dx.data()),
                          reinterpret_cast<float*>(dy.data()), n);
        const std::vector<float> y = test::download<float>(dy.data(), size_t(n * c.rows));
        const bool cublas = (*matmul)->gemm_engine() == "cublas";
        const bool mmq = cuda::mmq_supports(t, c.cols) &&
                         (tuning.prompt_mmq == PromptMmq::All ? n > 4 : (!cublas && n > 8));
        const Path path = mmq ? Path::Mmq : (n > 8 && cublas ? Path::Gemm : Path::Matvec);
        const Expected e =
            expected(w, cpu_activations(t, x, n, c.cols), n, c.bias ? &bias : nullptr, path);
        const std::string what = std::string(tensor_type_name(t)) + " " + std::to_string(c.rows) +
                                 "x" + std::to_string(c.cols) + " n=" + std::to_string(n) +
                                 (path == Path::Gemm  ? " (gemm)"
                                  : path == Path::Mmq ? " (mmq)"
                                                      : " (matvec)");
        EXPECT_EQ(count_bad(y, e, what), 0) << what;
    }
}

// The prompt GEMM's activation kernel (its warp and block reductions are the matvec's) gives the
// host rounding's values, as the GEMM's 16-bit inputs, bit for bit.
TEST(CudaActivationRounding, GemmActivationsOnTheGpu) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(22);
    // One weight type per activation type; 256 * 5 + 32 * 3 columns leave a partial thread block
    // for the 32-element types.
    const std::pair<TensorType, int64_t> cases[] = {
        {TensorType::Q4_0, 256 * 5 + 96}, {TensorType::Q4_1, 256 * 5 + 96},
        {TensorType::Q4_K, 256 * 5},      {TensorType::F16, 256 * 5 + 96},
        {TensorType::BF16, 256 * 5 + 96},
    };
    for (const auto& [weight, cols] : cases) {
        const TensorType act = quant::vec_dot_type(weight);
        constexpr int64_t kN = 3;
        std::vector<float> x;
        for (int64_t t = 0; t < kN; ++t) {
            const std::vector<float> row =
                rounding_probes((cols + 255) / 256 * 256, rng, act != TensorType::Q8_K);
            x.insert(x.end(), row.begin(), row.begin() + cols);
        }
        const gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
        gpu::DeviceBuffer dout = gpu::DeviceBuffer::allocate(x.size() * 2).value();
        cuda::launch_gemm_activations(weight, reinterpret_cast<const float*>(dx.data()), kN, cols,
                                      dout.data(), nullptr);
        std::vector<uint16_t> got(x.size());
        ASSERT_TRUE(gpu::synchronize().ok());
        ASSERT_TRUE(
            gpu::copy(got.data(), dout.data(), got.size() * 2, gpu::CopyKind::DeviceToHost).ok());
        for (int64_t t = 0; t < kN; ++t) {
            const HostRounding h = round_row_on_host(act, x.data() + t * cols, cols);
            const int bs = cuda::activation_block_elems(act);
            for (int64_t e = 0; e < cols; ++e) {
                float v;  // what the kernel rounds to 16 bits
                if (act == TensorType::F16 || act == TensorType::BF16) {
                    v = x[size_t(t * cols + e)];
                } else {
                    v = float(h.codes[size_t(e)]) * h.step[size_t(e / bs)];
                }
                const uint16_t want =
                    act == TensorType::BF16 ? quant::fp32_to_bf16(v) : quant::fp32_to_fp16(v);
                const uint16_t g = got[size_t(t * cols + e)];
                const bool both_nan = act == TensorType::BF16
                                          ? std::isnan(quant::bf16_to_fp32(g)) &&
                                                std::isnan(quant::bf16_to_fp32(want))
                                          : std::isnan(quant::fp16_to_fp32(g)) &&
                                                std::isnan(quant::fp16_to_fp32(want));
                ASSERT_TRUE(g == want || both_nan)
                    << tensor_type_name(weight) << " token " << t << " element " << e << ": " << g
                    << " vs " << want << " (x " << x[size_t(t * cols + e)] << ")";
            }
        }
    }
}

class CudaMatmulTest : public testing::TestWithParam<TensorType> {};

TEST_P(CudaMatmulTest, RealisticRowsOf256) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    run_case(t, {1000, 256, Fill::Quantized, 0, false, false, {1, 2, 3, 8, 9, 33, 512}}, 1);
}

TEST_P(CudaMatmulTest, RandomBlocksRowsOf4096) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    run_case(t, {520, 4096, Fill::RandomBlocks, 0, false, false, {1, 2, 3, 8, 9, 33}}, 2);
    run_case(t, {4096 + 32, 4096, Fill::RandomBlocks, 0, false, false, {1, 9}}, 3);
}

TEST_P(CudaMatmulTest, MisalignedRowsAndPartialChunks) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    run_case(t, {37, odd_cols(t), Fill::RandomBlocks, 0, true, false, {1, 3, 9}}, 4);
}

TEST_P(CudaMatmulTest, PaddedRowsWithBias) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    const size_t data = quant::quant_row_bytes(t, odd_cols(t)).value();
    const size_t pad = (data + 40 + 15) / 16 * 16 - data;  // a 16-byte stride, data not
    run_case(t, {100, odd_cols(t), Fill::RandomBlocks, pad, false, true, {1, 8, 9}}, 5);
}

TEST_P(CudaMatmulTest, GemmInTiles) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    // Staging for 300 rows: the weight goes through the GEMM in tiles of 300, 300, 300, 100.
    run_case(t, {1000, 256, Fill::RandomBlocks, 0, false, true, {33}, 300 * 256}, 6);
}

TEST_P(CudaMatmulTest, PromptBatchesWithoutCublas) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    Tuning no_cublas;
    no_cublas.prompt_cublas = false;
    run_case(t, {300, 256, Fill::Quantized, 0, false, true, {9, 33}}, 8, no_cublas);
}

// The int8 tensor-core GEMM (mmq.h) on every product it takes (Tuning::prompt_mmq All): partial
// tiles of rows and tokens, 256 and 4096 columns, 16-byte aligned rows and rows that start 2
// bytes into a word, a bias; rows whose last step holds fewer 32-element blocks, starting at
// the type's least alignment (MXFP4's odd rows at any byte).
TEST_P(CudaMatmulTest, PromptsOnInt8TensorCores) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    Tuning all_mmq;
    all_mmq.prompt_mmq = PromptMmq::All;
    run_case(t, {1000, 256, Fill::Quantized, 0, false, true, {5, 9, 64, 512}}, 10, all_mmq);
    run_case(t, {520, 4096, Fill::RandomBlocks, 0, false, false, {8, 33, 100}}, 11, all_mmq);
    run_case(t, {37, 256 * 5, Fill::RandomBlocks, 0, true, false, {9, 70}}, 12, all_mmq);
    run_case(t, {70, odd_cols(t), Fill::RandomBlocks, 0, true, true, {9, 70}}, 13, all_mmq);
    // Three 32-element blocks: a single step, partial.
    const int64_t short_cols = block_size(t) == 256 ? 256 : 96;
    run_case(t, {45, short_cols, Fill::Quantized, 0, false, false, {9, 66}}, 14, all_mmq);
}

TEST_P(CudaMatmulTest, EmbedRowsEqualDequantize) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    std::mt19937 rng(7);
    for (const int64_t cols : {int64_t(256), odd_cols(t)}) {
        const Weights w = make_weights(t, 50, cols, Fill::RandomBlocks, 0, 0, rng);
        const DeviceWeights dw = upload(w);
        const std::vector<int32_t> ids = {0, 49, 7, 7, 23, -1, 50};
        const gpu::DeviceBuffer dids = test::upload(ids.data(), ids.size() * 4);
        gpu::DeviceBuffer dout = gpu::DeviceBuffer::allocate(ids.size() * size_t(cols) * 4).value();
        cuda::embed_rows(dw.view, reinterpret_cast<const int32_t*>(dids.data()),
                         int64_t(ids.size()), reinterpret_cast<float*>(dout.data()), nullptr);
        const std::vector<float> out =
            test::download<float>(dout.data(), ids.size() * size_t(cols));
        for (size_t i = 0; i < ids.size(); ++i) {
            const bool valid = ids[i] >= 0 && ids[i] < w.rows;
            const std::vector<float> zeros(size_t(cols), 0.0f);
            const float* want = valid ? w.ref.data() + ids[i] * cols : zeros.data();
            EXPECT_EQ(std::memcmp(out.data() + i * size_t(cols), want, size_t(cols) * 4), 0)
                << tensor_type_name(t) << " cols " << cols << ": row for id " << ids[i];
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaMatmulTest, testing::ValuesIn(kTypes), type_param_name);

}  // namespace
}  // namespace strata
