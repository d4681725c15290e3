// CPU matvec / matmul on every path (scalar, AVX2, AVX-512 where the CPU has them) and every
// weight type, on fresh random data, against two double-precision references:
//
// 1. Same quantized activations (the bound every path must meet): the weights as the reference
//    dequantizer gives them times the activations as quantize_row_activations leaves them,
//    summed exactly in double. A path differs from it only by float rounding: each block's
//    integer dot is exact, its scale product and its accumulation into float lanes round, so
//        |got - exact| <= eps_f32 * (n_blocks + 4) * M,   M = Σ_i |x̂_i| * 3 * max_{group(i)} |w|
//    where the group is the 32 weights around i. Bounding by the group maximum instead of |w_i|
//    covers the affine formats (Q4_1, Q5_1, Q*_K), whose kernels sum d q x and m x separately;
//    their minimum m never exceeds 3 x the group's largest |w| for the quantizers' fits.
//    Q4_1 / Q5_1 also use Q8_1's stored block sum s = fp16(d Σ qx) for the m x term, as the
//    reference engine does; d there is the step before its own fp16 rounding (dx = fp16(d)), so
//    s is within 2^-10 |s| of dx Σ qx, adding up to 2^-10 Σ_blocks |m| |s|.
// 2. Unquantized activations, dequantize(W) · x: additionally the activation rounding error,
//    Σ_i |w_i| e_i with e_i = amax/254 + amax/2048 for Q8_0 / Q8_1 (half a step of the int8 grid
//    plus the fp16 rounding of the step; amax = the 32-block's max |x|), amax/254 for Q8_K
//    (256-blocks, fp32 step), 2^-11 |x_i| for F16, 2^-8 |x_i| for BF16, 0 for F32.
//
// Shapes cover row counts that are and are not multiples of the tiles (4 x 2, 4 x 4), one and
// several blocks per row, batches 1..17, padded row strides, and pools of 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <bit>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_path.h"
#include "backend/cpu/matmul.h"
#include "quant/quant.h"
#include "quant_test_util.h"
#include "util/thread_pool.h"

namespace strata {
namespace {

using cpu::CpuPath;
using test::QuantBuffer;

constexpr TensorType kMatmulTypes[] = {
    TensorType::F32,  TensorType::F16,    TensorType::BF16,   TensorType::Q4_0,
    TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,
    TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,
    TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4,
};

std::vector<CpuPath> runnable_paths() {
    std::vector<CpuPath> paths;
    const cpu::CpuFeatures f = cpu::detect_cpu_features();
    for (CpuPath p : cpu::kAllCpuPaths) {
        if (cpu::cpu_path_runs_on(p, f)) paths.push_back(p);
    }
    return paths;
}

// A weight matrix with random rows (each row its own scale), quantized row by row, rows
// `stride` bytes apart (the gap filled with garbage that must not be read).
struct Weights {
    TensorType type;
    int64_t rows, cols;
    size_t stride;
    QuantBuffer bytes;
    std::vector<float> dequantized;  // rows x cols, by the reference dequantizer

