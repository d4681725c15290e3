// Multi-head latent attention (deepseek2) on the CUDA backend against the CPU backend's, on fresh
// random inputs and weights for one layer of tiny-deepseek2's shape: the latents' norms, the rope
// and store of the latent rows, the queries' absorption (attn_k_b, or attn_kv_b by its
// transpose), attention over the latent cache (positions split over blocks for decode steps)
// and the value heads. Prompts of two sequences in one batch, decode steps of both, then one
// sequence started again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "device_buffers.h"
#include "engine_test_support.h"
#include "model/rope.h"
#include "model/tensor_layout.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

using test::randn;
using Weight = test::HostDeviceWeight;

Weight weight(std::vector<float> values, int64_t cols) {
    return test::host_device_weight(std::move(values), cols);
}

class CudaLatentAttention : public ::testing::TestWithParam<bool> {};

TEST_P(CudaLatentAttention, MatchesTheCpuBackend) {
    STRATA_REQUIRE_GPU();
    const bool kv_b = GetParam();
    ModelHparams hp = with_layout_defaults(*synth_preset("tiny-deepseek2"));
    hp.n_layer = 1;
    hp.n_leading_dense = 0;
    hp.mla_kv_b = kv_b;
    ASSERT_TRUE(hp.is_mla());
    BackendConfig c;
    c.hp = hp;
    auto rope = make_rope_config(hp, nullptr);
    ASSERT_TRUE(rope) << rope.error().message;
    c.rope = *rope;
    c.n_ctx = 256;
    c.n_seq = 2;
    c.max_batch = 96;
    c.threads = 2;
    auto cpu_made = make_cpu_backend(c);
    auto cuda_made = make_cuda_backend(c, 0);
    ASSERT_TRUE(cpu_made) << cpu_made.error().message;
    ASSERT_TRUE(cuda_made) << cuda_made.error().message;
    Backend& cpu = **cpu_made;
    Backend& cuda = **cuda_made;

    const int64_t heads = hp.n_head, dk = hp.head_dim_k, dv = hp.head_dim_v,
                  nope = hp.head_dim_nope(), rank = hp.n_lora_kv, width = hp.mla_cache_width();
    const float s = 1.0f / std::sqrt(float(rank));
    const Weight q_norm = weight(randn(size_t(hp.n_lora_q), 1, 0.1f, 1.0f), hp.n_lora_q);
    const Weight kv_norm = weight(randn(size_t(rank), 2, 0.1f, 1.0f), rank);
    const Weight k_b = weight(randn(size_t(heads * rank * nope), 3, s), nope);
    const Weight v_b = weight(randn(size_t(heads * dv * rank), 4, s), rank);
    const Weight kvb = weight(randn(size_t(heads * (nope + dv) * rank), 5, s), rank);
    const TensorView none{};
    const MlaWeights host_w = kv_b ? MlaWeights{&none, &none, &kvb.host_view}
                                   : MlaWeights{&k_b.host_view, &v_b.host_view, &none};
    const MlaWeights dev_w = kv_b ? MlaWeights{&none, &none, &kvb.device_view}
                                  : MlaWeights{&k_b.device_view, &v_b.device_view, &none};

    uint32_t seed = 10;
    const auto step = [&](std::span<const SeqRun> runs, const char* what) {
        int64_t n = 0;
        for (const SeqRun& r : runs) n = std::max(n, r.row0 + r.n);
        const std::vector<float> q = randn(size_t(n * heads * dk), seed++);
        const std::vector<float> ql = randn(size_t(n * hp.n_lora_q), seed++);
        const std::vector<float> kvl = randn(size_t(n * width), seed++);
        for (Backend* b : {&cpu, &cuda}) {
            b->write_act(Act::Q, q.data(), n, heads * dk);
            b->write_act(Act::QLatent, ql.data(), n, hp.n_lora_q);
            b->write_act(Act::KvLatent, kvl.data(), n, width);
        }
        cpu.mla_latent_norms(q_norm.host_view, kv_norm.host_view, n);
        cuda.mla_latent_norms(q_norm.device_view, kv_norm.device_view, n);
        // The compressed query's norm, as the next projection reads it.
        const float* want_ql = cpu.peek(Act::QLatent, n);
        const std::vector<float> wql(want_ql, want_ql + n * hp.n_lora_q);
        const float* got_ql = cuda.peek(Act::QLatent, n);
        EXPECT_LE(test::rel_l2({got_ql, wql.size()}, wql), 1e-6) << what;
        cpu.mla_attention(0, host_w, runs);
        cuda.mla_attention(0, dev_w, runs);
        const float* want = cpu.peek(Act::AttnOut, n);
        const std::vector<float> w(want, want + n * heads * dv);
        const float* got = cuda.peek(Act::AttnOut, n);
        // Both round the query and the weights to fp16 as the reference does; the sums go in
        // other orders (online softmax, split partials): rounding apart, where a wrong rotation,
        // position, head or up-projection is off by O(1).
        const double e = test::rel_l2({got, w.size()}, w);
        EXPECT_LE(e, 2e-3) << what;
        std::printf("  %s: %-28s relative error %.2e\n", kv_b ? "attn_kv_b" : "attn_k_b/v_b", what,
                    e);
    };
    const SeqRun prompts[] = {{0, 0, 70, 0}, {1, 70, 9, 0}};
    step(prompts, "prompts of two sequences");
    for (int64_t i = 0; i < 3; ++i) {
        const SeqRun decode[] = {{1, 0, 1, 9 + i}, {0, 1, 1, 70 + i}};
        step(decode, "decode steps of both");
    }
    cpu.reset_recurrent(1);
    cuda.reset_recurrent(1);
    const SeqRun again[] = {{0, 0, 1, 73}, {1, 1, 5, 0}};
    step(again, "one restarted, one going on");
}

INSTANTIATE_TEST_SUITE_P(Forms, CudaLatentAttention, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "attn_kv_b" : "attn_k_b_v_b"; });

}  // namespace
}  // namespace strata
