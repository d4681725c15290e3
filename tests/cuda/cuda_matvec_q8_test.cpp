// The int8-activation decode matvec (backend/cuda/matvec_q8.h) against double-precision
// references built from the quant module.
//
// On the host (no GPU needed): the quantizer's per-element arithmetic (matvec_q8_act.h), run
// serially, gives quant::quantize_row_activations's bytes exactly, for Q8_0, Q8_1 and Q8_K, on
// random data and on the awkward cases (ties on halves, equal magnitudes of both signs, zero
// blocks, tiny values).
//
// On the GPU (skipped, with the reason, where there is none): the device quantizer's scratch holds
// the CPU's codes and scales bit for bit; and the matvec equals sum_c w_c x'_c, where w is
// quant::dequantize_row of the weights and x' the dequantized CPU activation blocks (the same
// integers and scales the kernel multiplies), within fp32 summation-order error:
// |y - ref| <= 1e-5 * sum_c |w_c x'_c| + 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/matvec_q8_act.h"
#include "cuda/device_buffers.h"
#include "gpu/gpu.h"
#include "quant/quant.h"
#include "test_support.h"

namespace strata {
namespace {

using cuda::kMaxQ8Tokens;

// The kernels launch as a backend with the default settings launches them.
const Tuning kTuning;

constexpr TensorType kTypes[] = {
    TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0,  TensorType::Q4_0,
    TensorType::Q5_K, TensorType::Q5_0, TensorType::Q4_1,  TensorType::Q5_1,
    TensorType::Q3_K, TensorType::Q2_K, TensorType::MXFP4,
};

size_t row_bytes(TensorType t, int64_t cols) {
    return quant::quant_row_bytes(t, cols).value();
}

// Gaussian values with a few outliers, a zero stretch, exact halves of the step and equal
// magnitudes of both signs, so every rounding branch of the quantizers is taken.
std::vector<float> activations(int64_t count, std::mt19937& rng) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(count));
    for (auto& v : x) v = g(rng);
    for (int64_t i = 0; i < count; i += 97) x[size_t(i)] *= 20.0f;
    for (int64_t i = 64; i < std::min<int64_t>(count, 96); ++i) x[size_t(i)] = 0.0f;
    if (count >= 512) {
        // Block 2 (of 32) and block 1 (of 256): values on the halves of the code grid.
        for (int j = 0; j < 32; ++j) x[size_t(96 + j)] = 0.5f * float(j - 16) * (127.0f / 254.0f);
        x[256] = -3.0f;
        x[300] = 3.0f;  // same magnitude, later: Q8_K must take -3 (the first) as the max
        for (int j = 257; j < 290; ++j) x[size_t(j)] = float(j - 273) * (3.0f / 127.0f) * 0.5f;
        x[400] = 1e-38f;  // tiny block neighbours
    }
    return x;
}

// ---- host: the quantizer arithmetic -----------------------------------------------------------

TEST(CudaMatvecQ8Host, ActivationQuantizerMatchesCpuBytes) {
    std::mt19937 rng(7);
    const int64_t n = 4096;
    std::vector<float> x = activations(n, rng);
    // A block of tiny values (127 / amax overflows to infinity: the division branch).
    for (int j = 0; j < 32; ++j) x[size_t(1024 + j)] = float(j + 1) * 1e-39f;

    {  // Q8_0 and Q8_1
        std::vector<quant::BlockQ8_0> q0(size_t(n / 32));
        std::vector<quant::BlockQ8_1> q1(size_t(n / 32));
        quant::quantize_row_activations(TensorType::Q8_0, x.data(), q0.data(), n);
        quant::quantize_row_activations(TensorType::Q8_1, x.data(), q1.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) {
            int8_t q[32];
            float d, s;
            cuda::q8act::quantize_q8_block(x.data() + 32 * b, q, &d, &s);
            ASSERT_EQ(std::memcmp(q, q0[size_t(b)].qs, 32), 0) << "Q8_0 block " << b;
            ASSERT_EQ(std::memcmp(q, q1[size_t(b)].qs, 32), 0) << "Q8_1 block " << b;
            EXPECT_EQ(quant::fp32_to_fp16(d), q0[size_t(b)].d) << "block " << b;
            EXPECT_EQ(quant::fp32_to_fp16(d), q1[size_t(b)].d) << "block " << b;
            EXPECT_EQ(quant::fp32_to_fp16(s), q1[size_t(b)].s) << "block " << b;
        }
    }
    {  // Q8_K
        std::vector<quant::BlockQ8_K> qk(size_t(n / 256));
        quant::quantize_row_activations(TensorType::Q8_K, x.data(), qk.data(), n);
        for (int64_t b = 0; b < n / 256; ++b) {
            quant::BlockQ8_K mine{};
            cuda::q8act::quantize_q8k_block(x.data() + 256 * b, mine.qs, &mine.d, mine.bsums);
            EXPECT_EQ(std::memcmp(&mine, &qk[size_t(b)], sizeof mine), 0) << "Q8_K block " << b;
        }
    }
}

