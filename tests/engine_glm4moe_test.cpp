// GLM-4.5 (glm4moe) in strata: its hyper-parameters and tensors as the reference converter
// writes them (leading dense layers, an ungated shared expert, sigmoid routing with a selection
// bias, renormalised and scaled weights, partial NEOX rope, q/k/v biases and q/k norms), the
// streamed modes giving the resident logits, the multi-token-prediction block set aside, the
// routing keys' errors, and the full-size presets' sizes and cuts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/hparams.h"
#include "model/tensor_layout.h"
#include "model/tensor_validation.h"
#include "runtime/loaded_model.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

const std::vector<int32_t> kPrompt = {1, 17, 230, 4, 99, 5, 61, 8, 140, 3, 27};

// Sets a metadata key, replacing it when present.
void set_key(GgufFile& f, const std::string& key, Value v) {
    for (MetadataEntry& m : f.metadata) {
        if (m.key == key) {
            m.value = std::move(v);
            return;
        }
    }
    f.metadata.push_back({key, std::move(v)});
    f.reindex();
}

TEST(Glm4Moe, HparamsAndTensorsAsTheConverterWritesThem) {
    auto file = read_gguf(test::synth_test_model("tiny-glm4moe", TensorType::F32));
    ASSERT_TRUE(file) << file.error().message;
    auto hp = load_hparams(*file);
    ASSERT_TRUE(hp) << hp.error().message;
    EXPECT_EQ(hp->n_layer, 4u);
    EXPECT_EQ(hp->n_leading_dense, 1u);
    EXPECT_FALSE(hp->is_moe_layer(0));
    EXPECT_TRUE(hp->is_moe_layer(1));
    EXPECT_EQ(hp->n_expert, 16u);
    EXPECT_EQ(hp->n_expert_used, 4u);
    EXPECT_EQ(hp->n_expert_shared, 1u);
    EXPECT_EQ(hp->n_ff_shexp, 256u);
    EXPECT_EQ(hp->n_ff, 512u);
    EXPECT_EQ(hp->expert_gating, ExpertGating::Sigmoid);
    EXPECT_TRUE(hp->has_selection_bias);
    EXPECT_TRUE(hp->norm_topk_prob);
    EXPECT_FLOAT_EQ(hp->expert_weights_scale, 2.5f);
    EXPECT_FALSE(hp->grouped_routing());
    EXPECT_EQ(hp->rope_style, RopeStyle::Neox);
    EXPECT_EQ(hp->n_rot, 32u);  // half of each 64-wide head
    EXPECT_TRUE(hp->has_qkv_bias);
    EXPECT_TRUE(hp->has_qk_norm);
    EXPECT_TRUE(hp->ffn_norm_is_post_attention);
    EXPECT_FALSE(hp->tied_output);
    const TensorCheck check = check_tensors(*file, *hp);
    EXPECT_TRUE(check.errors.empty()) << check.errors.front();
    EXPECT_TRUE(check.warnings.empty()) << check.warnings.front();
    // Layer 0 dense, the others with a router, its selection bias and an ungated shared expert.
    EXPECT_TRUE(file->find_tensor("blk.0.ffn_gate.weight"));
    EXPECT_FALSE(file->find_tensor("blk.0.ffn_gate_inp.weight"));
    EXPECT_TRUE(file->find_tensor("blk.1.exp_probs_b.bias"));
    EXPECT_TRUE(file->find_tensor("blk.1.ffn_gate_shexp.weight"));
    EXPECT_FALSE(file->find_tensor("blk.1.ffn_gate_inp_shexp.weight"));
    EXPECT_TRUE(file->find_tensor("blk.1.attn_q.bias"));

    // Without the selection bias the file is incomplete for this family.
    GgufFile f = *file;
    f.tensors.erase(
        std::remove_if(f.tensors.begin(), f.tensors.end(),
                       [](const TensorInfo& t) { return t.name == "blk.2.exp_probs_b.bias"; }),
        f.tensors.end());
    f.reindex();
    const TensorCheck missing = check_tensors(f, *hp);
    ASSERT_EQ(missing.errors.size(), 1u);
    EXPECT_NE(missing.errors[0].find("blk.2.exp_probs_b.bias is missing"), std::string::npos);
}

