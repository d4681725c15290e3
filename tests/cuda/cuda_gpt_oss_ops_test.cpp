// gpt-oss' mixture-of-experts pieces on the GPU against scalar references on fresh random data:
//   - routing by the top k logits with a softmax over those k alone (moe_route.h,
//     RouteGating::SoftmaxOfChosen), including negative logits and ties;
//   - the clamped SwiGLU with per-expert biases after a GEMM (elementwise.h, expert_glu) and the
//     down projection's per-expert bias (add_expert_bias);
//   - the routed experts' FFNs with biases and the clamped SwiGLU, slot by slot on the int8
//     matvec (Matmul::expert_ffn) and grouped on the int8 tensor-core GEMM
//     (Matmul::expert_ffn_grouped), and one expert's gate and up (Matmul::swiglu) for one token
//     (the fused matvec) and for a batch (two products, then the activation), MXFP4 included.
// Values are spread so that about half of the gate and up products pass the clamp (limit 7).
//
// Bounds. The FFN's products see the activations the CPU sees (x quantized as
// quant::quantize_row_activations does for the weight's dot-product type); the reference takes
// those activations and the dequantized weights exactly (double), so the GPU differs by its fp32
// sums: (cols + 2) 2^-24 sum |w x| per output, and the activation moves that by at most a factor
// 1 + alpha * limit (its derivative's bound). The down projection is checked against the GPU's
// own h (quantized on the host the same way), so its bound is the same kind. A missing or
// doubled bias, a wrong expert's bias, an unclamped value or silu in place of the clamped form
// is off by far more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/mmq.h"
#include "backend/cuda/moe_route.h"
#include "backend/cuda/quant_matmul.h"
#include "cuda/device_buffers.h"
#include "gpu/gpu.h"
#include "quant/quant.h"
#include "test_support.h"

