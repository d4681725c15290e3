// The CUDA backend against the CPU backend through the whole engine: synthetic models of every
// architecture family and every weight type the GPU computes, evaluated as a prompt batch
// (crossing a batch boundary), then as decode steps (captured into CUDA graphs and replayed),
// must give the CPU's logits within the rounding the two backends differ by. The CPU rounds
// activations to the weight's dot-product type (8-bit blocks for the quantized types, fp16 or
// bf16 for float weights) and the GPU does not always, so the bound is relative to the size of
// the logits: ||gpu - cpu|| <= tol * ||cpu|| per row, tol from the activation rounding of the
// type (an int8 grid step is 1/254 of a block's range; a wrong kernel is off by O(1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/routing_trace.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "runtime/loaded_model.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

struct Outputs {
    std::vector<std::vector<float>> rows;  // prompt rows, then one row per decode step
    std::vector<int32_t> greedy;           // argmax of every row
};

int32_t argmax(const std::vector<float>& row) {
    return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// MoE models route every token of both runs to the experts of one fixed trace: a router near
// tie that the two backends' rounding breaks differently would otherwise send a token to other
// experts and make the rows incomparable. (Routing itself is compared on the GPU by
// CudaBackendOps and CudaMoeRoute, and end to end by the golden greedy tests.)
std::shared_ptr<const engine::RoutingTrace> trace_for(const std::string& path) {
    auto file = read_gguf(path);
    EXPECT_TRUE(file) << (file ? "" : file.error().message);
    if (!file) return nullptr;
    auto info = load_model_info(std::move(*file));
    EXPECT_TRUE(info) << (info ? "" : info.error().message);
    if (!info || !info->hparams || !info->hparams->is_moe()) return nullptr;
    const ModelHparams& hp = *info->hparams;
    return std::make_shared<engine::RoutingTrace>(engine::make_local_trace(
        int(hp.n_layer), int(hp.n_expert), int(hp.n_expert_used), 64, 0.5, 1.0, 3));
}

Outputs evaluate(const std::string& path, int gpu, KvType kv) {
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 96;
    options.engine.max_batch = 8;  // the 12-token prompt crosses a batch boundary
    options.engine.kv_type = kv;
    options.engine.forced_routing = trace_for(path);
    options.gpu = gpu;
    auto loaded = LoadedModel::load(path, options);
    EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().message);
    Outputs out;
    if (!loaded) return out;
    engine::Engine& e = *(*loaded)->engine;
    std::vector<float> logits;
    const std::vector<int32_t> prompt{1, 17, 33, 49, 65, 81, 97, 113, 129, 145, 161, 177};
    EXPECT_TRUE(e.eval(prompt, engine::LogitsWanted::All, logits));
    const size_t v = e.n_vocab();
    for (size_t r = 0; r < prompt.size(); ++r) {
        out.rows.emplace_back(logits.begin() + long(r * v), logits.begin() + long((r + 1) * v));
    }
    // Decode steps feed fixed tokens, so both backends see the same inputs even where a near
    // tie would make their greedy choices differ.
    for (int i = 0; i < 24; ++i) {
        const int32_t t = int32_t(200 + 13 * i) % int32_t(v);
        EXPECT_TRUE(e.eval({&t, 1}, engine::LogitsWanted::Last, logits));
        out.rows.push_back(logits);
    }
    for (const auto& row : out.rows) out.greedy.push_back(argmax(row));
    return out;
}

double tolerance(TensorType t) {
    switch (t) {
        case TensorType::F32:
            // The attention weights: the CPU rounds them to fp16 as the reference does, the GPU's
            // online softmax keeps them in fp32 (2^-11 relative each).
            return 1e-3;
        case TensorType::F16:
        case TensorType::BF16:
            return 1e-2;  // the CPU rounds activations to fp16 / bf16 (bf16: 2^-8)
        default:
            // 8-bit activation blocks: both backends quantize the same way, but an activation a
            // rounding away from a grid midpoint lands on the other code (1/254 of its block's
            // range), and such flips compound over the layers and the decode steps.
            return 6e-2;
    }
}