// The routing keys: groups and the gating function as the reference numbers them, each
// impossible value an error that names the key.
TEST(Glm4Moe, RoutingKeysAndTheirErrors) {
    auto file = read_gguf(test::synth_test_model("tiny-glm4moe", TensorType::F32));
    ASSERT_TRUE(file) << file.error().message;
    GgufFile f = *file;
    set_key(f, "glm4moe.expert_group_count", Value(uint32_t{4}));
    set_key(f, "glm4moe.expert_group_used_count", Value(uint32_t{2}));
    set_key(f, "glm4moe.expert_gating_func", Value(uint32_t{1}));
    auto hp = load_hparams(f);
    ASSERT_TRUE(hp) << hp.error().message;
    EXPECT_TRUE(hp->grouped_routing());
    EXPECT_EQ(hp->n_expert_group, 4u);
    EXPECT_EQ(hp->n_expert_group_used, 2u);
    EXPECT_EQ(hp->expert_gating, ExpertGating::Softmax);
    // One group is no grouping.
    set_key(f, "glm4moe.expert_group_count", Value(uint32_t{1}));
    ASSERT_TRUE(load_hparams(f));
    EXPECT_FALSE(load_hparams(f)->grouped_routing());

    const auto error = [&](const std::string& key, Value v) {
        GgufFile g = *file;
        set_key(g, "glm4moe.expert_group_count", Value(uint32_t{4}));
        set_key(g, "glm4moe.expert_group_used_count", Value(uint32_t{2}));
        set_key(g, "glm4moe." + key, std::move(v));
        auto r = load_hparams(g);
        EXPECT_FALSE(r) << key;
        return r ? std::string() : r.error().message;
    };
    EXPECT_NE(error("expert_gating_func", Value(uint32_t{4})).find("expert_gating_func"),
              std::string::npos);
    EXPECT_NE(error("expert_group_count", Value(uint32_t{3})).find("equal groups"),
              std::string::npos);
    EXPECT_NE(error("expert_group_count", Value(uint32_t{16})).find("two or more"),
              std::string::npos);
    EXPECT_NE(error("expert_group_used_count", Value(uint32_t{4})).find("expert_group_used_count"),
              std::string::npos);
    // One kept group of eight, two experts each, cannot give the four a token chooses.
    {
        GgufFile g = *file;
        set_key(g, "glm4moe.expert_group_count", Value(uint32_t{8}));
        set_key(g, "glm4moe.expert_group_used_count", Value(uint32_t{1}));
        auto r = load_hparams(g);
        ASSERT_FALSE(r);
        EXPECT_NE(r.error().message.find("fewer experts"), std::string::npos) << r.error().message;
    }
    EXPECT_NE(error("expert_weights_scale", Value(-1.0f)).find("expert_weights_scale"),
              std::string::npos);
    // A vision model's multi-section rope is refused, not run wrong.
    Array sections{ValueType::I32, {}};
    for (int32_t x : {8, 4, 4, 0}) sections.items.emplace_back(x);
    EXPECT_NE(error("rope.dimension_sections", Value(sections)).find("multi-section"),
              std::string::npos);
}

TEST(Glm4Moe, StreamingGivesTheResidentLogits) {
    const std::string& path = test::synth_test_model("tiny-glm4moe", TensorType::Q4_K);
    auto resident = test::load_in_mode(path, "resident", test::small_load_options());
    auto streaming = test::load_in_mode(path, "expert-stream", test::small_load_options());
    ASSERT_TRUE(resident && streaming);
    test::expect_same_logits(*resident->engine, *streaming->engine, kPrompt);
    EXPECT_GT(streaming->store->stats().bytes_from_disk, 0u);
}

// The multi-token-prediction block after the trunk: neither loaded, nor placed, nor counted,
// and the logits are the trunk's.
TEST(Glm4Moe, MultiTokenPredictionBlockIsSetAside) {
    const std::string& plain = test::synth_test_model("tiny-glm4moe", TensorType::Q4_K);
    test::TempDir dir;
    SynthConfig config;
    config.hparams = *synth_preset("tiny-glm4moe");
    config.hparams.n_layer_nextn = 1;
    config.weights = TensorType::Q4_K;
    config.threads = 2;
    const std::string with_mtp = dir.file("tiny-glm4moe-mtp.gguf");
    auto written = write_synthetic_model(config, with_mtp, /*overwrite=*/true);
    ASSERT_TRUE(written) << written.error().message;
    for (const std::string mode : {"resident", "expert-stream"}) {
        SCOPED_TRACE(mode);
        auto want = test::load_in_mode(plain, mode, test::small_load_options());
        auto got = test::load_in_mode(with_mtp, mode, test::small_load_options());
        ASSERT_TRUE(want && got);
        ASSERT_TRUE(got->info.hparams);
        EXPECT_EQ(got->info.hparams->n_layer, 4u);
        EXPECT_EQ(got->info.hparams->n_layer_nextn, 1u);
        EXPECT_GE(got->info.set_aside.size(), 15u);
        EXPECT_EQ(got->info.totals.bytes, want->info.totals.bytes);
        ASSERT_EQ(got->plan.has_value(), want->plan.has_value());
        if (got->plan) {
            EXPECT_EQ(got->plan->memory.resident_weights, want->plan->memory.resident_weights);
            EXPECT_EQ(got->plan->memory.expert_cache, want->plan->memory.expert_cache);
        }
        EXPECT_EQ(got->loaded_bytes, want->loaded_bytes);
        test::expect_same_logits(*want->engine, *got->engine, kPrompt);
    }
}