// ---- GPU ----------------------------------------------------------------------------------------

TEST(CudaMatvecQ8, DeviceQuantizerMatchesCpuBytes) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(11);
    const int64_t cols = 4096;
    for (const TensorType at : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K}) {
        for (int n = 1; n <= kMaxQ8Tokens; ++n) {
            const std::vector<float> x = activations(n * cols, rng);
            gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
            gpu::DeviceBuffer ds =
                gpu::DeviceBuffer::allocate(cuda::matvec_q8_scratch_bytes(cols)).value();
            cuda::q8detail::launch_quantize_activations(at,
                                                        reinterpret_cast<const float*>(dx.data()),
                                                        n, cols, ds.data(), nullptr, kTuning.pdl);
            const auto l = cuda::q8detail::scratch_layout(at, cols, n);
            const auto bytes = test::download<uint8_t>(ds.data(), l.end);
            for (int t = 0; t < n; ++t) {
                const float* xt = x.data() + t * cols;
                const int8_t* codes = reinterpret_cast<const int8_t*>(bytes.data()) + t * cols;
                if (at == TensorType::Q8_K) {
                    std::vector<quant::BlockQ8_K> q(size_t(cols / 256));
                    quant::quantize_row_activations(at, xt, q.data(), cols);
                    const auto* d = reinterpret_cast<const float*>(bytes.data() + l.scales);
                    const auto* bs = reinterpret_cast<const int16_t*>(bytes.data() + l.bsums);
                    for (int64_t b = 0; b < cols / 256; ++b) {
                        const auto& cpu = q[size_t(b)];
                        ASSERT_EQ(std::memcmp(codes + 256 * b, cpu.qs, 256), 0)
                            << "t " << t << " b " << b;
                        ASSERT_EQ(std::memcmp(bs + t * cols / 16 + 16 * b, cpu.bsums, 32), 0);
                        ASSERT_EQ(std::memcmp(d + t * cols / 256 + b, &cpu.d, 4), 0);
                    }
                } else {
                    std::vector<quant::BlockQ8_1> q1(size_t(cols / 32));
                    std::vector<quant::BlockQ8_0> q0(size_t(cols / 32));
                    quant::quantize_row_activations(TensorType::Q8_1, xt, q1.data(), cols);
                    quant::quantize_row_activations(TensorType::Q8_0, xt, q0.data(), cols);
                    const auto* ds2 = reinterpret_cast<const float*>(bytes.data() + l.scales);
                    for (int64_t b = 0; b < cols / 32; ++b) {
                        ASSERT_EQ(std::memcmp(codes + 32 * b, q0[size_t(b)].qs, 32), 0)
                            << "t " << t << " b " << b;
                        const float d = ds2[2 * (t * cols / 32 + b)];
                        const float s = ds2[2 * (t * cols / 32 + b) + 1];
                        ASSERT_EQ(quant::fp32_to_fp16(d), q0[size_t(b)].d);
                        if (at == TensorType::Q8_1) {
                            ASSERT_EQ(quant::fp32_to_fp16(s), q1[size_t(b)].s);
                            ASSERT_EQ(quant::fp16_to_fp32(q1[size_t(b)].s), s);
                        } else {
                            int sum = 0;
                            for (int j = 0; j < 32; ++j) sum += q0[size_t(b)].qs[j];
                            ASSERT_EQ(float(sum), s);
                        }
                    }
                }
            }
        }
    }
}

