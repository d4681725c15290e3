// The hybrid models' operations on the CUDA backend against the CPU backend's: the Gated
// DeltaNet (convolution with its carried inputs, L2-normalised q and k, the gates, the delta rule
// over each sequence's recurrent state, the gated output norm) on fresh random inputs and
// weights, for every head size the GPU takes and head counts and channel counts that do not fill
// the kernels' blocks: prompts of several sequences in one batch (one of two chunks and a part,
// one shorter than a chunk: both backends compute them by chunks, in different orders of the same
// sums, and a run of 5 tokens the GPU computes token by token), then decode steps of both
// sequences together, then one sequence started again (its state forgotten, the other's
// kept); value heads tiled over the key heads (qwen35) and grouped per key head (qwen3next).
// Then the gated attention's pieces on a tiny-qwen35 layer: the query/gate split, multi-section
// rope with partial rotation, and the sigmoid gate of the output. Then the ungrouping of
// qwen3next's fused projections against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "device_buffers.h"
#include "engine_test_support.h"
#include "model/rope.h"
#include "model/tensor_layout.h"
#include "runtime/loaded_model.h"
#include "synth/synth_config.h"
#include "test_support.h"
#include "ungroup_columns_reference.h"

namespace strata {
namespace {

using test::randn;
using Weight = test::HostDeviceWeight;

Weight weight(std::vector<float> values, int64_t cols) {
    return test::host_device_weight(std::move(values), cols);
}

struct Shape {
    int S, k_heads, v_heads, d_conv;
    bool grouped = false;  // value heads grouped per key head (qwen3next)
};

class CudaDeltaNet : public ::testing::TestWithParam<Shape> {};

TEST_P(CudaDeltaNet, MatchesTheCpuBackend) {
    STRATA_REQUIRE_GPU();
    const Shape sh = GetParam();
    // A one-layer hybrid: tiny-qwen35's, its layer 0 (a delta-net layer) with these heads.
    ModelHparams hp = *synth_preset("tiny-qwen35");
    hp.n_layer = 1;
    hp.recurrent_layers = {true};
    hp.ssm_d_state = uint32_t(sh.S);
    hp.ssm_n_group = uint32_t(sh.k_heads);
    hp.ssm_dt_rank = uint32_t(sh.v_heads);
    hp.ssm_d_inner = uint32_t(sh.S * sh.v_heads);
    hp.ssm_d_conv = uint32_t(sh.d_conv);
    hp.ssm_grouped_heads = sh.grouped;
    BackendConfig c;
    c.hp = hp;
    auto rope = make_rope_config(hp, nullptr);
    ASSERT_TRUE(rope) << rope.error().message;
    c.rope = *rope;
    c.n_ctx = 256;
    c.n_seq = 2;
    c.max_batch = 176;
    c.threads = 2;
    auto cpu_made = make_cpu_backend(c);
    auto cuda_made = make_cuda_backend(c, 0);
    ASSERT_TRUE(cpu_made) << cpu_made.error().message;
    ASSERT_TRUE(cuda_made) << cuda_made.error().message;
    Backend& cpu = **cpu_made;
    Backend& cuda = **cuda_made;

    const int64_t channels = int64_t(hp.conv_channels()), value_dim = int64_t(hp.ssm_value_dim());
    const int64_t hv = sh.v_heads;
    const Weight conv = weight(randn(size_t(channels * sh.d_conv), 1, 0.5f), sh.d_conv);
    const Weight dt = weight(randn(size_t(hv), 2, 0.5f), hv);
    std::vector<float> a_log = randn(size_t(hv), 3, 0.5f);
    for (float& v : a_log) v = -std::exp(v);
    const Weight a = weight(a_log, hv);
    const Weight norm = weight(randn(size_t(sh.S), 4, 0.1f, 1.0f), sh.S);
    const DeltaNetWeights host_w{&conv.host_view, &dt.host_view, &a.host_view, &norm.host_view};
    const DeltaNetWeights dev_w{&conv.device_view, &dt.device_view, &a.device_view,
                                &norm.device_view};

    uint32_t seed = 10;
    const auto step = [&](std::span<const SeqRun> runs, const char* what) {
        int64_t n = 0;
        for (const SeqRun& r : runs) n = std::max(n, r.row0 + r.n);
        const std::vector<float> mixed = randn(size_t(n * channels), seed++);
        const std::vector<float> z = randn(size_t(n * value_dim), seed++);
        const std::vector<float> beta = randn(size_t(n * hv), seed++);
        const std::vector<float> alpha = randn(size_t(n * hv), seed++, 1.0f, -1.0f);
        for (Backend* b : {&cpu, &cuda}) {
            b->write_act(Act::Mixed, mixed.data(), n, channels);
            b->write_act(Act::Gate, z.data(), n, value_dim);
            b->write_act(Act::Beta, beta.data(), n, hv);
            b->write_act(Act::Alpha, alpha.data(), n, hv);
        }
        cpu.delta_net(0, host_w, runs);
        cuda.delta_net(0, dev_w, runs);
        const float* want = cpu.peek(Act::AttnOut, n);
        const std::vector<float> w(want, want + n * value_dim);
        const float* got = cuda.peek(Act::AttnOut, n);
        // Different orders of the same sums: rounding apart, where a wrong state, gate, chunk
        // edge or head pairing is off by O(1).
        const double e = test::rel_l2({got, w.size()}, w);
        EXPECT_LE(e, 2e-5) << what;
        std::printf("  S %3d, %d key / %2d value heads%s, %d taps: %-28s relative error %.2e\n",
                    sh.S, sh.k_heads, sh.v_heads, sh.grouped ? " grouped" : "", sh.d_conv, what, e);
    };
    // Two prompts in one batch: two chunks and a part, and less than a chunk.
    const SeqRun prompts[] = {{0, 0, 150, 0}, {1, 150, 20, 0}};
    step(prompts, "prompts of two sequences");
    for (int64_t i = 0; i < 3; ++i) {
        const SeqRun decode[] = {{1, 0, 1, 20 + i}, {0, 1, 1, 150 + i}};
        step(decode, "decode steps of both");
    }
    // Sequence 1 again from its start; sequence 0 goes on.
    cpu.reset_recurrent(1);
    cuda.reset_recurrent(1);
    const SeqRun again[] = {{0, 0, 1, 153}, {1, 1, 5, 0}};
    step(again, "one restarted, one going on");
    const SeqRun last[] = {{1, 0, 1, 5}, {0, 1, 1, 154}};
    step(last, "decode after the restart");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDeltaNet,
                         ::testing::Values(Shape{32, 1, 3, 4}, Shape{64, 2, 4, 4},
                                           Shape{64, 3, 6, 3}, Shape{128, 2, 6, 4},
                                           Shape{128, 4, 8, 5}, Shape{64, 2, 4, 4, true},
                                           Shape{128, 2, 6, 4, true}),
                         [](const auto& p) {
                             const Shape& s = p.param;
                             return "S" + std::to_string(s.S) + "_k" + std::to_string(s.k_heads) +
                                    "_v" + std::to_string(s.v_heads) + "_taps" +
                                    std::to_string(s.d_conv) + (s.grouped ? "_grouped" : "");
                         });

// The gated attention layer of tiny-qwen35 (layer 3): its query and gate apart, multi-section
// rope (some pairs unturned) over part of each head with the q/k norms, attention, then the gate on
// its output.
TEST(CudaGatedAttention, MatchesTheCpuBackend) {
    STRATA_REQUIRE_GPU();
    const std::string& path = test::synth_test_model("tiny-qwen35", TensorType::F32);
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 64;
    auto host = LoadedModel::load(path, o);
    ASSERT_TRUE(host) << host.error().message;
    o.gpu = 0;
    auto device = LoadedModel::load(path, o);
    ASSERT_TRUE(device) << device.error().message;
    const ModelHparams hp = *(*host)->info.hparams;
    const int layer = 3;
    ASSERT_FALSE(hp.is_recurrent(layer));
    BackendConfig c;
    c.hp = hp;
    auto rope = make_rope_config(hp, &(*host)->store->globals().weight(TensorRole::RopeFreqs));
    ASSERT_TRUE(rope) << rope.error().message;
    c.rope = *rope;
    // Text positions leave a fourth section's pairs unturned; the preset's sections (as the
    // published ones) have none, so some are marked here, the same for both backends.
    c.rope.unrotated_pairs.assign(size_t(hp.n_rot / 2), false);
    for (size_t i = 3; i < c.rope.unrotated_pairs.size(); i += 4) c.rope.unrotated_pairs[i] = true;
    c.n_ctx = 64;
    c.n_seq = 2;
    c.max_batch = 16;
    c.threads = 2;
    auto cpu_made = make_cpu_backend(c);
    auto cuda_made = make_cuda_backend(c, 0);
    ASSERT_TRUE(cpu_made) << cpu_made.error().message;
    ASSERT_TRUE(cuda_made) << cuda_made.error().message;
    Backend& cpu = **cpu_made;
    Backend& cuda = **cuda_made;
    const LayerView& hw = **(*host)->store->acquire_layer(layer);
    const LayerView& dw = **(*device)->store->acquire_layer(layer);

    const int64_t n = 11, heads = hp.n_head_at(layer), kv_heads = hp.n_head_kv_at(layer);
    const int64_t dq = heads * hp.head_dim_k, dk = kv_heads * hp.head_dim_k,
                  dv = kv_heads * hp.head_dim_v, da = heads * hp.head_dim_v;
    const auto expect_close = [&](Act act, int64_t rows, int64_t cols, double tol,
                                  const char* what) {
        const float* want = cpu.peek(act, rows);
        const std::vector<float> w(want, want + rows * cols);
        const float* got = cuda.peek(act, rows);
        const double e = test::rel_l2({got, w.size()}, w);
        EXPECT_LE(e, tol) << what;
        std::printf("  %-30s relative error %.2e (bound %.0e)\n", what, e, tol);
    };
    const std::vector<float> mixed = randn(size_t(n * 2 * dq), 21);
    const std::vector<float> k = randn(size_t(n * dk), 22);
    const std::vector<float> v = randn(size_t(n * dv), 23);
    for (Backend* b : {&cpu, &cuda}) {
        b->write_act(Act::Mixed, mixed.data(), n, 2 * dq);
        b->split_query_gate(layer, n);
        b->write_act(Act::K, k.data(), n, dk);
        b->write_act(Act::V, v.data(), n, dv);
    }
    expect_close(Act::Q, n, dq, 0.0, "query split");
    expect_close(Act::Gate, n, dq, 0.0, "gate split");
    const auto attend = [&](std::span<const SeqRun> runs) {
        cpu.rope_store_kv(layer, hw.weight(TensorRole::AttnQNorm), hw.weight(TensorRole::AttnKNorm),
                          runs);
        cuda.rope_store_kv(layer, dw.weight(TensorRole::AttnQNorm),
                           dw.weight(TensorRole::AttnKNorm), runs);
    };
    // Positions 5.. so every rotated pair turns and the unrotated ones must not.
    const SeqRun prompt{0, 0, n, 5};
    attend({&prompt, 1});
    expect_close(Act::Q, n, dq, 1e-5, "multi-section rope (+ q norm)");
    expect_close(Act::K, n, dk, 1e-5, "multi-section rope (+ k norm)");
    cpu.attention(layer, TensorView{}, {&prompt, 1});
    cuda.attention(layer, TensorView{}, {&prompt, 1});
    for (Backend* b : {&cpu, &cuda}) b->sigmoid_mul(Act::AttnOut, Act::Gate, da, n);
    // The CPU rounds attention weights to fp16 (cuda_backend_ops_test says why).
    expect_close(Act::AttnOut, n, da, 1e-3, "attention, gated");
    (*host)->store->release_layer(layer);
    (*device)->store->release_layer(layer);
}

// qwen3next's fused projections ungrouped on the GPU, against the scalar reference: ssm_in's
// q/k/v/z and ssm_ba's beta/alpha per key head, and parts that leave columns as they were.
TEST(CudaUngroupColumns, MatchesTheScalarReference) {
    STRATA_REQUIRE_GPU();
    const ModelHparams hp = test::ungroup_test_hparams();
    auto made = make_cuda_backend(test::ungroup_test_config(hp), 0);
    ASSERT_TRUE(made) << made.error().message;
    test::expect_ungroups_every_layout(**made, hp);
}

}  // namespace
}  // namespace strata
