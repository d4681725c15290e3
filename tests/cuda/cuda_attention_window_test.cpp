// Sliding-window attention and attention sinks on the GPU (attention.h, kv_cache_gpu.h) against a
// scalar reference in double on fresh random data.
//
// A windowed layer keeps its keys and values in a ring of `slots` positions (position p in slot
// p % slots), so the cases run a whole conversation through it, batch after batch as the engine
// does (store the batch's keys and values, then attend): prompts of several sizes, then decode
// steps, far past the ring's end so that every batch and tile boundary lands on a wrap
// somewhere, with windows shorter and longer than the sequence, rings whose size is no multiple
// of any tile, and two sequences (two caches) taking turns. Each step is checked as a prompt
// launches it (kv_bound = its own end) and as a captured decode graph does (kv_bound = n_ctx:
// the split count of the whole context).
//
// The reference takes the cache's contents (the same keys and values stored into a
// cpu::KvCache over the whole context, which holds the GPU's bits: cuda_attention_test's
// IdentityStoreIsBitExact) and the query as the kernels' dot products take it (rounded to fp16
// for F16 caches, quantized to Q8_0 blocks for Q8_0), and computes in double, for the row of
// token t at position P, over the positions p it sees (max(0, P + 1 - window) <= p <= P, or
// every p <= P without a window):
//     w_p = exp(s_p - M) / (sum_p exp(s_p - M) + [sink] exp(z_h - M)),   s_p = scale q.k_p,
//     out = sum_p w_p v_p,
// with z_h the head's sink logit and M the largest of the scores and z_h. The GPU's error is
// bounded as in cuda_attention_test (there against the CPU's; here against the exact value,
// which that bound also covers): rel * A_d + [F16] 2^-24 B_d, with A_d = sum_p w_p |v_p,d|, B_d =
// sum_p |v_p,d|. Queries 8 times larger peak the softmax on a few positions, and sinks up to
// e^6 times a typical score's weight take most of it, so a position outside the window, a lost
// one, or a sink counted twice or not at all is off by far more than the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kv_cache.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/kv_cache_gpu.h"
#include "backend/cuda/rope_kv.h"
#include "device_buffers.h"
#include "engine_test_support.h"
#include "gpu/gpu.h"
#include "model/kv_layout.h"
#include "model/rope.h"
#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"
#include "test_support.h"
#include "util/thread_pool.h"