// The RMS norm that quantizes its own output (elementwise.h Q8Rows, which saves a decode step
// the quantizer's launch) writes the quantizer's bytes exactly: the norm's float rows are those
// of the plain norm, and the scratch holds what launch_quantize_activations makes of them. With
// and without the fused residual add, for widths that give one, several and a partial round of
// blocks per warp.
TEST(CudaMatvecQ8, NormQuantizesAsTheQuantizer) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(12);
    for (const TensorType at : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K}) {
        for (const int64_t d : {int64_t(256), int64_t(2304), int64_t(4096), int64_t(8448)}) {
            for (const int n : {1, kMaxQ8Tokens}) {
                for (const bool with_add : {false, true}) {
                    SCOPED_TRACE(std::string(tensor_type_name(at)) + " d " + std::to_string(d) +
                                 " n " + std::to_string(n) + (with_add ? " add" : ""));
                    const std::vector<float> h = activations(n * d, rng);
                    const std::vector<float> x = activations(n * d, rng);
                    std::vector<float> w = activations(d, rng);
                    gpu::DeviceBuffer dh = test::upload(h.data(), h.size() * 4);
                    gpu::DeviceBuffer dh2 = test::upload(h.data(), h.size() * 4);
                    gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
                    gpu::DeviceBuffer dw = test::upload(w.data(), w.size() * 4);
                    gpu::DeviceBuffer fused = test::upload(h.data(), h.size() * 4);
                    gpu::DeviceBuffer plain = test::upload(h.data(), h.size() * 4);
                    const size_t sb = cuda::matvec_q8_scratch_bytes(d);
                    gpu::DeviceBuffer qf = gpu::DeviceBuffer::allocate(sb).value();
                    gpu::DeviceBuffer qp = gpu::DeviceBuffer::allocate(sb).value();
                    const auto f = [](const gpu::DeviceBuffer& b) {
                        return reinterpret_cast<float*>(b.data());
                    };
                    const float eps = 1e-5f;
                    if (with_add) {
                        cuda::add_rms_norm(f(dh), f(dx), f(dw), f(fused), n, d, eps, nullptr,
                                           kTuning.pdl, {at, qf.data()});
                        cuda::add_rms_norm(f(dh2), f(dx), f(dw), f(plain), n, d, eps, nullptr,
                                           kTuning.pdl);
                    } else {
                        cuda::rms_norm(f(dh), f(dw), f(fused), n, d, eps, nullptr, kTuning.pdl,
                                       {at, qf.data()});
                        cuda::rms_norm(f(dh2), f(dw), f(plain), n, d, eps, nullptr, kTuning.pdl);
                    }
                    cuda::q8detail::launch_quantize_activations(at, f(plain), n, d, qp.data(),
                                                                nullptr, kTuning.pdl);
                    const auto yf = test::download<float>(fused.data(), size_t(n * d));
                    const auto yp = test::download<float>(plain.data(), size_t(n * d));
                    ASSERT_EQ(std::memcmp(yf.data(), yp.data(), yf.size() * 4), 0);
                    const size_t used = cuda::q8detail::scratch_layout(at, d, n).end;
                    const auto bf = test::download<uint8_t>(qf.data(), used);
                    const auto bp = test::download<uint8_t>(qp.data(), used);
                    // The layout's alignment padding is never written: compare the used parts.
                    const auto l = cuda::q8detail::scratch_layout(at, d, n);
                    ASSERT_EQ(std::memcmp(bf.data(), bp.data(), size_t(n * d)), 0) << "codes";
                    const size_t scale_bytes =
                        at == TensorType::Q8_K ? size_t(n * d / 256) * 4 : size_t(n * d / 32) * 8;
                    ASSERT_EQ(std::memcmp(bf.data() + l.scales, bp.data() + l.scales, scale_bytes),
                              0)
                        << "scales";
                    if (at == TensorType::Q8_K) {
                        ASSERT_EQ(std::memcmp(bf.data() + l.bsums, bp.data() + l.bsums,
                                              size_t(n * d / 16) * 2),
                                  0)
                            << "sums";
                    }
                }
            }
        }
    }
}

