// ModelInfo: roles, per-layer grouping, byte and parameter totals, reads per token and expert
// slices, and the split between describing a file and accepting it as runnable.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/reader.h"
#include "model/model_info.h"
#include "model_test_files.h"

namespace strata {
namespace {

using test::blk;
using test::TinyModel;

class ModelInfoTest : public ::testing::Test {
  protected:
    ModelInfo describe(const TinyModel& m) { return describe_model(m.write(path_)); }

    test::TempDir tmp_;
    std::string path_ = tmp_.file("model.gguf");
};

const ModelTensor& find(const ModelInfo& info, const std::string& name) {
    for (const ModelTensor& t : info.tensors) {
        if (info.info(t).name == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
}

TEST_F(ModelInfoTest, DenseAccountingByRoleLayerAndType) {
    test::TinySpec s = test::llama_spec();
    s.tied = false;
    const ModelInfo info = describe(test::tiny_model(s));
    ASSERT_TRUE(info.runnable()) << info.problems.front();
    ASSERT_TRUE(info.hparams.has_value());
    EXPECT_EQ(info.tensors.size(), 3u + 2u * 9u);

    // Parameters by hand: embedding and output 64*40 each, output_norm 64; per layer two norms,
    // q and o 64*64, k and v 64*32, gate/up/down 64*96.
    const uint64_t per_layer = 2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 96;
    const uint64_t params = 2 * 64 * 40 + 64 + 2 * per_layer;
    EXPECT_EQ(info.totals.params, params);
    EXPECT_EQ(info.totals.bytes, 4 * params);  // all F32
    EXPECT_EQ(info.totals.tensors, info.tensors.size());
    EXPECT_EQ(info.totals.expert_bytes, 0u);

    // Every grouping adds up to the totals.
    ByteTotals roles, types, layers = info.non_layer;
    for (const auto& [role, t] : info.by_role) roles.bytes += t.bytes, roles.params += t.params;
    for (const auto& [type, t] : info.by_type) types.bytes += t.bytes, types.tensors += t.tensors;
    for (const auto& [il, t] : info.by_layer) layers.bytes += t.bytes, layers.params += t.params;
    EXPECT_EQ(roles.bytes, info.totals.bytes);
    EXPECT_EQ(roles.params, info.totals.params);
    EXPECT_EQ(types.bytes, info.totals.bytes);
    EXPECT_EQ(types.tensors, info.totals.tensors);
    EXPECT_EQ(layers.bytes, info.totals.bytes);
    EXPECT_EQ(layers.params, info.totals.params);

    ASSERT_EQ(info.by_layer.size(), 2u);
    EXPECT_EQ(info.by_layer.at(0).tensors, 9u);
    EXPECT_EQ(info.by_layer.at(1).params, per_layer);
    EXPECT_EQ(info.non_layer.tensors, 3u);
    EXPECT_EQ(info.by_role.at(TensorRole::AttnK).params, 2u * 64 * 32);
    EXPECT_EQ(info.by_role.at(TensorRole::FfnDown).tensors, 2u);
    EXPECT_EQ(info.by_type.size(), 1u);

    const ModelTensor& q = find(info, blk(1, "attn_q"));
    EXPECT_EQ(q.role, TensorRole::AttnQ);
    EXPECT_EQ(q.layer, 1);
    EXPECT_EQ(q.expert, -1);
    EXPECT_EQ(find(info, "output.weight").layer, -1);
}

TEST_F(ModelInfoTest, ReadsPerToken) {
    test::TinySpec s = test::mixtral_spec();
    s.tied = false;
    const ModelInfo untied = describe(test::tiny_model(s));
    ASSERT_TRUE(untied.runnable()) << untied.problems.front();
    // An untied embedding is read one row per token.
    EXPECT_DOUBLE_EQ(find(untied, "token_embd.weight").reads_per_token, 1.0 / 40);
    EXPECT_DOUBLE_EQ(find(untied, "output.weight").reads_per_token, 1.0);
    EXPECT_DOUBLE_EQ(find(untied, blk(0, "attn_q")).reads_per_token, 1.0);
    EXPECT_DOUBLE_EQ(find(untied, blk(0, "ffn_gate_inp")).reads_per_token, 1.0);
    EXPECT_DOUBLE_EQ(find(untied, blk(0, "ffn_down_exps")).reads_per_token, 2.0 / 4);

    // bytes_per_token = dense bytes + embedding row + used/n of the experts, all F32.
    const uint64_t expert_bytes = 2 * 3 * 64 * 96 * 4 * 4;
    EXPECT_EQ(untied.totals.expert_bytes, expert_bytes);
    const uint64_t embd_bytes = 64 * 40 * 4;
    const double dense = static_cast<double>(untied.totals.bytes - expert_bytes - embd_bytes);
    EXPECT_DOUBLE_EQ(untied.totals.bytes_per_token, dense + 64 * 4 + expert_bytes * 0.5);
    EXPECT_EQ(untied.by_layer.at(0).expert_bytes, expert_bytes / 2);

    // A tied embedding is also the LM head: read in full.
    const ModelInfo tied = describe(test::tiny_model(test::mixtral_spec()));
    EXPECT_DOUBLE_EQ(find(tied, "token_embd.weight").reads_per_token, 1.0);
}

TEST_F(ModelInfoTest, ExpertSlicesTileFusedTensorsInOrder) {
    test::TinySpec s = test::mixtral_spec();
    s.n_embd = 256;
    s.n_ff = 512;
    s.n_expert = 8;
    s.matrix_type = TensorType::Q4_K;  // 144 bytes per 256 weights
    const ModelInfo info = describe(test::tiny_model(s));
    ASSERT_TRUE(info.runnable()) << info.problems.front();
    int fused = 0;
    for (const ModelTensor& t : info.tensors) {
        const TensorInfo& ti = info.info(t);
        const auto slices = expert_slices(info, t);
        if (!t.is_routed_expert()) {
            EXPECT_TRUE(slices.empty()) << ti.name;
            continue;
        }
        ++fused;
        SCOPED_TRACE(ti.name);
        ASSERT_EQ(slices.size(), 8u);
        EXPECT_EQ(t.n_expert_slices, 8u);
        // One expert is n_ff rows of 256 (gate, up) or n_embd rows of 512 (down).
        EXPECT_EQ(t.expert_slice_bytes, 256u * 512 / 256 * 144);
        uint64_t next = ti.offset;
        for (uint32_t e = 0; e < slices.size(); ++e) {
            EXPECT_EQ(slices[e].expert, e);
            EXPECT_EQ(slices[e].offset, next);
            EXPECT_EQ(slices[e].n_bytes, t.expert_slice_bytes);
            next += slices[e].n_bytes;
        }
        EXPECT_EQ(next, ti.offset + ti.n_bytes);
    }
    EXPECT_EQ(fused, 6);
}

TEST_F(ModelInfoTest, PerExpertTensorsAreEachOneExpert) {
    test::TinySpec s = test::mixtral_spec();
    s.split_experts = true;
    const ModelInfo info = describe(test::tiny_model(s));
    ASSERT_TRUE(info.runnable()) << info.problems.front();
    const ModelTensor& t = find(info, blk(1, "ffn_up.3"));
    EXPECT_EQ(t.role, TensorRole::ExpertUp);
    EXPECT_EQ(t.layer, 1);
    EXPECT_EQ(t.expert, 3);
    EXPECT_EQ(t.n_expert_slices, 0u);
    EXPECT_TRUE(expert_slices(info, t).empty());
    EXPECT_DOUBLE_EQ(t.reads_per_token, 0.5);
    EXPECT_EQ(info.by_role.at(TensorRole::ExpertUp).tensors, 2u * 4);
    EXPECT_EQ(info.totals.expert_bytes, 2u * 4 * 3 * 64 * 96 * 4);
}

TEST_F(ModelInfoTest, UnsupportedArchitectureIsDescribedButNotRunnable) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("general.architecture", "mamba");
    for (auto& e : m.metadata) {
        if (e.key.rfind("llama.", 0) == 0) e.key = "mamba." + e.key.substr(6);
    }
    const ModelInfo info = describe(m);
    EXPECT_FALSE(info.runnable());
    EXPECT_FALSE(info.hparams.has_value());
    EXPECT_EQ(info.arch, "mamba");
    ASSERT_EQ(info.problems.size(), 1u);
    EXPECT_NE(info.problems[0].find("architecture 'mamba' is not supported"), std::string::npos);
    // Tensors are still classified and counted.
    EXPECT_EQ(info.tensors.size(), 2u + 2u * 9u);
    EXPECT_EQ(find(info, blk(0, "attn_q")).role, TensorRole::AttnQ);
    EXPECT_GT(info.totals.bytes, 0u);
    EXPECT_EQ(info.by_layer.size(), 2u);

    auto loaded = load_model_info(m.write(path_));
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.error().message, info.problems[0]);
}

TEST_F(ModelInfoTest, ShapeErrorsMakeAFileUnrunnable) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.remove_tensor(blk(0, "attn_q"));
    m.remove_tensor(blk(1, "attn_q"));
    const ModelInfo info = describe(m);
    EXPECT_TRUE(info.hparams.has_value());
    EXPECT_EQ(info.problems.size(), 2u);
    auto loaded = load_model_info(m.write(path_));
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().message.find("blk.0.attn_q.weight is missing"), std::string::npos);
    EXPECT_NE(loaded.error().message.find("blk.1.attn_q.weight is missing"), std::string::npos);
}