    cpu::QuantMatrix view() const {
        return cpu::make_quant_matrix(type, bytes.data(), rows, cols, stride).value();
    }
};

Weights make_weights(TensorType t, int64_t rows, int64_t cols, size_t pad, std::mt19937& rng) {
    const size_t row_bytes = quant::quant_row_bytes(t, cols).value();
    Weights w{t, rows, cols, row_bytes + pad, QuantBuffer((row_bytes + pad) * size_t(rows)), {}};
    std::memset(w.bytes.data(), 0x7b, w.bytes.size());
    std::uniform_real_distribution<float> log_scale(-2, 1);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> row(static_cast<size_t>(cols));
    w.dequantized.resize(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float scale = std::pow(10.0f, log_scale(rng));
        for (auto& v : row) v = normal(rng) * scale;
        uint8_t* dst = w.bytes.bytes() + size_t(r) * w.stride;
        quant::quantize_row(t, row.data(), dst, cols);
        quant::dequantize_row(t, dst, w.dequantized.data() + r * cols, cols);
    }
    return w;
}

// Activations with some larger entries, like hidden states.
std::vector<float> make_activations(int64_t n, int64_t cols, std::mt19937& rng) {
    std::normal_distribution<float> normal(0, 1);
    std::uniform_real_distribution<float> uniform(0, 1);
    std::vector<float> x(size_t(n * cols));
    for (auto& v : x) v = normal(rng) * (uniform(rng) < 0.02f ? 20.0f : 1.0f);
    return x;
}

// The two references and their tolerances for every output, Y layout (n x rows).
struct Expected {
    std::vector<double> same_activations, same_tolerance;
    std::vector<double> float_activations, float_tolerance;
};

// Activation element i as exactly stored (double holds d * q exactly), and the bound on its
// distance from the unquantized value.
struct QuantizedActivations {
    std::vector<double> value, error_bound;
    std::vector<double> block_sum;  // Q8_1 only: the stored s of each block
};

QuantizedActivations quantize_activations(TensorType weight, const float* x, int64_t cols) {
    const TensorType at = quant::vec_dot_type(weight);
    QuantBuffer q(quant::quant_row_bytes(at, cols).value());
    quant::quantize_row_activations(at, x, q.data(), cols);
    QuantizedActivations a;
    a.value.resize(size_t(cols));
    a.error_bound.resize(size_t(cols));
    const int bs = test::block_size(at);
    auto block_amax = [&](int64_t i) {
        double m = 0;
        for (int64_t j = i / bs * bs; j < i / bs * bs + bs; ++j)
            m = std::max(m, double(std::fabs(x[j])));
        return m;
    };
    for (int64_t i = 0; i < cols; ++i) {
        const size_t u = size_t(i);
        switch (at) {
            case TensorType::Q8_0: {
                const auto& b = static_cast<const quant::BlockQ8_0*>(q.data())[i / 32];
                a.value[u] = double(quant::fp16_to_fp32(b.d)) * b.qs[i % 32];
                a.error_bound[u] = block_amax(i) * (1.0 / 254 + 1.0 / 2048);
                break;
            }
            case TensorType::Q8_1: {
                const auto& b = static_cast<const quant::BlockQ8_1*>(q.data())[i / 32];
                a.value[u] = double(quant::fp16_to_fp32(b.d)) * b.qs[i % 32];
                a.error_bound[u] = block_amax(i) * (1.0 / 254 + 1.0 / 2048);
                if (i % 32 == 0) a.block_sum.push_back(quant::fp16_to_fp32(b.s));
                break;
            }
            case TensorType::Q8_K: {
                const auto& b = static_cast<const quant::BlockQ8_K*>(q.data())[i / 256];
                a.value[u] = double(b.d) * b.qs[i % 256];
                a.error_bound[u] = block_amax(i) * (1.0 / 254 + 1e-6);
                break;
            }
            default: {
                a.value[u] = test::dequantize(at, q, cols)[u];
                const double rel = at == TensorType::F16    ? 1.0 / 2048
                                   : at == TensorType::BF16 ? 1.0 / 256
                                                            : 0;
                a.error_bound[u] = std::fabs(x[i]) * rel + 1e-38;
                break;
            }
        }
    }
    return a;
}

// fp16 minimum m of Q4_1 / Q5_1 block b of row r (0 for other types).
double block_minimum(const Weights& w, int64_t r, int64_t b) {
    const uint8_t* row = w.bytes.bytes() + size_t(r) * w.stride;
    if (w.type == TensorType::Q4_1) {
        return quant::fp16_to_fp32(reinterpret_cast<const quant::BlockQ4_1*>(row)[b].m);
    }
    if (w.type == TensorType::Q5_1) {
        return quant::fp16_to_fp32(reinterpret_cast<const quant::BlockQ5_1*>(row)[b].m);
    }
    return 0;
}

Expected expected_products(const Weights& w, const std::vector<float>& x, int64_t n) {
    Expected e;
    const size_t count = size_t(n * w.rows);
    e.same_activations.resize(count);
    e.same_tolerance.resize(count);
    e.float_activations.resize(count);
    e.float_tolerance.resize(count);
    const int bs = test::block_size(w.type);
    const int64_t n_blocks = w.cols / bs;
    const int group = bs == 1 ? 1 : 32;
    for (int64_t c = 0; c < n; ++c) {
        const float* xc = x.data() + c * w.cols;
        const QuantizedActivations a = quantize_activations(w.type, xc, w.cols);
        for (int64_t r = 0; r < w.rows; ++r) {
            const float* wr = w.dequantized.data() + r * w.cols;
            double same = 0, exact = 0, magnitude = 0, act_error = 0;
            for (int64_t g = 0; g < w.cols; g += group) {
                double gmax = 0;
                for (int64_t i = g; i < g + group; ++i)
                    gmax = std::max(gmax, double(std::fabs(wr[i])));
                for (int64_t i = g; i < g + group; ++i) {
                    const size_t u = size_t(i);
                    same += double(wr[i]) * a.value[u];
                    exact += double(wr[i]) * double(xc[i]);
                    magnitude += std::fabs(a.value[u]) * (group == 1 ? std::fabs(wr[i]) : 3 * gmax);
                    act_error += std::fabs(wr[i]) * a.error_bound[u];
                }
            }
            double tolerance = double(FLT_EPSILON) * double(n_blocks + 4) * magnitude + 1e-30;
            for (size_t b = 0; b < a.block_sum.size(); ++b) {
                tolerance +=
                    std::ldexp(std::fabs(block_minimum(w, r, int64_t(b)) * a.block_sum[b]), -10);
            }
            const size_t o = size_t(c * w.rows + r);
            e.same_activations[o] = same;
            e.same_tolerance[o] = tolerance;
            e.float_activations[o] = exact;
            e.float_tolerance[o] = tolerance + act_error;
        }
    }
    return e;
}

std::string describe(CpuPath p, const Weights& w, int64_t n, int threads) {
    return std::string(cpu::cpu_path_name(p)) + " " + std::string(tensor_type_name(w.type)) +
           " rows=" + std::to_string(w.rows) + " cols=" + std::to_string(w.cols) +
           " n=" + std::to_string(n) + " threads=" + std::to_string(threads) +
           " stride=" + std::to_string(w.stride);
}

// Runs every path on one problem and checks each output against both references; returns the
// scalar path's output so callers can compare.
void check_all_paths(const Weights& w, int64_t n, int threads, std::mt19937& rng) {
    const std::vector<float> x = make_activations(n, w.cols, rng);
    const Expected e = expected_products(w, x, n);
    ThreadPool pool(threads);
    std::vector<float> scalar;
    for (CpuPath p : runnable_paths()) {
        SCOPED_TRACE(describe(p, w, n, threads));
        std::vector<float> y(size_t(n * w.rows), std::nanf(""));
        cpu::matmul_on_path(p, w.view(), x.data(), y.data(), n, pool);
        for (size_t o = 0; o < y.size(); ++o) {
            ASSERT_NEAR(y[o], e.same_activations[o], e.same_tolerance[o])
                << "output " << o << " vs the same quantized activations";
            ASSERT_NEAR(y[o], e.float_activations[o], e.float_tolerance[o])
                << "output " << o << " vs unquantized activations";
        }
        if (p == CpuPath::scalar) {
            scalar = y;
        } else {
            for (size_t o = 0; o < y.size(); ++o) {
                ASSERT_NEAR(y[o], scalar[o], 2 * e.same_tolerance[o])
                    << "output " << o << " vs scalar";
            }
        }
    }
}

class CpuMatmul : public ::testing::TestWithParam<TensorType> {};

// Elements per row: one block and several (for the plain float types: 1, odd, several vectors).
std::vector<int64_t> test_cols(TensorType t) {
    const int bs = test::block_size(t);
    if (bs == 1) return {1, 37, 264};
    if (bs == 32) return {32, 96, 512};
    return {256, 768};
}

TEST_P(CpuMatmul, MatchesReferenceOnEveryPathAndShape) {
    const TensorType t = GetParam();
    for (uint32_t seed : {1u, 2u, 3u}) {
        std::mt19937 rng(seed * 7919u + uint32_t(t));
        int threads = 1;
        for (int64_t rows : {1, 4, 7, 13, 66}) {
            for (int64_t cols : test_cols(t)) {
                const Weights w = make_weights(t, rows, cols, 0, rng);
                for (int64_t n : {1, 2, 3, 5, 8}) {
                    check_all_paths(w, n, threads, rng);
                    threads = threads % 3 + 1;
                }
            }
        }
    }
}

TEST_P(CpuMatmul, EveryBatchSizeUpTo17) {
    const TensorType t = GetParam();
    std::mt19937 rng(1234u + uint32_t(t));
    const Weights w = make_weights(t, 19, test_cols(t)[1], 0, rng);
    for (int64_t n = 1; n <= 17; ++n) check_all_paths(w, n, int(n % 3) + 1, rng);
}

TEST_P(CpuMatmul, PaddedRowStride) {
    const TensorType t = GetParam();
    std::mt19937 rng(99u + uint32_t(t));
    const Weights w = make_weights(t, 10, test_cols(t)[1], 64, rng);
    for (int64_t n : {1, 6}) check_all_paths(w, n, 2, rng);
}

TEST_P(CpuMatmul, MatvecIsMatmulOfOneColumn) {
    const TensorType t = GetParam();
    std::mt19937 rng(5u + uint32_t(t));
    const Weights w = make_weights(t, 23, test_cols(t)[1], 0, rng);
    const std::vector<float> x = make_activations(1, w.cols, rng);
    ThreadPool pool(2);
    std::vector<float> y1(size_t(w.rows)), y2(size_t(w.rows));
    cpu::matvec(w.view(), x.data(), y1.data(), pool);
    cpu::matmul(w.view(), x.data(), y2.data(), 1, pool);
    EXPECT_EQ(y1, y2);
    // Same result whatever the thread count: a row's sum never depends on the split.
    ThreadPool one(1);
    cpu::matvec(w.view(), x.data(), y2.data(), one);
    EXPECT_EQ(y1, y2);
}

// A column's products are the same bits whatever else shares the batch: sequences batched
// together (continuous batching) must get what each gets alone.
TEST_P(CpuMatmul, ColumnsDoNotDependOnTheBatch) {
    const TensorType t = GetParam();
    std::mt19937 rng(77u + uint32_t(t));
    const Weights w = make_weights(t, 21, test_cols(t)[1], 0, rng);
    constexpr int64_t kMaxN = 11;
    const std::vector<float> x = make_activations(kMaxN, w.cols, rng);
    ThreadPool pool(2);
    for (CpuPath p : runnable_paths()) {
        SCOPED_TRACE(cpu::cpu_path_name(p));
        std::vector<float> alone(size_t(kMaxN * w.rows));
        for (int64_t c = 0; c < kMaxN; ++c) {
            cpu::matmul_on_path(p, w.view(), x.data() + c * w.cols, alone.data() + c * w.rows, 1,
                                pool);
        }
        for (int64_t n = 2; n <= kMaxN; ++n) {
            std::vector<float> y(size_t(n * w.rows));
            cpu::matmul_on_path(p, w.view(), x.data(), y.data(), n, pool);
            for (int64_t o = 0; o < n * w.rows; ++o) {
                ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(o)]),
                          std::bit_cast<uint32_t>(alone[size_t(o)]))
                    << "n=" << n << " column " << o / w.rows << " row " << o % w.rows;
            }
        }
    }
}