// Weights: `distinct` random rows through quant::quantize_row, row r a copy of r % distinct
// (a prime count, so neighbouring rows differ), at `offset` bytes into the buffer, rows
// `stride` bytes apart.
struct Weights {
    TensorType type;
    int64_t rows, cols;
    size_t stride, offset;
    std::vector<uint8_t> bytes;
    std::vector<std::vector<float>> ref;  // dequantized distinct rows
    int64_t distinct;
    std::vector<std::vector<float>> mins = {};  // Q4_1 / Q5_1: the block minima of each row
};

Weights make_weights(TensorType t, int64_t cols, int64_t rows, size_t pad, size_t offset,
                     std::mt19937& rng) {
    Weights w{t, rows, cols, row_bytes(t, cols) + pad, offset, {}, {}, std::min<int64_t>(rows, 67)};
    w.bytes.assign(offset + size_t(rows) * w.stride, 0);
    std::normal_distribution<float> g(0.0f, 0.02f);
    std::vector<float> f(static_cast<size_t>(cols));
    std::vector<uint64_t> tmp(row_bytes(t, cols) / 8 + 1);
    for (int64_t r = 0; r < w.distinct; ++r) {
        const float shift = (r % 3 == 0) ? 0.01f : 0.0f;  // biased rows: large K-quant minima
        for (auto& v : f) v = g(rng) + shift;
        quant::quantize_row(t, f.data(), tmp.data(), cols);
        std::vector<float> deq(static_cast<size_t>(cols));
        quant::dequantize_row(t, tmp.data(), deq.data(), cols);
        if (t == TensorType::Q4_1 || t == TensorType::Q5_1) {
            const size_t bb = row_bytes(t, 32);
            const auto* raw = reinterpret_cast<const uint8_t*>(tmp.data());
            std::vector<float> m(size_t(cols / 32));
            for (int64_t b = 0; b < cols / 32; ++b) {
                uint16_t h;
                std::memcpy(&h, raw + size_t(b) * bb + 2, 2);
                m[size_t(b)] = quant::fp16_to_fp32(h);
            }
            w.mins.push_back(std::move(m));
        }
        w.ref.push_back(std::move(deq));
        for (int64_t rr = r; rr < rows; rr += w.distinct)
            std::memcpy(w.bytes.data() + offset + size_t(rr) * w.stride, tmp.data(),
                        row_bytes(t, cols));
    }
    return w;
}

// x' = the dequantized CPU activation blocks of x (n rows). For Q8_1 also, per token and
// block, s - d * sum(q): ggml's Q4_1 / Q5_1 dot product applies the weight minimum to the stored
// fp16 s, not to the exact d * sum(q), so the reference adds m * (that difference).
std::vector<double> dequantized_activations(TensorType wt, const std::vector<float>& x, int n,
                                            int64_t cols, std::vector<double>* s_error) {
    const TensorType at = quant::vec_dot_type(wt);
    std::vector<uint64_t> q(row_bytes(at, cols) / 8 + 1);
    std::vector<float> f(static_cast<size_t>(cols));
    std::vector<double> out(size_t(n * cols));
    for (int t = 0; t < n; ++t) {
        quant::quantize_row_activations(at, x.data() + t * cols, q.data(), cols);
        quant::dequantize_row(at, q.data(), f.data(), cols);
        for (int64_t c = 0; c < cols; ++c) out[size_t(t * cols + c)] = f[size_t(c)];
        if (at == TensorType::Q8_1) {
            const auto* blocks = reinterpret_cast<const quant::BlockQ8_1*>(q.data());
            for (int64_t b = 0; b < cols / 32; ++b) {
                int sum = 0;
                for (int j = 0; j < 32; ++j) sum += blocks[b].qs[j];
                s_error->push_back(double(quant::fp16_to_fp32(blocks[b].s)) -
                                   double(quant::fp16_to_fp32(blocks[b].d)) * sum);
            }
        }
    }
    return out;
}

