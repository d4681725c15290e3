// The gpt-oss family as a file describes it: the hyper-parameters and structure read from a tiny
// synthetic model (sliding window and its pattern, YaRN, sinks, biases, gating), the tensor checks
// a file must pass, and the published shapes the synth presets write (parameter counts, and the
// tensor types of the MXFP4_MOE mix ggml-org's GGUFs ship).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_test_support.h"
#include "gguf/gguf_file.h"
#include "gguf/reader.h"
#include "model/hparams.h"
#include "model/tensor_layout.h"
#include "model/tensor_validation.h"
#include "synth/generator.h"
#include "synth/synth_config.h"

namespace strata {
namespace {

TEST(GptOssModel, HparamsAndTensorsOfTheTinyPreset) {
    auto file = read_gguf(test::synth_test_model("tiny-gpt-oss", TensorType::F32));
    ASSERT_TRUE(file) << file.error().message;
    auto hp = load_hparams(*file);
    ASSERT_TRUE(hp) << hp.error().message;
    EXPECT_EQ(hp->arch, "gpt-oss");
    EXPECT_EQ(hp->n_swa, 16u);
    EXPECT_EQ(hp->swa_layers, (std::vector<uint8_t>{1, 0, 1, 0}));  // the even layers
    EXPECT_TRUE(hp->is_swa(0));
    EXPECT_FALSE(hp->is_swa(1));
    EXPECT_EQ(hp->rope_style, RopeStyle::Neox);
    EXPECT_EQ(hp->rope_scaling.type, "yarn");
    EXPECT_EQ(hp->rope_scaling.factor, 32.0f);
    EXPECT_EQ(hp->rope_scaling.original_context, 4096u);
    EXPECT_EQ(hp->n_ff_exp, 256u);
    EXPECT_EQ(hp->expert_gating, ExpertGating::SoftmaxTopK);
    EXPECT_EQ(hp->expert_activation, FfnActivation::SwigluOai);
    EXPECT_FALSE(hp->norm_topk_prob);
    EXPECT_TRUE(hp->has_attn_sinks);
    EXPECT_TRUE(hp->has_expert_bias);
    EXPECT_TRUE(hp->has_qkv_bias);
    EXPECT_TRUE(hp->ffn_norm_is_post_attention);
    EXPECT_FALSE(hp->tied_output);
    const TensorCheck check = check_tensors(*file, *hp);
    EXPECT_TRUE(check.errors.empty()) << check.errors.front();
    EXPECT_TRUE(check.warnings.empty()) << check.warnings.front();
    for (const char* name :
         {"blk.0.attn_sinks.weight", "blk.0.attn_output.bias", "blk.0.post_attention_norm.weight",
          "blk.3.ffn_gate_inp.bias", "blk.3.ffn_gate_exps.bias", "blk.3.ffn_down_exps.bias",
          "output.weight"}) {
        EXPECT_NE(file->find_tensor(name), nullptr) << name;
    }
    EXPECT_EQ(file->find_tensor("blk.0.ffn_norm.weight"), nullptr);
}

TEST(GptOssModel, AMissingSinkOrWindowIsAnError) {
    auto file = read_gguf(test::synth_test_model("tiny-gpt-oss", TensorType::F32));
    ASSERT_TRUE(file);
    GgufFile no_window = *file;
    std::erase_if(no_window.metadata, [](const MetadataEntry& e) {
        return e.key == "gpt-oss.attention.sliding_window";
    });
    no_window.reindex();
    auto hp = load_hparams(no_window);
    ASSERT_FALSE(hp);
    EXPECT_NE(hp.error().message.find("gpt-oss.attention.sliding_window' is missing"),
              std::string::npos);

    auto good = load_hparams(*file);
    ASSERT_TRUE(good);
    GgufFile no_sinks = *file;
    std::erase_if(no_sinks.tensors,
                  [](const TensorInfo& t) { return t.name == "blk.2.attn_sinks.weight"; });
    no_sinks.reindex();
    const TensorCheck check = check_tensors(no_sinks, *good);
    ASSERT_EQ(check.errors.size(), 1u);
    EXPECT_NE(check.errors[0].find("blk.2.attn_sinks.weight is missing"), std::string::npos);
}

TEST(GptOssModel, PublishedShapesAndTheirMxfp4Mix) {
    for (const auto& [preset, blocks] :
         {std::pair{"gpt-oss-20b", 19.75e9}, std::pair{"gpt-oss-120b", 115.6e9}}) {
        SCOPED_TRACE(preset);
        SynthConfig c;
        c.hparams = *synth_preset(preset);
        c.weights = *weight_format_from_name("MXFP4_MOE");
        auto plan = plan_synthetic_model(c);
        ASSERT_TRUE(plan) << plan.error().message;
        uint64_t embeddings = 0;
        for (size_t i = 0; i < plan->layout.size(); ++i) {
            const TensorSpec& t = plan->layout[i];
            if (t.layer < 0) embeddings += t.n_elements();
            TensorType want = TensorType::Q8_0;
            if (is_expert_role(t.role) && !t.is_bias) want = TensorType::MXFP4;
            if (t.shape.size() == 1 || t.is_bias || t.role == TensorRole::MoeRouter) {
                want = TensorType::F32;
            }
            EXPECT_EQ(plan->types[i], want) << t.name;
        }
        const double params = double(layout_parameter_count(plan->layout) - embeddings);
        EXPECT_NEAR(params, blocks, 0.01 * blocks);
        bool wrote_window = false;
        for (const auto& e : plan->metadata) {
            wrote_window = wrote_window || e.key == "gpt-oss.attention.sliding_window";
        }
        EXPECT_TRUE(wrote_window);
    }
}

}  // namespace
}  // namespace strata