struct Sizes {
    double total = 0, active = 0, bytes = 0;
};

// Parameters of the trunk and those read per token besides the embedding and head (the
// non-expert weights, k routed experts of n and the shared one), and the Q4_K_M file's bytes.
Sizes preset_sizes(const std::string& preset) {
    ModelHparams hp = with_layout_defaults(*synth_preset(preset));
    hp.n_vocab = 151552;
    hp.n_layer_nextn = 0;
    Sizes s;
    double experts = 0, embedding = 0;
    for (const TensorSpec& t : tensor_layout(hp)) {
        const double n = double(t.n_elements());
        s.total += n;
        if (is_expert_role(t.role)) experts += n;
        if (t.role == TensorRole::TokenEmbedding || t.role == TensorRole::Output) embedding += n;
    }
    s.active = s.total - embedding - experts * (1.0 - double(hp.n_expert_used) / hp.n_expert);
    SynthConfig config;
    config.hparams = *synth_preset(preset);
    config.weights = WeightFormat(TensorType::Q4_K, QuantMix::Q4_K_M);
    auto plan = plan_synthetic_model(config);
    EXPECT_TRUE(plan) << plan.error().message;
    if (!plan) return s;
    for (size_t i = 0; i < plan->layout.size(); ++i) {
        const auto info = tensor_type_info(plan->types[i]);
        EXPECT_TRUE(info);
        if (!info) continue;
        s.bytes += double(plan->layout[i].n_elements()) / info->block_size * info->type_size;
    }
    std::printf("%s: %.1f B parameters (%.1f B active), %.1f GB at Q4_K_M with its MTP block\n",
                preset.c_str(), s.total / 1e9, s.active / 1e9, s.bytes / 1e9);
    return s;
}

// The full-size presets have the sizes their names say (with GLM's 151552-token vocabulary):
// 355B-A32B and 106B-A12B, the active parts counting the embedding out.
TEST(Glm4MoePreset, HasTheParametersItsNameSays) {
    const Sizes big = preset_sizes("glm-4.5");
    EXPECT_GT(big.total, 350e9);
    EXPECT_LT(big.total, 356e9);
    EXPECT_GT(big.active, 30e9);
    EXPECT_LT(big.active, 34e9);
    EXPECT_GT(big.bytes, 200e9);
    EXPECT_LT(big.bytes, 230e9);
    const Sizes air = preset_sizes("glm-4.5-air");
    EXPECT_GT(air.total, 104e9);
    EXPECT_LT(air.total, 108e9);
    EXPECT_GT(air.active, 10e9);
    EXPECT_LT(air.active, 12.5e9);
    EXPECT_GT(air.bytes, 60e9);
    EXPECT_LT(air.bytes, 72e9);
}

// A cut keeps the leading dense layers while a layer with experts follows them.
TEST(Glm4MoePreset, CutsKeepALayerWithExperts) {
    const ModelHparams hp = *synth_preset("glm-4.5");
    EXPECT_EQ(hp.n_leading_dense, 3u);
    EXPECT_EQ(hp.n_layer_nextn, 1u);
    EXPECT_EQ(cut_to_layers(hp, 10).n_leading_dense, 3u);
    EXPECT_EQ(cut_to_layers(hp, 10).n_layer, 10u);
    EXPECT_EQ(cut_to_layers(hp, 4).n_leading_dense, 3u);
    EXPECT_EQ(cut_to_layers(hp, 3).n_leading_dense, 2u);
    EXPECT_EQ(cut_to_layers(hp, 1).n_leading_dense, 0u);
    EXPECT_TRUE(validate_synth_shape(cut_to_layers(hp, 2)));
    ModelHparams all_dense = hp;
    all_dense.n_layer = 3;
    EXPECT_FALSE(validate_synth_shape(all_dense));
}

}  // namespace
}  // namespace strata