void check_matvec(const Weights& w, int n, bool with_bias, std::mt19937& rng) {
    SCOPED_TRACE(testing::Message()
                 << tensor_type_name(w.type) << " " << w.cols << " x " << w.rows << " n " << n
                 << " stride " << w.stride << " offset " << w.offset);
    const std::vector<float> x = activations(n * w.cols, rng);
    std::vector<double> s_error;
    const std::vector<double> xq = dequantized_activations(w.type, x, n, w.cols, &s_error);
    std::vector<float> bias(size_t(w.rows));
    for (auto& b : bias) b = float(rng() % 1000) * 1e-3f - 0.5f;

    gpu::DeviceBuffer dw = test::upload(w.bytes.data(), w.bytes.size());
    gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
    gpu::DeviceBuffer db = test::upload(bias.data(), bias.size() * 4);
    gpu::DeviceBuffer ds =
        gpu::DeviceBuffer::allocate(cuda::matvec_q8_scratch_bytes(w.cols)).value();
    gpu::DeviceBuffer dy = gpu::DeviceBuffer::allocate(size_t(n * w.rows) * 4).value();
    cuda::WeightRows wr;
    wr.type = w.type;
    wr.data = reinterpret_cast<const uint8_t*>(dw.data()) + w.offset;
    wr.row_stride = w.stride;
    wr.rows = w.rows;
    wr.cols = w.cols;
    cuda::launch_matvec_q8(wr, reinterpret_cast<const float*>(dx.data()), n,
                           with_bias ? reinterpret_cast<const float*>(db.data()) : nullptr,
                           reinterpret_cast<float*>(dy.data()), ds.data(), nullptr, kTuning);
    const std::vector<float> y = test::download<float>(dy.data(), size_t(n * w.rows));

    // The reference per distinct row and token, then every row checked.
    std::vector<double> ref(size_t(w.distinct * n)), mag(size_t(w.distinct * n));
    for (int64_t r = 0; r < w.distinct; ++r) {
        for (int t = 0; t < n; ++t) {
            double s = 0, m = 0;
            for (int64_t c = 0; c < w.cols; ++c) {
                const double p = double(w.ref[size_t(r)][size_t(c)]) * xq[size_t(t * w.cols + c)];
                s += p;
                m += std::fabs(p);
            }
            if (!w.mins.empty()) {
                for (int64_t b = 0; b < w.cols / 32; ++b) {
                    const double e =
                        w.mins[size_t(r)][size_t(b)] * s_error[size_t(t * (w.cols / 32) + b)];
                    s += e;
                    m += std::fabs(e);
                }
            }
            ref[size_t(r * n + t)] = s;
            mag[size_t(r * n + t)] = m;
        }
    }
    int failures = 0;
    for (int64_t r = 0; r < w.rows && failures < 5; ++r) {
        for (int t = 0; t < n; ++t) {
            const int64_t k = (r % w.distinct) * n + t;
            const double want = ref[size_t(k)] + (with_bias ? bias[size_t(r)] : 0.0);
            const double bound = 1e-5 * mag[size_t(k)] + 1e-6 + (with_bias ? 1e-7 : 0.0);
            const double got = y[size_t(t * w.rows + r)];
            if (!(std::fabs(got - want) <= bound)) {
                ADD_FAILURE() << "row " << r << " token " << t << ": got " << got << ", want "
                              << want << " (bound " << bound << ")";
                ++failures;
            }
        }
    }
}

TEST(CudaMatvecQ8, MatchesReferenceOnAllShapes) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(1);
    struct Shape {
        int64_t cols, rows;
    };
    const Shape shapes[] = {{256, 1000}, {4096, 4096 + 32}, {14336, 512}};
    for (const TensorType t : kTypes) {
        ASSERT_TRUE(cuda::matvec_q8_supports(t)) << tensor_type_name(t);
        for (const Shape& s : shapes) {
            const Weights w = make_weights(t, s.cols, s.rows, 0, 0, rng);
            for (int n = 1; n <= kMaxQ8Tokens; ++n) check_matvec(w, n, n == 3, rng);
        }
    }
}