// Prompt-sized batches: past the columns one tile takes (64 for the row-interleaved kernels,
// which keep a tile's transposed rows for them in groups of 8) and with a partial row tile,
// every path still matches the references, and a column keeps the bits it gets alone.
TEST_P(CpuMatmul, WideBatchesMatchAndKeepEachColumnsBits) {
    const TensorType t = GetParam();
    std::mt19937 rng(4242u + uint32_t(t));
    const Weights w = make_weights(t, 37, test_cols(t)[1], 0, rng);
    constexpr int64_t kN = 70;
    check_all_paths(w, kN, 2, rng);
    const std::vector<float> x = make_activations(kN, w.cols, rng);
    ThreadPool pool(2);
    for (CpuPath p : runnable_paths()) {
        SCOPED_TRACE(cpu::cpu_path_name(p));
        std::vector<float> y(size_t(kN * w.rows));
        cpu::matmul_on_path(p, w.view(), x.data(), y.data(), kN, pool);
        for (int64_t c : {0, 7, 8, 63, 64, 69}) {
            std::vector<float> alone(size_t(w.rows));
            cpu::matmul_on_path(p, w.view(), x.data() + c * w.cols, alone.data(), 1, pool);
            for (int64_t r = 0; r < w.rows; ++r) {
                ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(c * w.rows + r)]),
                          std::bit_cast<uint32_t>(alone[size_t(r)]))
                    << "column " << c << " row " << r;
            }
        }
    }
}