namespace strata {
namespace {

constexpr float kAlpha = 1.702f, kLimit = 7.0f;
constexpr double kU = 0x1p-24;
const cuda::Glu kOai{true, kAlpha, kLimit};

double glu_ref(bool oai, double g, double u) {
    if (!oai) return g / (1.0 + std::exp(-g)) * u;
    g = std::min(g, double(kLimit));
    u = std::clamp(u, -double(kLimit), double(kLimit));
    return g / (1.0 + std::exp(-double(kAlpha) * g)) * (u + 1.0);
}

std::vector<float> randn(size_t n, float sigma, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    return x;
}

// ---- routing -----------------------------------------------------------------------------------

TEST(CudaGptOssRoute, TopKLogitsThenSoftmaxOfThoseK) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(21);
    const int64_t n = 29;
    for (const int n_expert : {4, 32, 128, 1024}) {
        for (const int k : {1, 2, 4, 32}) {
            if (k > n_expert) continue;
            for (const bool norm : {false, true}) {
                SCOPED_TRACE(std::to_string(n_expert) + " experts, k " + std::to_string(k));
                // Distinct logits 0.013 apart around -3 (mostly negative, below the -1 a
                // probability mark would use), token 0 with a tie at the top, token 1 with a
                // tie at the k-th place.
                std::vector<float> logits;
                std::vector<int> order(static_cast<size_t>(n_expert));
                for (int64_t t = 0; t < n; ++t) {
                    std::iota(order.begin(), order.end(), 0);
                    std::shuffle(order.begin(), order.end(), rng);
                    for (int i = 0; i < n_expert; ++i) {
                        logits.push_back(0.013f * float(order[size_t(i)]) - 3.0f);
                    }
                }
                if (n_expert >= 3) logits[1] = logits[2] = 20.0f;
                if (n_expert > k) {
                    // token 1: experts n_expert - 1 and 0 tie just below the top k - 1
                    float* l1 = &logits[size_t(n_expert)];
                    for (int i = 0; i < n_expert; ++i) l1[i] = -5.0f - 0.01f * float(i);
                    for (int j = 1; j < k; ++j) l1[j] = 4.0f - 0.1f * float(j);
                    l1[0] = l1[n_expert - 1] = 2.0f;
                }
                const gpu::DeviceBuffer dl =
                    test::upload(logits.data(), logits.size() * sizeof(float));
                const gpu::DeviceBuffer dc =
                    gpu::DeviceBuffer::allocate(sizeof(int32_t) * size_t(n * k)).value();
                const gpu::DeviceBuffer dw =
                    gpu::DeviceBuffer::allocate(sizeof(float) * size_t(n * k)).value();
                cuda::RouteSpec spec;
                spec.gating = cuda::RouteGating::SoftmaxOfChosen;
                spec.norm_weights = norm;
                cuda::route_top_k(reinterpret_cast<const float*>(dl.data()), n, n_expert, k, spec,
                                  reinterpret_cast<int32_t*>(dc.data()),
                                  reinterpret_cast<float*>(dw.data()), nullptr);
                const auto got_c = test::download<int32_t>(dc.data(), size_t(n * k));
                const auto got_w = test::download<float>(dw.data(), size_t(n * k));
                for (int64_t t = 0; t < n; ++t) {
                    const float* l = &logits[size_t(t * n_expert)];
                    std::vector<int> ids(static_cast<size_t>(n_expert));
                    std::iota(ids.begin(), ids.end(), 0);
                    std::stable_sort(ids.begin(), ids.end(),
                                     [&](int a, int b) { return l[a] > l[b]; });
                    double sum = 0;
                    for (int j = 0; j < k; ++j)
                        sum += std::exp(double(l[ids[size_t(j)]] - l[ids[0]]));
                    for (int j = 0; j < k; ++j) {
                        ASSERT_EQ(got_c[size_t(t * k + j)], ids[size_t(j)])
                            << "token " << t << " choice " << j;
                        const double w = std::exp(double(l[ids[size_t(j)]] - l[ids[0]])) / sum;
                        EXPECT_NEAR(got_w[size_t(t * k + j)], w, 1e-6 * w + 1e-30)
                            << "token " << t << " choice " << j;
                    }
                }
            }
        }
    }
}

// ---- the activation and the biases after a GEMM -------------------------------------------------

TEST(CudaGptOssGlu, ClampedSwigluWithEachSlotsExpertBiases) {
    STRATA_REQUIRE_GPU();
    std::mt19937 rng(4);
    const int64_t rows = 1000, slots = 37, d = 700;  // rows and d: no multiple of a block
    const int n_expert = 5;
    for (const bool with_ids : {false, true}) {
        for (const bool oai : {false, true}) {
            SCOPED_TRACE(std::string(oai ? "oai" : "silu") + (with_ids ? " ids" : ""));
            const std::vector<float> h = randn(size_t(rows * slots), 8.0f, rng),
                                     u = randn(size_t(rows * slots), 8.0f, rng),
                                     gb = randn(size_t(rows * n_expert), 2.0f, rng),
                                     ub = randn(size_t(rows * n_expert), 2.0f, rng),
                                     db = randn(size_t(d * n_expert), 2.0f, rng),
                                     y = randn(size_t(d * slots), 1.0f, rng);
            std::vector<int32_t> ids(static_cast<size_t>(slots));
            for (int64_t s = 0; s < slots; ++s) ids[size_t(s)] = int32_t((s * 3) % n_expert);
            const gpu::DeviceBuffer dh = test::upload(h.data(), h.size() * 4),
                                    du = test::upload(u.data(), u.size() * 4),
                                    dgb = test::upload(gb.data(), gb.size() * 4),
                                    dub = test::upload(ub.data(), ub.size() * 4),
                                    ddb = test::upload(db.data(), db.size() * 4),
                                    dy = test::upload(y.data(), y.size() * 4),
                                    dids = test::upload(ids.data(), ids.size() * 4);
            cuda::ExpertBiases b;
            b.gate = reinterpret_cast<const float*>(dgb.data());
            b.up = reinterpret_cast<const float*>(dub.data());
            b.gate_stride = b.up_stride = rows;
            const auto* pids = with_ids ? reinterpret_cast<const int32_t*>(dids.data()) : nullptr;
            cuda::expert_glu(reinterpret_cast<float*>(dh.data()),
                             reinterpret_cast<const float*>(du.data()), rows, slots, pids, b,
                             oai ? kOai : cuda::Glu{}, nullptr);
            cuda::add_expert_bias(reinterpret_cast<float*>(dy.data()), d, slots, pids,
                                  reinterpret_cast<const float*>(ddb.data()), d, nullptr);
            const auto got_h = test::download<float>(dh.data(), h.size());
            const auto got_y = test::download<float>(dy.data(), y.size());
            int bad = 0;
            for (int64_t s = 0; s < slots; ++s) {
                const int e = with_ids ? ids[size_t(s)] : 0;
                for (int64_t r = 0; r < rows; ++r) {
                    const size_t i = size_t(s * rows + r);
                    // The inputs as the GPU adds them (float), the activation exact.
                    const float g = h[i] + gb[size_t(e * rows + r)];
                    const float v = u[i] + ub[size_t(e * rows + r)];
                    const double want = glu_ref(oai, g, v);
                    // exp(x) carries x's float rounding (|x| ulps) into its relative error.
                    const double x = std::fabs(oai ? double(kAlpha) * g : double(g));
                    const double bound = (2e-6 + 1.2e-7 * x) * std::fabs(want) + 1e-30;
                    if (std::fabs(got_h[i] - want) > bound && ++bad < 5) {
                        ADD_FAILURE() << "slot " << s << " row " << r << ": g " << g << " u " << v
                                      << " gpu " << got_h[i] << " want " << want;
                    }
                }
                for (int64_t r = 0; r < d; ++r) {
                    const size_t i = size_t(s * d + r);
                    const float want = y[i] + db[size_t(e * d + r)];
                    if (got_y[i] != want && ++bad < 5) {
                        ADD_FAILURE() << "down bias slot " << s << " row " << r;
                    }
                }
            }
            EXPECT_EQ(bad, 0);
        }
    }
}

// ---- the experts' FFNs
// ---------------------------------------------------------------------------

// n_expert experts' gate, up [ff x d] and down [d x ff] of one type in device memory, with their
// dequantized floats, and their biases.
struct Experts {
    TensorType type;
    int n_expert;
    int64_t d, ff;
    std::vector<std::vector<float>> gate, up, down;  // per expert, rows x cols
    std::vector<float> gb, ub, db;  // [n_expert][ff], [n_expert][ff], [n_expert][d]
    gpu::DeviceBuffer memory, biases;
    ExpertStack stack;
    cuda::ExpertBiases dev_biases;
};

Experts make_experts(TensorType t, int n_expert, int64_t d, int64_t ff, std::mt19937& rng) {
    Experts e{t, n_expert, d, ff, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    const size_t rb_in = size_t(quant::quant_row_bytes(t, d).value());
    const size_t rb_ff = size_t(quant::quant_row_bytes(t, ff).value());
    const size_t gate_bytes = rb_in * size_t(ff), down_bytes = rb_ff * size_t(d);
    const size_t per_expert = 2 * gate_bytes + down_bytes;
    std::vector<uint8_t> bytes(per_expert * size_t(n_expert));
    auto fill = [&](uint8_t* dst, int64_t rows, int64_t cols, std::vector<float>& deq) {
        const size_t rb = size_t(quant::quant_row_bytes(t, cols).value());
        deq.resize(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> f = randn(size_t(cols), 0.05f, rng);
            quant::quantize_row(t, f.data(), dst + size_t(r) * rb, cols);
            quant::dequantize_row(t, dst + size_t(r) * rb, &deq[size_t(r * cols)], cols);
        }
    };
    e.gate.resize(size_t(n_expert));
    e.up.resize(size_t(n_expert));
    e.down.resize(size_t(n_expert));
    for (int x = 0; x < n_expert; ++x) {
        uint8_t* base = bytes.data() + size_t(x) * per_expert;
        fill(base, ff, d, e.gate[size_t(x)]);
        fill(base + gate_bytes, ff, d, e.up[size_t(x)]);
        fill(base + 2 * gate_bytes, d, ff, e.down[size_t(x)]);
    }
    e.gb = randn(size_t(n_expert * ff), 2.0f, rng);
    e.ub = randn(size_t(n_expert * ff), 2.0f, rng);
    e.db = randn(size_t(n_expert * d), 0.5f, rng);
    e.memory = test::upload(bytes.data(), bytes.size());
    std::vector<float> all = e.gb;
    all.insert(all.end(), e.ub.begin(), e.ub.end());
    all.insert(all.end(), e.db.begin(), e.db.end());
    e.biases = test::upload(all.data(), all.size() * 4);
    const MemoryPlace gpu{MemoryKind::Device, 0};
    const auto* m = e.memory.data();
    e.stack.first.gate = {t, m, {d, ff, 1, 1}, rb_in, gpu};
    e.stack.first.up = {t, m + gate_bytes, {d, ff, 1, 1}, rb_in, gpu};
    e.stack.first.down = {t, m + 2 * gate_bytes, {ff, d, 1, 1}, rb_ff, gpu};
    e.stack.gate_stride = e.stack.up_stride = e.stack.down_stride = per_expert;
    e.stack.n_expert = n_expert;
    const auto* b = reinterpret_cast<const float*>(e.biases.data());
    e.dev_biases = {b, b + n_expert * ff, b + 2 * n_expert * ff, ff, ff, d};
    return e;
}

// x as the CPU's dot products with weights of type t see it (quantized, dequantized), in double.
std::vector<double> as_dot_input(TensorType t, const float* x, int64_t cols) {
    const TensorType at = quant::vec_dot_type(t);
    std::vector<uint8_t> q(size_t(quant::quant_row_bytes(at, cols).value()) + 64);
    std::vector<float> f(static_cast<size_t>(cols));
    if (at == TensorType::F32) {
        f.assign(x, x + cols);
    } else {
        quant::quantize_row_activations(at, x, q.data(), cols);
        quant::dequantize_row(at, q.data(), f.data(), cols);
    }
    return {f.begin(), f.end()};
}

// One product row: its value and the bound of its fp32 sum.
struct Dot {
    double value, bound;
};
Dot dot(const float* w, const std::vector<double>& x) {
    double v = 0, a = 0;
    for (size_t c = 0; c < x.size(); ++c) {
        v += double(w[c]) * x[c];
        a += std::fabs(double(w[c]) * x[c]);
    }
    return {v, double(x.size() + 2) * kU * a};
}

// Checks h (slots x ff) and y (slots x d) of the slots' experts against the reference: h from
// x's rows (row s, or row 0 when !x_per_slot), y from the GPU's own h.
void check_ffn(const Experts& e, const std::vector<int32_t>& ids, const std::vector<float>& x,
               bool x_per_slot, const std::vector<float>& h, const std::vector<float>& y,
               bool biases, bool oai) {
    int bad = 0;
    const double slope = oai ? 1.0 + double(kAlpha) * kLimit : 1.1;  // d/dg of g sigmoid(a g)
    for (size_t s = 0; s < ids.size(); ++s) {
        const int ex = ids[s];
        const std::vector<double> xa =
            as_dot_input(e.type, &x[(x_per_slot ? s : 0) * size_t(e.d)], e.d);
        for (int64_t r = 0; r < e.ff; ++r) {
            const Dot g = dot(&e.gate[size_t(ex)][size_t(r * e.d)], xa);
            const Dot u = dot(&e.up[size_t(ex)][size_t(r * e.d)], xa);
            const double gb = biases ? e.gb[size_t(ex * e.ff + r)] : 0.0;
            const double ub = biases ? e.ub[size_t(ex * e.ff + r)] : 0.0;
            const double want = glu_ref(oai, g.value + gb, u.value + ub);
            // The activation's slopes: in g at most slope (1 + |u|), in u at most |g|.
            const double gv = g.value + gb, uv = u.value + ub;
            const double tol = (slope * (1 + std::fabs(uv)) + std::fabs(gv)) * (g.bound + u.bound) +
                               4 * kU * (std::fabs(want) + std::fabs(gv) + std::fabs(uv));
            const float got = h[s * size_t(e.ff) + size_t(r)];
            if (!(std::fabs(got - want) <= tol) && ++bad <= 5) {
                ADD_FAILURE() << "h slot " << s << " expert " << ex << " row " << r << ": gpu "
                              << got << " want " << want << " bound " << tol;
            }
        }
        const std::vector<double> ha = as_dot_input(e.type, &h[s * size_t(e.ff)], e.ff);
        for (int64_t r = 0; r < e.d; ++r) {
            const Dot o = dot(&e.down[size_t(ex)][size_t(r * e.ff)], ha);
            const double want = o.value + (biases ? e.db[size_t(ex * e.d + r)] : 0.0);
            const double tol = o.bound + 2 * kU * std::fabs(want);
            const float got = y[s * size_t(e.d) + size_t(r)];
            if (!(std::fabs(got - want) <= tol) && ++bad <= 5) {
                ADD_FAILURE() << "y slot " << s << " expert " << ex << " row " << r << ": gpu "
                              << got << " want " << want << " bound " << tol;
            }
        }
    }
    EXPECT_EQ(bad, 0);
}

class CudaGptOssExperts : public ::testing::TestWithParam<TensorType> {};

TEST_P(CudaGptOssExperts, SlotBySlotWithBiasesAndClampedSwiglu) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    std::mt19937 rng(8);
    const int64_t d = 512, ff = 768;
    const Experts e = make_experts(t, 6, d, ff, rng);
    if (!cuda::expert_ffn_supports(e.stack)) GTEST_SKIP() << "not on the int8 matvec";
    auto matmul = cuda::Matmul::create(d * ff, 64, std::max(d, ff), nullptr, Tuning{});
    ASSERT_TRUE(matmul) << matmul.error().message;
    for (const bool per_slot : {false, true}) {
        for (const bool biases : {false, true}) {
            for (const bool oai : {false, true}) {
                SCOPED_TRACE(std::string(per_slot ? "a row per slot" : "one token") +
                             (biases ? ", biases" : "") + (oai ? ", oai" : ""));
                const std::vector<int32_t> ids =
                    per_slot ? std::vector<int32_t>{5, 0, 3, 3, 1, 5, 2, 0, 4}
                             : std::vector<int32_t>{4, 1, 5, 0};
                const int slots = int(ids.size());
                const std::vector<float> x = randn(size_t(slots) * size_t(d), 12.0f, rng);
                const gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4),
                                        dids = test::upload(ids.data(), ids.size() * 4);
                auto dh = gpu::DeviceBuffer::allocate(size_t(slots * ff) * 4).value();
                auto dy = gpu::DeviceBuffer::allocate(size_t(slots * d) * 4).value();
                auto scratch = gpu::DeviceBuffer::allocate(
                                   cuda::matvec_q8_scratch_bytes(std::max(d, ff), slots))
                                   .value();
                ASSERT_TRUE((*matmul)->expert_ffn(
                    e.stack, reinterpret_cast<const int32_t*>(dids.data()), slots,
                    reinterpret_cast<const float*>(dx.data()), per_slot,
                    reinterpret_cast<float*>(dh.data()), reinterpret_cast<float*>(dy.data()),
                    scratch.data(), biases ? e.dev_biases : cuda::ExpertBiases{},
                    oai ? kOai : cuda::Glu{}));
                const auto h = test::download<float>(dh.data(), size_t(slots * ff));
                const auto y = test::download<float>(dy.data(), size_t(slots * d));
                check_ffn(e, ids, x, per_slot, h, y, biases, oai);
            }
        }
    }
}