// q, k and v in one launch (launch_matvec_q8_parts): each part's output is bit for bit its own
// launch's (a row's sum does not depend on the other rows of the launch), biases included; the
// parts' row counts are not multiples of the rows a warp takes, so a warp straddles two parts.
TEST(CudaMatvecQ8, PartsInOneLaunchGiveEachPartsOwnResult) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(3);
    const int64_t cols = 2048;
    const int64_t part_rows[] = {2048 + 1, 512, 512 + 33};
    for (const TensorType t : kTypes) {
        SCOPED_TRACE(tensor_type_name(t));
        std::vector<Weights> ws;
        std::vector<gpu::DeviceBuffer> dws, dbs, dys;
        std::vector<cuda::WeightRows> rows;
        std::vector<const float*> biases;
        std::vector<float*> ys;
        for (int i = 0; i < 3; ++i) {
            ws.push_back(make_weights(t, cols, part_rows[i], 0, 0, rng));
            dws.push_back(test::upload(ws.back().bytes.data(), ws.back().bytes.size()));
            std::vector<float> b(size_t(part_rows[i]));
            for (auto& v : b) v = float(rng() % 1000) * 1e-3f - 0.5f;
            dbs.push_back(test::upload(b.data(), b.size() * 4));
            dys.push_back(
                gpu::DeviceBuffer::allocate(size_t(kMaxQ8Tokens * part_rows[i]) * 4).value());
            cuda::WeightRows wr;
            wr.type = t;
            wr.data = reinterpret_cast<const uint8_t*>(dws.back().data());
            wr.row_stride = ws.back().stride;
            wr.rows = part_rows[i];
            wr.cols = cols;
            rows.push_back(wr);
            biases.push_back(i == 1 ? nullptr : reinterpret_cast<const float*>(dbs.back().data()));
            ys.push_back(reinterpret_cast<float*>(dys.back().data()));
        }
        gpu::DeviceBuffer ds =
            gpu::DeviceBuffer::allocate(cuda::matvec_q8_scratch_bytes(cols)).value();
        gpu::DeviceBuffer dy1 =
            gpu::DeviceBuffer::allocate(size_t(kMaxQ8Tokens * part_rows[0]) * 4).value();
        for (int n = 1; n <= kMaxQ8Tokens; ++n) {
            SCOPED_TRACE(testing::Message() << "n " << n);
            const std::vector<float> x = activations(n * cols, rng);
            gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
            cuda::launch_quantize_for(t, reinterpret_cast<const float*>(dx.data()), n, cols,
                                      ds.data(), nullptr, kTuning.pdl);
            cuda::launch_matvec_q8_parts(rows, n, biases, ys, ds.data(), nullptr, kTuning);
            for (int i = 0; i < 3; ++i) {
                const std::vector<float> together =
                    test::download<float>(ys[size_t(i)], size_t(n * part_rows[i]));
                cuda::launch_matvec_q8_quantized(rows[size_t(i)], n, biases[size_t(i)],
                                                 reinterpret_cast<float*>(dy1.data()), ds.data(),
                                                 nullptr, kTuning);
                const std::vector<float> alone =
                    test::download<float>(dy1.data(), size_t(n * part_rows[i]));
                ASSERT_EQ(0, std::memcmp(together.data(), alone.data(), alone.size() * 4))
                    << "part " << i;
            }
        }
    }
}

// Rows at a 2-byte offset and with a stride that is not a multiple of 16 (or 4): the blocks of
// Q4_K / Q5_K lose their 16-byte alignment and the kernels take the realigning loads.
TEST(CudaMatvecQ8, MisalignedRows) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(2);
    for (const TensorType t : kTypes) {
        const Weights w = make_weights(t, 512, 300, 6, 2, rng);
        for (int n = 1; n <= kMaxQ8Tokens; ++n) check_matvec(w, n, n == 2, rng);
    }
}

TEST(CudaMatvecQ8, ScratchAndSupport) {
    EXPECT_FALSE(cuda::matvec_q8_supports(TensorType::F32));
    EXPECT_FALSE(cuda::matvec_q8_supports(TensorType::F16));
    for (const TensorType t : kTypes) EXPECT_TRUE(cuda::matvec_q8_supports(t));
    for (const int64_t cols : {256, 4096, 14336}) {
        for (const TensorType at : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K}) {
            EXPECT_LE(cuda::q8detail::scratch_layout(at, cols, kMaxQ8Tokens).end,
                      cuda::matvec_q8_scratch_bytes(cols));
        }
    }
}

}  // namespace
}  // namespace strata