TEST_F(ModelInfoTest, FarAwayLayerNumbersStaySparse) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.add_tensor(blk(2000000000, "attn_norm"), TensorType::F32, {64});
    const ModelInfo info = describe(m);
    EXPECT_EQ(info.by_layer.size(), 3u);
    EXPECT_EQ(info.by_layer.at(2000000000).tensors, 1u);
    ASSERT_EQ(info.problems.size(), 1u);
    EXPECT_NE(info.problems[0].find("belongs to layer 2000000000"), std::string::npos);
}

TEST_F(ModelInfoTest, VocabularyOnlyFile) {
    TinyModel m = test::tiny_model(test::qwen2_spec());
    m.tensors.clear();
    const ModelInfo info = describe(m);
    EXPECT_TRUE(info.vocab_only());
    EXPECT_FALSE(info.runnable());
    ASSERT_TRUE(info.hparams.has_value());
    EXPECT_EQ(info.hparams->n_vocab, 40u);
    ASSERT_EQ(info.problems.size(), 1u);
    EXPECT_NE(info.problems[0].find("vocabulary-only"), std::string::npos);
    EXPECT_EQ(info.totals.bytes, 0u);
    EXPECT_EQ(info.by_layer.size(), 2u);
}

TEST_F(ModelInfoTest, FileTypeIsOptional) {
    TinyModel m = test::tiny_model(test::llama_spec());
    EXPECT_EQ(describe(m).file_type(), 0u);
    m.set("general.file_type", uint32_t{15});
    EXPECT_EQ(describe(m).file_type(), 15u);
    m.erase("general.file_type");
    EXPECT_FALSE(describe(m).file_type().has_value());
}

}  // namespace
}  // namespace strata