// Attention's scores: float rows of a head's length (up to 256 elements, the AVX-512 kernel
// then holds 16 rows in lanes for 8 or more columns) give each column the bits it gets alone,
// where a single column takes the column-pair kernel; past 256 elements the pairs run again.
TEST(CpuMatmulFloat, ShortRowsInLanesKeepEachColumnsBits) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        std::mt19937 rng(57u + uint32_t(t));
        ThreadPool pool(2);
        for (int64_t cols : {8, 64, 72, 128, 250, 256, 264}) {
            const Weights w = make_weights(t, 45, cols, 128, rng);
            for (int64_t n : {8, 9, 33}) {
                check_all_paths(w, n, 2, rng);
                const std::vector<float> x = make_activations(n, w.cols, rng);
                for (CpuPath p : runnable_paths()) {
                    SCOPED_TRACE(std::string(cpu::cpu_path_name(p)) + " " +
                                 std::string(tensor_type_name(t)) +
                                 " cols=" + std::to_string(cols) + " n=" + std::to_string(n));
                    std::vector<float> y(size_t(n * w.rows)), alone(size_t(w.rows));
                    cpu::matmul_on_path(p, w.view(), x.data(), y.data(), n, pool);
                    for (int64_t c = 0; c < n; ++c) {
                        cpu::matmul_on_path(p, w.view(), x.data() + c * w.cols, alone.data(), 1,
                                            pool);
                        for (int64_t r = 0; r < w.rows; ++r) {
                            ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(c * w.rows + r)]),
                                      std::bit_cast<uint32_t>(alone[size_t(r)]))
                                << "column " << c << " row " << r;
                        }
                    }
                }
            }
        }
    }
}