// How far a model's logits move under a small perturbation, relative to the llama preset's: the
// CPU's own f16 against q8_0 KV cache, mean relative error over the rows (F32 weights). Every
// difference between the backends is such a perturbation, so a model that amplifies them (the
// tiny gpt-oss moves about 2.7 times as far as the tiny llama) gets a bound that much wider; at
// least 1, at most 4, so no model's bound is tighter than the llama's or loose enough to hide a
// wrong kernel.
double sensitivity(const std::string& preset) {
    static std::map<std::string, double> moved;
    const auto move_of = [](const std::string& p) {
        if (auto it = moved.find(p); it != moved.end()) return it->second;
        const std::string& path = test::synth_test_model(p, TensorType::F32);
        const Outputs f16 = evaluate(path, -1, KvType::F16);
        const Outputs q8 = evaluate(path, -1, KvType::Q8_0);
        double sum = 0;
        for (size_t r = 0; r < f16.rows.size() && r < q8.rows.size(); ++r) {
            sum += test::rel_l2(f16.rows[r], q8.rows[r]);
        }
        return moved[p] = sum / double(std::max<size_t>(1, f16.rows.size()));
    };
    const double reference = move_of("tiny");
    // A random router's sigmoid scores crowd around one half, so the k-th and (k+1)-th experts
    // are near ties and 8-bit activations flip more choices than a softmax router's: the cache's
    // rounding above does not reach the router, so it does not see this.
    const auto hp = synth_preset(preset);
    const double routing = hp && hp->expert_gating == ExpertGating::Sigmoid ? 1.5 : 1.0;
    return std::clamp(routing * move_of(preset) / reference, 1.0, 4.0);
}

struct Case {
    std::string preset;
    TensorType type;
    KvType kv = KvType::F16;
    // The greedy choices must agree too (float weights, where the rounding the two backends
    // differ by is far below the gaps between the tiny models' top logits).
    bool greedy = false;
};

class CudaEngine : public ::testing::TestWithParam<Case> {};