TEST_P(CudaGptOssExperts, GroupedOnTensorCoresWithBiasesAndClampedSwiglu) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    std::mt19937 rng(9);
    const int64_t d = 512, ff = 768;
    const int n_expert = 7;
    const Experts e = make_experts(t, n_expert, d, ff, rng);
    if (!cuda::expert_ffn_supports(e.stack) || !cuda::mmq_supports(t, d) ||
        !cuda::mmq_supports(t, ff)) {
        GTEST_SKIP() << "not on the int8 GEMM";
    }
    auto matmul = cuda::Matmul::create(d * ff, 512, std::max(d, ff), nullptr, Tuning{});
    ASSERT_TRUE(matmul) << matmul.error().message;
    // Expert 0 with no slot, expert 2 with more than a 64-row tile, the others a few.
    std::vector<int32_t> ids;
    for (int ex = 1; ex < n_expert; ++ex) {
        for (int i = 0; i < (ex == 2 ? 150 : ex); ++i) ids.push_back(ex);
    }
    const int slots = int(ids.size());
    for (const bool oai : {false, true}) {
        SCOPED_TRACE(oai ? "oai" : "silu");
        const std::vector<float> x = randn(size_t(slots) * size_t(d), 12.0f, rng);
        const gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4),
                                dids = test::upload(ids.data(), ids.size() * 4);
        auto dh = gpu::DeviceBuffer::allocate(size_t(slots * ff) * 4).value();
        auto du = gpu::DeviceBuffer::allocate(size_t(slots * ff) * 4).value();
        auto dy = gpu::DeviceBuffer::allocate(size_t(slots * d) * 4).value();
        auto q8 = gpu::DeviceBuffer::allocate(cuda::matvec_q8_scratch_bytes(std::max(d, ff), slots))
                      .value();
        auto tiles =
            gpu::DeviceBuffer::allocate(4 * 3 * size_t(cuda::mmq_max_tiles(slots, n_expert)))
                .value();
        ASSERT_TRUE((*matmul)->expert_ffn_grouped(
            e.stack, reinterpret_cast<const int32_t*>(dids.data()), slots,
            reinterpret_cast<const float*>(dx.data()), reinterpret_cast<float*>(dh.data()),
            reinterpret_cast<float*>(du.data()), reinterpret_cast<float*>(dy.data()), q8.data(),
            reinterpret_cast<int32_t*>(tiles.data()), e.dev_biases, oai ? kOai : cuda::Glu{}));
        const auto h = test::download<float>(dh.data(), size_t(slots * ff));
        const auto y = test::download<float>(dy.data(), size_t(slots * d));
        // The GEMM rounds its activations to the CPU's codes as the matvec does: the same bound.
        check_ffn(e, ids, x, true, h, y, true, oai);
    }
}