namespace strata {
namespace {

using cuda::GpuAttention;
using cuda::GpuKvCache;
using cuda::GpuKvWindows;
using cuda::GpuRope;

constexpr Pdl kPdl = Tuning{}.pdl;
constexpr double kU = 0x1p-24;

std::vector<float> randn(size_t n, float sigma, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    return x;
}

// Element i of a row of the CPU cache (F16 halves or Q8_0 blocks), as a float.
float row_value(KvType t, const std::byte* row, int i) {
    if (t == KvType::F16) {
        uint16_t h;
        std::memcpy(&h, row + 2 * size_t(i), 2);
        return quant::fp16_to_fp32(h);
    }
    quant::BlockQ8_0 b;
    std::memcpy(&b, row + size_t(i / 32) * sizeof(b), sizeof(b));
    return float(b.qs[i % 32]) * quant::fp16_to_fp32(b.d);
}

struct Shape {
    int n_head, n_head_kv, hd;
};

std::string shape_name(const Shape& s) {
    return std::to_string(s.n_head) + "x" + std::to_string(s.n_head_kv) + "_" +
           std::to_string(s.hd);
}

// One sequence: its GPU cache, and every key and value it stored as the cache holds them
// (floats [p][h][d]), through a CPU cache of the whole context.
struct Sequence {
    GpuKvCache gpu;
    std::vector<float> K, V;
    int64_t pos = 0;  // positions stored so far
};

// The exact attention of rows q (n tokens from position pos0) over a sequence's keys and values,
// and each element's bound.
void reference(const Shape& s, KvType type, const Sequence& seq, int window,
               const std::vector<float>& sinks, const std::vector<float>& q, int64_t n,
               int64_t pos0, float scale, std::vector<double>& want, std::vector<double>& bound,
               ThreadPool& pool) {
    const int group = s.n_head / s.n_head_kv;
    want.assign(size_t(n) * s.n_head * s.hd, 0.0);
    bound.assign(want.size(), 0.0);
    pool.parallel_for(n * s.n_head, 1, [&](int64_t begin, int64_t end, int) {
        std::vector<float> qt(size_t(s.hd));
        std::vector<quant::BlockQ8_0> blocks(size_t(s.hd / 32 + 1));
        std::vector<double> w;
        for (int64_t row = begin; row < end; ++row) {
            const int64_t t = row / s.n_head;
            const int head = int(row % s.n_head), h = head / group;
            const float* qrow = &q[size_t(row) * s.hd];
            if (type == KvType::F16) {
                for (int i = 0; i < s.hd; ++i) {
                    qt[size_t(i)] = quant::fp16_to_fp32(quant::fp32_to_fp16(qrow[i]));
                }
            } else {
                quant::quantize_row_activations(TensorType::Q8_0, qrow, blocks.data(), s.hd);
                quant::dequantize_row(TensorType::Q8_0, blocks.data(), qt.data(), s.hd);
            }
            const int64_t P = pos0 + t;
            const int64_t p0 = window > 0 ? std::max<int64_t>(0, P + 1 - window) : 0;
            const int64_t L = P + 1 - p0;
            w.assign(size_t(L), 0.0);
            double max_s = sinks.empty() ? -1e300 : double(sinks[size_t(head)]);
            double max_abs_s = std::fabs(sinks.empty() ? 0.0 : double(sinks[size_t(head)]));
            double max_S = 0;
            for (int64_t i = 0; i < L; ++i) {
                const float* kp = &seq.K[(size_t(p0 + i) * s.n_head_kv + size_t(h)) * s.hd];
                double dot = 0, abs = 0;
                for (int d = 0; d < s.hd; ++d) {
                    dot += double(qt[size_t(d)]) * kp[d];
                    abs += std::fabs(double(qt[size_t(d)]) * kp[d]);
                }
                w[size_t(i)] = scale * dot;
                max_s = std::max(max_s, w[size_t(i)]);
                max_abs_s = std::max(max_abs_s, std::fabs(w[size_t(i)]));
                max_S = std::max(max_S, scale * abs);
            }
            double z = sinks.empty() ? 0.0 : std::exp(double(sinks[size_t(head)]) - max_s);
            for (double& x : w) z += (x = std::exp(x - max_s));
            for (double& x : w) x /= z;
            const double delta = 3 * (s.hd + 2) * kU * max_S + 4 * kU * max_abs_s;
            const double gamma = double(L) * kU / (1 - double(L) * kU);
            const bool f16 = type == KvType::F16;
            const double rel = std::expm1(2 * delta) + 6 * kU + 4 * gamma +
                               2 * double((L + 15) / 16 + 260) * kU + (f16 ? 0x1p-10 : 0.0);
            double* o = &want[size_t(row) * s.hd];
            double* b = &bound[size_t(row) * s.hd];
            for (int d = 0; d < s.hd; ++d) {
                double sum = 0, a = 0, sum_abs = 0;
                for (int64_t i = 0; i < L; ++i) {
                    const double vd = seq.V[(size_t(p0 + i) * s.n_head_kv + size_t(h)) * s.hd + d];
                    sum += w[size_t(i)] * vd;
                    a += w[size_t(i)] * std::fabs(vd);
                    sum_abs += std::fabs(vd);
                }
                o[d] = sum;
                b[d] = rel * a + (f16 ? 0x1p-24 * sum_abs : 0.0);
            }
        }
    });
}

struct WindowCase {
    const char* name;
    int window;      // 0: full attention
    int ring_extra;  // slots = window + ring_extra (full attention: n_ctx)
    bool sinks;
};

class CudaAttentionWindow : public ::testing::TestWithParam<std::tuple<Shape, WindowCase, KvType>> {
};

TEST_P(CudaAttentionWindow, MatchesScalarReferenceOverAConversation) {
    STRATA_REQUIRE_GPU();
    const auto [s, wc, type] = GetParam();
    if (type == KvType::Q8_0 && s.hd % 32 != 0) GTEST_SKIP() << "Q8_0 needs head sizes of 32k";
    const int layer = 1, max_batch = 64;
    const uint32_t n_ctx = 1200;
    const float scale = 1.0f / std::sqrt(float(s.hd));
    const ModelHparams hp = test::attention_hparams(s.n_head, s.n_head_kv, s.hd, s.hd, 3);
    GpuKvWindows windows;
    if (wc.window > 0) {
        // Layer 1 windowed with its ring, layers 0 and 2 full (the alternating pattern).
        windows.window = {0, uint32_t(wc.window), 0};
        windows.slots = {0, uint32_t(wc.window + wc.ring_extra), 0};
    }
    ThreadPool pool(0);
    auto attention = GpuAttention::create(hp, n_ctx, max_batch, kPdl);
    ASSERT_TRUE(attention) << attention.error().message;
    auto identity = GpuRope::create(RopeConfig{});
    ASSERT_TRUE(identity);
    auto ckv = cpu::KvCache::create(hp, n_ctx, type);  // to round keys and values as stored
    ASSERT_TRUE(ckv);

    std::mt19937 rng(uint32_t(17 + s.hd + s.n_head + wc.window));
    std::vector<float> sinks;
    if (wc.sinks) {
        // Mostly near the scores, a few far above them (the sink takes most of the weight).
        sinks = randn(size_t(s.n_head), 1.5f, rng);
        sinks[0] = 6.0f;
        if (s.n_head > 2) sinks[2] = -8.0f;
    }
    test::DeviceVector sinks_dev(sinks);

    std::vector<Sequence> seqs;
    for (int i = 0; i < 2; ++i) {
        auto g = GpuKvCache::create(hp, n_ctx, type, {}, windows);
        ASSERT_TRUE(g) << g.error().message;
        EXPECT_EQ(g->layer(layer).window, wc.window);
        // A window wider than the context is the whole context.
        EXPECT_EQ(g->layer(layer).slots,
                  wc.window > 0 ? std::min(wc.window + wc.ring_extra, int(n_ctx)) : int(n_ctx));
        seqs.push_back(Sequence{std::move(*g), {}, {}, 0});
    }
    const int dk = s.n_head_kv * s.hd;
    // Batches of each sequence, in turns: prompts (some longer than the window, one exactly
    // the ring's free room), then decode steps, then a second prompt, then decode again.
    const std::vector<std::vector<int>> batches = {
        {37, 64, 1, 1, 5, 64, 64, 1, 1, 1, 63, 2, 1, 1, 1, 1, 1, 1, 1, 1, 64, 64, 1, 17, 1},
        {1, 1, 1, 16, 64, 1, 1, 64, 1, 31, 64, 64, 1, 1, 1, 1, 64, 1, 1, 1},
    };
    int steps = 0;
    for (size_t b = 0; b < std::max(batches[0].size(), batches[1].size()); ++b) {
        for (size_t si = 0; si < seqs.size(); ++si) {
            if (b >= batches[si].size()) continue;
            Sequence& seq = seqs[si];
            const int64_t n = batches[si][b], pos0 = seq.pos;
            if (wc.window > 0 && n > wc.ring_extra + 1) continue;  // the ring cannot take it
            SCOPED_TRACE("sequence " + std::to_string(si) + " n " + std::to_string(n) + " pos0 " +
                         std::to_string(pos0));
            // Store: keys and values through the GPU's store, and the same through the CPU
            // cache of the whole context for their rounded floats.
            const std::vector<float> k = randn(size_t(n) * dk, 1.0f, rng),
                                     v = randn(size_t(n) * dk, 1.0f, rng);
            test::DeviceVector gk(k), gv(v), gpos(std::vector<int32_t>{int32_t(pos0)});
            cuda::rope_store_kv(*identity, seq.gpu, layer, 0, s.n_head_kv, s.hd, s.hd, nullptr,
                                gk.f32(), gv.f32(), nullptr, nullptr, 1e-6f, n, gpos.i32(), nullptr,
                                kPdl);
            for (int64_t t = 0; t < n; ++t) {
                ckv->store(layer, pos0 + t, &k[size_t(t) * dk], &v[size_t(t) * dk]);
            }
            seq.K.resize(size_t(pos0 + n) * dk);
            seq.V.resize(size_t(pos0 + n) * dk);
            for (int64_t p = pos0; p < pos0 + n; ++p) {
                for (int i = 0; i < dk; ++i) {
                    seq.K[size_t(p) * dk + size_t(i)] = row_value(type, ckv->key_row(layer, p), i);
                    // The CPU's F16 values are transposed: the stored half of v is its rounding.
                    seq.V[size_t(p) * dk + size_t(i)] =
                        type == KvType::F16
                            ? quant::fp16_to_fp32(quant::fp32_to_fp16(v[size_t(p - pos0) * dk + i]))
                            : row_value(type, ckv->value_row(layer, p), i);
                }
            }
            seq.pos += n;

            const float sigma = (steps % 3 == 2) ? 8.0f : 1.0f;
            ++steps;
            const std::vector<float> q = randn(size_t(n) * s.n_head * s.hd, sigma, rng);
            std::vector<double> want, bound;
            reference(s, type, seq, wc.window, sinks, q, n, pos0, scale, want, bound, pool);
            const size_t out_n = want.size();
            test::DeviceVector gq(q), gout(std::vector<float>(out_n, NAN));
            for (int64_t kv_bound : {pos0 + n, int64_t(n_ctx)}) {
                attention->run(seq.gpu, layer, s.n_head, s.n_head_kv, s.hd, s.hd, scale, gq.f32(),
                               n, gpos.i32(), kv_bound, gout.f32(), nullptr,
                               sinks.empty() ? nullptr : sinks_dev.f32());
                const std::vector<float> got = test::download<float>(gout.f32(), out_n);
                int bad = 0;
                for (size_t i = 0; i < out_n; ++i) {
                    const double e = std::fabs(double(got[i]) - want[i]);
                    if (!(e <= bound[i]) && ++bad <= 5) {
                        const size_t row = i / size_t(s.hd);
                        ADD_FAILURE()
                            << "kv_bound " << kv_bound << " token " << row / size_t(s.n_head)
                            << " head " << row % size_t(s.n_head) << " dim " << i % size_t(s.hd)
                            << ": gpu " << got[i] << " exact " << want[i] << " bound " << bound[i];
                    }
                }
                ASSERT_EQ(bad, 0);
            }
        }
    }
    std::printf("  %s %s %s: %d steps, positions %lld and %lld\n", shape_name(s).c_str(), wc.name,
                type == KvType::F16 ? "f16" : "q8_0", steps, (long long)seqs[0].pos,
                (long long)seqs[1].pos);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaAttentionWindow,
    ::testing::Combine(
        // gpt-oss' heads (64 wide, 8 query heads per KV head), one query head per KV head at
        // 128 (the tensor-core kernel's other size), and 96 (CUDA cores only, F16 only).
        ::testing::Values(Shape{16, 2, 64}, Shape{8, 8, 128}, Shape{12, 4, 96}, Shape{8, 2, 64}),
        ::testing::Values(WindowCase{"full_sinks", 0, 0, true},
                          WindowCase{"window128_sinks", 128, 64, true},
                          WindowCase{"window128", 128, 67, false},
                          WindowCase{"window16_sinks", 16, 63, true},
                          WindowCase{"window5000_sinks", 5000, 64, true}),
        ::testing::Values(KvType::F16, KvType::Q8_0)),
    [](const auto& i) {
        return shape_name(std::get<0>(i.param)) + "_" + std::get<1>(i.param).name + "_" +
               (std::get<2>(i.param) == KvType::F16 ? "f16" : "q8_0");
    });

TEST(GpuKvCacheWindow, RingsTakeWindowPlusBatchAndRefuseLess) {
    const ModelHparams hp = test::attention_hparams(8, 2, 64, 64, 2);
    GpuKvWindows w;
    w.window = {128, 0};
    w.slots = {100, 0};  // smaller than its window
    EXPECT_FALSE(GpuKvCache::create(hp, 4096, KvType::F16, {}, w));
    w.window = {0, 0};
    w.slots = {100, 0};  // a ring for a layer of full attention
    EXPECT_FALSE(GpuKvCache::create(hp, 4096, KvType::F16, {}, w));
    STRATA_REQUIRE_GPU();
    w.window = {128, 0};
    w.slots = {128 + 512, 0};
    for (KvType type : {KvType::F16, KvType::Q8_0}) {
        auto c = GpuKvCache::create(hp, 4096, type, {}, w);
        ASSERT_TRUE(c) << c.error().message;
        EXPECT_EQ(c->layer(0).slots, 640);
        EXPECT_EQ(c->layer(1).slots, 4096);
        EXPECT_EQ(c->bytes(), kv_layer_bytes(hp, 0, 640, type) + kv_layer_bytes(hp, 1, 4096, type));
        // A ring at least as large as the context is the context.
        w.slots = {8192, 0};
        auto big = GpuKvCache::create(hp, 4096, type, {}, w);
        ASSERT_TRUE(big) << big.error().message;
        EXPECT_EQ(big->layer(0).slots, 4096);
        w.slots = {640, 0};
    }
}

}  // namespace
}  // namespace strata