// Float rows extended by elements whose activations are zero give the same bits: attention's
// value product runs over a row as long as the batch's last position, with zero weights past
// each query's own, so without this a query's output would depend on how the batch was cut.
TEST(CpuMatmulFloat, ZeroExtendedRowsGiveTheSameBits) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        std::mt19937 rng(31u + uint32_t(t));
        ThreadPool pool(2);
        for (int64_t cols = 1; cols <= 40; ++cols) {
            const Weights w = make_weights(t, 5, 48, 0, rng);
            std::vector<float> x = make_activations(2, 48, rng);
            for (int64_t c = 0; c < 2; ++c) {
                std::fill(x.begin() + c * 48 + cols, x.begin() + (c + 1) * 48, 0.0f);
            }
            std::vector<float> compact(size_t(2 * cols));
            for (int64_t c = 0; c < 2; ++c) {
                std::copy_n(x.begin() + c * 48, cols, compact.begin() + c * cols);
            }
            for (CpuPath p : runnable_paths()) {
                SCOPED_TRACE(std::string(cpu::cpu_path_name(p)) + " " +
                             std::string(tensor_type_name(t)) + " cols=" + std::to_string(cols));
                auto short_rows = cpu::make_quant_matrix(t, w.bytes.data(), w.rows, cols, w.stride);
                ASSERT_TRUE(short_rows);
                std::vector<float> full(size_t(2 * w.rows)), part(size_t(2 * w.rows));
                cpu::matmul_on_path(p, w.view(), x.data(), full.data(), 2, pool);
                cpu::matmul_on_path(p, *short_rows, compact.data(), part.data(), 2, pool);
                for (size_t o = 0; o < full.size(); ++o) {
                    ASSERT_EQ(std::bit_cast<uint32_t>(full[o]), std::bit_cast<uint32_t>(part[o]))
                        << "output " << o;
                }
            }
        }
    }
}