// One expert's gate and up through Matmul::swiglu (its biases as plain rows, no ids): one token
// on the fused matvec where the type has it, a batch as two products and the activation, and
// any type on the dequantizing kernels (MXFP4).
TEST_P(CudaGptOssExperts, OneExpertsGateAndUpWithBiases) {
    STRATA_REQUIRE_GPU();
    const TensorType t = GetParam();
    std::mt19937 rng(10);
    const int64_t d = 512, ff = 768;
    const Experts e = make_experts(t, 2, d, ff, rng);
    auto matmul = cuda::Matmul::create(d * ff, 64, std::max(d, ff), nullptr, Tuning{});
    ASSERT_TRUE(matmul) << matmul.error().message;
    const auto* gb = e.dev_biases.gate + ff;  // expert 1's rows
    const auto* ub = e.dev_biases.up + ff;
    ExpertView one = e.stack.first;  // expert 1
    one.gate.data += e.stack.gate_stride;
    one.up.data += e.stack.up_stride;
    for (const int64_t n : {int64_t(1), int64_t(3), int64_t(40)}) {
        SCOPED_TRACE("n " + std::to_string(n));
        const std::vector<float> x = randn(size_t(n * d), 12.0f, rng);
        const gpu::DeviceBuffer dx = test::upload(x.data(), x.size() * 4);
        auto dg = gpu::DeviceBuffer::allocate(size_t(n * ff) * 4).value();
        auto du = gpu::DeviceBuffer::allocate(size_t(n * ff) * 4).value();
        (*matmul)->swiglu(one.gate, one.up, reinterpret_cast<const float*>(dx.data()),
                          reinterpret_cast<float*>(dg.data()), reinterpret_cast<float*>(du.data()),
                          n, TensorType::F32, gb, ub, kOai);
        const auto g = test::download<float>(dg.data(), size_t(n * ff));
        // The batch path may round activations as the prompt GEMM does (fp16 of the codes):
        // the bound of a batch is the GEMM's, relative to the products' magnitudes.
        int bad = 0;
        for (int64_t tok = 0; tok < n; ++tok) {
            const std::vector<double> xa = as_dot_input(t, &x[size_t(tok * d)], d);
            for (int64_t r = 0; r < ff; ++r) {
                const Dot gd = dot(&e.gate[1][size_t(r * d)], xa);
                const Dot ud = dot(&e.up[1][size_t(r * d)], xa);
                const double gv = gd.value + e.gb[size_t(ff + r)];
                const double uv = ud.value + e.ub[size_t(ff + r)];
                const double want = glu_ref(true, gv, uv);
                // fp16 inputs of a GEMM: 2^-10 of the products' magnitudes (bound / kU / cols).
                const double mag = (gd.bound + ud.bound) / (double(d + 2) * kU);
                const double tol =
                    ((1.0 + double(kAlpha) * kLimit) * (1 + std::fabs(uv)) + std::fabs(gv)) *
                        (n == 1 ? (gd.bound + ud.bound) : 0x1p-9 * mag) +
                    4 * kU * (std::fabs(want) + std::fabs(gv) + std::fabs(uv));
                const float got = g[size_t(tok * ff + r)];
                if (!(std::fabs(got - want) <= tol) && ++bad <= 5) {
                    ADD_FAILURE() << "token " << tok << " row " << r << ": gpu " << got << " want "
                                  << want << " bound " << tol;
                }
            }
        }
        EXPECT_EQ(bad, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGptOssExperts,
                         ::testing::Values(TensorType::Q8_0, TensorType::Q4_K, TensorType::MXFP4),
                         [](const auto& i) { return std::string(tensor_type_name(i.param)); });

}  // namespace
}  // namespace strata