TEST_P(CudaEngine, GivesTheLogitsOfTheCpuBackend) {
    STRATA_REQUIRE_GPU();
    const Case& c = GetParam();
    const std::string& path = test::synth_test_model(c.preset, c.type);
    const Outputs cpu = evaluate(path, -1, c.kv);
    const Outputs gpu = evaluate(path, 0, c.kv);
    ASSERT_EQ(cpu.rows.size(), gpu.rows.size());
    // A hybrid's recurrent state carries every step's rounding into all later ones: its decode
    // rows drift further from the CPU's than an attention model's do.
    const auto hp = synth_preset(c.preset);
    ASSERT_TRUE(hp) << c.preset;
    const double tol = tolerance(c.type) * (c.kv == KvType::Q8_0 ? 1.5 : 1.0) *
                       (hp->has_recurrent() && c.type != TensorType::F32 ? 1.5 : 1.0) *
                       sensitivity(c.preset);
    double worst = 0, sum = 0, worst_prompt = 0;
    for (size_t r = 0; r < cpu.rows.size(); ++r) {
        ASSERT_EQ(gpu.rows[r].size(), cpu.rows[r].size());
        const double e = test::rel_l2(gpu.rows[r], cpu.rows[r]);
        worst = std::max(worst, e);
        if (r < 12) worst_prompt = std::max(worst_prompt, e);
        sum += e;
        EXPECT_LE(e, tol) << "row " << r << (r < 12 ? " (prompt)" : " (decode)");
    }
    // With 8-bit activations, rounding flips make a few rows worse; a wrong kernel makes them
    // all so. (Float types differ by rounding alone, about as much in every row.)
    if (c.greedy) {
        EXPECT_EQ(gpu.greedy, cpu.greedy) << "greedy ids";
    }
    const double mean = sum / double(cpu.rows.size());
    const bool float_type =
        c.type == TensorType::F32 || c.type == TensorType::F16 || c.type == TensorType::BF16;
    if (!float_type) {
        EXPECT_LE(mean, tol / 2) << "mean over the rows";
    }
    std::printf(
        "%-14s %-7s kv %-4s worst relative error %.2e (prompt rows %.2e), mean %.2e (bound "
        "%.0e)\n",
        c.preset.c_str(), std::string(tensor_type_name(c.type)).c_str(),
        std::string(kv_type_name(c.kv)).c_str(), worst, worst_prompt, mean, tol);
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (TensorType t :
         {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
          TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
          TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_NL,
          TensorType::IQ4_XS, TensorType::MXFP4}) {
        out.push_back({"tiny", t});
    }
    for (const char* preset :
         {"tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen2moe", "tiny-qwen3moe"}) {
        out.push_back({preset, TensorType::Q8_0});
        out.push_back({preset, TensorType::Q4_K});
    }
    // gpt-oss: sinks, windowed layers whose rings wrap within the run, expert biases and the
    // clamped SwiGLU (MXFP4 experts, as its files have them).
    for (TensorType t : {TensorType::F32, TensorType::Q8_0, TensorType::Q4_K, TensorType::MXFP4}) {
        out.push_back({"tiny-gpt-oss", t});
    }
    out.push_back({"tiny-gpt-oss", TensorType::Q8_0, KvType::Q8_0});
    // The hybrids (Gated DeltaNet layers and gated attention): a prompt in two batches carries
    // the recurrent state across them, the decode steps replay it in graphs.
    // Qwen3-Next: value heads grouped per key head, its fused projections (ssm_in, ssm_ba)
    // ungrouped on the device, plain NEOX rope; -qkv: the current converter's split q/k/v and z.
    // GLM-4.5: a leading dense layer, sigmoid routing with a selection bias on the device, an
    // ungated shared expert, partial NEOX rope, q/k/v biases and q/k norms.
    for (TensorType t : {TensorType::F32, TensorType::Q8_0, TensorType::Q4_K}) {
        out.push_back({"tiny-glm4moe", t});
    }
    // DeepSeek-V3 / Kimi K2: latent attention (the absorbed queries, the latent cache, decode
    // positions split over blocks), grouped sigmoid routing, a leading dense layer; -kvb: the
    // earlier files' attn_kv_b. The GPU's latent attention reads the f16 cache only.
    out.push_back({"tiny-deepseek2", TensorType::F32});
    out.push_back({"tiny-deepseek2", TensorType::Q8_0});
    out.push_back({"tiny-deepseek2-kvb", TensorType::F32});
    for (const char* preset : {"tiny-qwen35", "tiny-qwen35moe", "tiny-qwen3next"}) {
        out.push_back({preset, TensorType::F32, KvType::F16, true});
        out.push_back({preset, TensorType::Q8_0});
        out.push_back({preset, TensorType::Q4_K});
    }
    out.push_back({"tiny-qwen3next-qkv", TensorType::F32, KvType::F16, true});
    out.push_back({"tiny-qwen3next-qkv", TensorType::Q8_0});
    out.push_back({"tiny-qwen35", TensorType::Q8_0, KvType::Q8_0});
    out.push_back({"tiny", TensorType::Q8_0, KvType::Q8_0});
    out.push_back({"tiny-qwen3", TensorType::Q4_K, KvType::Q8_0});
    return out;
}

// A hybrid model on the GPU keeps a prefix only whole (engine_hybrid_test's rule): cut shorter,
// the sequence starts again with its recurrent state in GPU memory forgotten, and the same prompt
// gives the same logits as the first time.
TEST(CudaEngineHybrid, ForgetsTheRecurrentStateWhenTheSequenceStartsAgain) {
    STRATA_REQUIRE_GPU();
    const std::string& path = test::synth_test_model("tiny-qwen35", TensorType::Q8_0);
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 96;
    options.gpu = 0;
    auto loaded = LoadedModel::load(path, options);
    ASSERT_TRUE(loaded) << loaded.error().message;
    engine::Engine& e = *(*loaded)->engine;
    const std::vector<int32_t> prompt{1, 17, 33, 49, 65, 81, 97};
    std::vector<float> fresh, again, logits;
    ASSERT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, fresh));
    const int32_t t = 5;
    ASSERT_TRUE(e.eval({&t, 1}, engine::LogitsWanted::Last, logits));
    EXPECT_EQ(e.truncate(3), 0u);
    ASSERT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, again));
    EXPECT_LE(test::rel_l2(again, fresh), 1e-6) << "the recurrent state was not forgotten";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngine, ::testing::ValuesIn(cases()), [](const auto& p) {
    std::string n = p.param.preset + "_" + std::string(tensor_type_name(p.param.type)) + "_kv_" +
                    std::string(kv_type_name(p.param.kv));
    for (char& ch : n) {
        if (ch == '-') ch = '_';
    }
    return n;
});

}  // namespace
}  // namespace strata