// Several matrices, each on its own rows of one activation block (the routed experts of a
// batch), in one job: the same bits as matmul of each matrix on its rows.
TEST_P(CpuMatmul, SegmentsEqualMatmulOnEachSegment) {
    const TensorType t = GetParam();
    std::mt19937 rng(913u + uint32_t(t));
    const int64_t cols = test_cols(t)[1];
    std::vector<Weights> ws;
    for (int i = 0; i < 5; ++i) ws.push_back(make_weights(t, 9 + i, cols, 0, rng));
    const std::vector<int64_t> counts = {1, 3, 0, 2, 1};
    const int64_t rows = 7;
    const std::vector<float> x = make_activations(rows, cols, rng);
    ThreadPool pool(2);
    std::vector<std::vector<float>> got(ws.size()), want(ws.size());
    std::vector<cpu::MatmulSegment> segs;
    int64_t first = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
        got[i].assign(size_t(rows * ws[i].rows), -1.0f);
        want[i].assign(size_t(counts[i] * ws[i].rows), 0.0f);
        cpu::matmul(ws[i].view(), x.data() + first * cols, want[i].data(), counts[i], pool);
        segs.push_back({ws[i].view(), first, counts[i], got[i].data()});
        first += counts[i];
    }
    cpu::matmul_segments(segs, x.data(), rows, pool);
    for (size_t i = 0; i < ws.size(); ++i) {
        const int64_t f = segs[i].first;
        for (int64_t o = 0; o < counts[i] * ws[i].rows; ++o) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i][size_t(f * ws[i].rows + o)]),
                      std::bit_cast<uint32_t>(want[i][size_t(o)]))
                << "segment " << i << " output " << o;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CpuMatmul, ::testing::ValuesIn(kMatmulTypes),
                         [](const ::testing::TestParamInfo<TensorType>& p) {
                             return std::string(tensor_type_name(p.param));
                         });

// Every path's activation quantizer writes the reference's bytes: on random blocks, an all-zero
// block, blocks whose scaled values fall exactly on .5 (ties round to even), blocks whose largest
// magnitude appears with both signs (Q8_K takes the sign of the first), and blocks so small that
// the inverse scale overflows.
TEST(CpuActivationQuantizers, SameBytesAsTheReference) {
    constexpr int64_t n = 2048;  // 8 Q8_K blocks, 64 Q8_0 / Q8_1 blocks
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> x(n);
    for (auto& v : x) v = normal(rng) * 3.0f;
    std::fill(x.begin(), x.begin() + 256, 0.0f);                           // block 0: zeros
    for (int i = 256; i < 512; ++i) x[size_t(i)] = float(i % 64) - 31.5f;  // ties
    x[256 + 7] = 127.0f;
    x[256 + 200] = -127.0f;  // largest magnitude with both signs, the positive one first
    for (int i = 512; i < 768; ++i) x[size_t(i)] = 1e-39f * float(i % 7 - 3);  // subnormal
    for (int i = 768; i < 1024; ++i) x[size_t(i)] = float(i % 255 - 127);      // ties to ±127
    x[768 + 300 % 256] = -127.0f;
    for (TensorType act : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K}) {
        const size_t bytes = size_t(quant::quant_row_bytes(act, n).value());
        std::vector<uint8_t> want(bytes), got(bytes);
        quant::quantize_row_activations(act, x.data(), want.data(), n);
        for (CpuPath p : runnable_paths()) {
            std::fill(got.begin(), got.end(), uint8_t(0xa5));
            cpu::quantize_activations_on_path(p, act, x.data(), got.data(), n);
            for (size_t i = 0; i < bytes; ++i) {
                ASSERT_EQ(got[i], want[i])
                    << tensor_type_name(act) << " on " << cpu::cpu_path_name(p) << ", byte " << i;
            }
        }
    }
}

TEST(CpuMatmulShapes, EmptyShapes) {
    ThreadPool pool(2);
    std::mt19937 rng(3);
    const Weights w = make_weights(TensorType::Q8_0, 4, 64, 0, rng);
    std::vector<float> x(64, 1.0f), y(4, 42.0f);
    cpu::matmul(w.view(), x.data(), y.data(), 0, pool);  // no columns: nothing written
    EXPECT_EQ(y, std::vector<float>(4, 42.0f));
    const auto no_rows = cpu::make_quant_matrix(TensorType::Q8_0, w.bytes.data(), 0, 64);
    ASSERT_TRUE(no_rows.ok());
    cpu::matvec(*no_rows, x.data(), y.data(), pool);
    EXPECT_EQ(y, std::vector<float>(4, 42.0f));
    const auto no_cols = cpu::make_quant_matrix(TensorType::Q8_0, w.bytes.data(), 4, 0);
    ASSERT_TRUE(no_cols.ok());
    cpu::matvec(*no_cols, x.data(), y.data(), pool);
    EXPECT_EQ(y, std::vector<float>(4, 0.0f));
}

TEST(CpuMatmulShapes, BadViewsAreErrors) {
    alignas(64) static uint8_t buffer[4096] = {};
    const auto q8k = cpu::make_quant_matrix(TensorType::Q8_K, buffer, 2, 256);
    ASSERT_FALSE(q8k.ok());
    EXPECT_NE(q8k.error().message.find("Q8_K"), std::string::npos);
    const auto partial = cpu::make_quant_matrix(TensorType::Q4_K, buffer, 2, 300);
    ASSERT_FALSE(partial.ok());
    EXPECT_NE(partial.error().message.find("300"), std::string::npos);
    EXPECT_FALSE(cpu::make_quant_matrix(TensorType::Q8_0, buffer, 2, 64, 60).ok());  // stride < 68
    EXPECT_FALSE(cpu::make_quant_matrix(TensorType::F32, buffer + 1, 2, 4).ok());    // misaligned
    EXPECT_FALSE(cpu::make_quant_matrix(TensorType::IQ2_XXS, buffer, 2, 256).ok());
    const auto ok = cpu::make_quant_matrix(TensorType::Q8_0, buffer, 2, 64);
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(ok->row_stride, 68u);
}

TEST(CpuPathSelection, ResolvesNamesAndFallsBack) {
    const cpu::CpuFeatures none{};
    const cpu::CpuFeatures avx2_only{true, false};
    const cpu::CpuFeatures all{true, true};
    std::string warning;
    EXPECT_EQ(cpu::resolve_cpu_path(nullptr, all, &warning), CpuPath::avx512);
    EXPECT_EQ(cpu::resolve_cpu_path("", avx2_only, &warning), CpuPath::avx2);
    EXPECT_TRUE(warning.empty());
    EXPECT_EQ(cpu::resolve_cpu_path("scalar", all, &warning), CpuPath::scalar);
    EXPECT_EQ(cpu::resolve_cpu_path("avx2", all, &warning), CpuPath::avx2);
    EXPECT_TRUE(warning.empty());
    EXPECT_EQ(cpu::resolve_cpu_path("avx512", avx2_only, &warning), CpuPath::avx2);
    EXPECT_NE(warning.find("lacks"), std::string::npos);
    warning.clear();
    EXPECT_EQ(cpu::resolve_cpu_path("avx2", none, &warning), CpuPath::scalar);
    EXPECT_NE(warning.find("using scalar"), std::string::npos);
    warning.clear();
    EXPECT_EQ(cpu::resolve_cpu_path("neon", all, &warning), CpuPath::avx512);
    EXPECT_NE(warning.find("not a CPU path"), std::string::npos);
    for (CpuPath p : cpu::kAllCpuPaths) EXPECT_EQ(cpu::parse_cpu_path(cpu::cpu_path_name(p)), p);
}

TEST(CpuPathSelection, SetPathRefusesWhatTheCpuLacks) {
    const CpuPath before = cpu::active_cpu_path();
    const cpu::CpuFeatures f = cpu::detect_cpu_features();
    for (CpuPath p : cpu::kAllCpuPaths) {
        const Result<void> r = cpu::set_cpu_path(p);
        EXPECT_EQ(r.ok(), cpu::cpu_path_runs_on(p, f)) << cpu::cpu_path_name(p);
        if (r.ok()) {
            EXPECT_EQ(cpu::active_cpu_path(), p);
        } else {
            EXPECT_NE(r.error().message.find(cpu::cpu_path_name(p)), std::string::npos);
        }
    }
    ASSERT_TRUE(cpu::set_cpu_path(before).ok());
}

TEST(CpuPathSelection, KernelNamesSayWhichKernelRuns) {
    const cpu::CpuFeatures f = cpu::detect_cpu_features();
    EXPECT_EQ(cpu::matmul_kernel_name(CpuPath::scalar, TensorType::Q4_K), "scalar");
    for (CpuPath p : {CpuPath::avx2, CpuPath::avx512}) {
        const bool runs = cpu::cpu_path_runs_on(p, f);
        for (TensorType t : {TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
                             TensorType::Q6_K}) {
            EXPECT_EQ(cpu::matmul_kernel_name(p, t), runs ? cpu::cpu_path_name(p) : "scalar");
        }
    }
}

}  // namespace
}  // namespace strata
