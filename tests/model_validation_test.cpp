// Tensor tables checked against the hyper-parameters: consistent files of every supported family
// pass, and each kind of mismatch is reported naming the tensor with its expected and actual shape.
#include <gtest/gtest.h>

#include "model/hparams.h"
#include "model/tensor_validation.h"
#include "model_test_files.h"

namespace strata {
namespace {

using test::blk;
using test::TinyModel;

class ValidationTest : public ::testing::Test {
  protected:
    TensorCheck check(const TinyModel& m) {
        file_ = m.write(path_);
        auto hp = load_hparams(file_);
        EXPECT_TRUE(hp.ok()) << hp.error().message;
        if (!hp.ok()) return {};
        return check_tensors(file_, *hp);
    }
    // Checks a file that must have exactly one error and returns it.
    std::string one_error(const TinyModel& m) {
        TensorCheck c = check(m);
        if (c.errors.size() != 1) {
            ADD_FAILURE() << "expected one error, got " << c.errors.size();
            for (const auto& e : c.errors) ADD_FAILURE() << "error: " << e;
        }
        return c.errors.empty() ? "" : c.errors.front();
    }

    test::TempDir tmp_;
    std::string path_ = tmp_.file("model.gguf");
    GgufFile file_;
};

TEST_F(ValidationTest, ConsistentFilesOfEveryFamilyPass) {
    struct Case {
        const char* what;
        test::TinySpec spec;
    };
    test::TinySpec untied = test::llama_spec();
    untied.tied = false;
    test::TinySpec split = test::mixtral_spec();
    split.split_experts = true;
    test::TinySpec quantized = test::mixtral_spec();
    quantized.n_embd = 256;
    quantized.n_ff = 512;
    quantized.matrix_type = TensorType::Q4_K;
    for (const Case& c :
         {Case{"llama", test::llama_spec()}, Case{"llama untied", untied},
          Case{"mixtral", test::mixtral_spec()}, Case{"mixtral per-expert tensors", split},
          Case{"mixtral Q4_K", quantized}, Case{"qwen2", test::qwen2_spec()},
          Case{"qwen3", test::qwen3_spec()}, Case{"qwen2moe", test::qwen2moe_spec()},
          Case{"qwen3moe", test::qwen3moe_spec()}}) {
        SCOPED_TRACE(c.what);
        TensorCheck r = check(test::tiny_model(c.spec));
        EXPECT_TRUE(r.errors.empty()) << r.errors.front();
        EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
    }
}

TEST_F(ValidationTest, WrongShapeNamesTensorExpectedAndActual) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.tensor(blk(1, "attn_q"))->shape = {64, 32};
    EXPECT_EQ(one_error(m), path_ +
                                ": tensor blk.1.attn_q.weight has shape [64, 32] but this llama "
                                "model needs [64, 64] = [n_embd, n_head*head_dim]");

    m = test::tiny_model(test::llama_spec());
    m.tensor(blk(0, "attn_k"))->shape = {64, 64};  // as if there were no GQA
    EXPECT_NE(one_error(m).find("blk.0.attn_k.weight has shape [64, 64] but this llama model "
                                "needs [64, 32] = [n_embd, n_head_kv*head_dim]"),
              std::string::npos);

    m = test::tiny_model(test::llama_spec());
    m.tensor(blk(0, "ffn_down"))->shape = {64, 96};  // transposed
    EXPECT_NE(one_error(m).find("needs [96, 64] = [n_ff, n_embd]"), std::string::npos);
}

TEST_F(ValidationTest, MissingRequiredTensor) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.remove_tensor(blk(1, "attn_q"));
    EXPECT_EQ(one_error(m), path_ +
                                ": tensor blk.1.attn_q.weight is missing; a llama model needs it "
                                "with shape [64, 64] = [n_embd, n_head*head_dim]");
    m = test::tiny_model(test::llama_spec());
    m.remove_tensor("output_norm.weight");
    EXPECT_NE(one_error(m).find("tensor output_norm.weight is missing"), std::string::npos);
}

TEST_F(ValidationTest, TokenEmbeddingMustMatchVocabulary) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.vocab_size", uint32_t{50});
    EXPECT_NE(one_error(m).find("token_embd.weight has shape [64, 40] but this llama model needs "
                                "[64, 50] = [n_embd, n_vocab]"),
              std::string::npos);
}

TEST_F(ValidationTest, ExpertTensorsNeedOneSlicePerExpert) {
    TinyModel m = test::tiny_model(test::mixtral_spec());
    m.tensor(blk(0, "ffn_up_exps"))->shape = {64, 96, 3};
    EXPECT_NE(one_error(m).find("blk.0.ffn_up_exps.weight has shape [64, 96, 3] but this llama "
                                "model needs [64, 96, 4] = [n_embd, n_ff_exp, n_expert]"),
              std::string::npos);

    m = test::tiny_model(test::mixtral_spec());
    m.tensor(blk(1, "ffn_gate_inp"))->shape = {64, 8};
    EXPECT_NE(one_error(m).find("needs [64, 4] = [n_embd, n_expert]"), std::string::npos);

    test::TinySpec split = test::mixtral_spec();
    split.split_experts = true;
    m = test::tiny_model(split);
    m.remove_tensor(blk(0, "ffn_down.3"));
    EXPECT_NE(one_error(m).find("tensor blk.0.ffn_down.3.weight is missing"), std::string::npos);
}

TEST_F(ValidationTest, ArchitectureSpecificTensorsAreRequired) {
    TinyModel m = test::tiny_model(test::qwen2_spec());
    m.remove_tensor(blk(0, "attn_v", "bias"));
    EXPECT_NE(one_error(m).find("blk.0.attn_v.bias is missing; a qwen2 model needs it"),
              std::string::npos);

    m = test::tiny_model(test::qwen3_spec());
    m.remove_tensor(blk(1, "attn_k_norm"));
    EXPECT_NE(one_error(m).find("blk.1.attn_k_norm.weight is missing; a qwen3 model needs it with "
                                "shape [16] = [head_dim]"),
              std::string::npos);

    m = test::tiny_model(test::qwen2moe_spec());
    m.remove_tensor(blk(0, "ffn_gate_inp_shexp"));
    EXPECT_NE(one_error(m).find("blk.0.ffn_gate_inp_shexp.weight is missing"), std::string::npos);
    m = test::tiny_model(test::qwen2moe_spec());
    m.tensor(blk(1, "ffn_down_shexp"))->shape = {32, 64};
    EXPECT_NE(one_error(m).find("needs [48, 64] = [n_ff_shexp, n_embd]"), std::string::npos);
}

TEST_F(ValidationTest, ExtraTensorsWarnOrFail) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.add_tensor("mystery.weight", TensorType::F32, {4});
    TensorCheck c = check(m);
    EXPECT_TRUE(c.errors.empty());
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_NE(c.warnings[0].find("mystery.weight is not part of a llama model"), std::string::npos);

    // A block beyond block_count means the metadata and tensors disagree about the depth.
    m = test::tiny_model(test::llama_spec());
    m.add_tensor(blk(2, "attn_norm"), TensorType::F32, {64});
    EXPECT_NE(one_error(m).find("blk.2.attn_norm.weight belongs to layer 2 but the model has only "
                                "2 layers (llama.block_count)"),
              std::string::npos);
}

TEST_F(ValidationTest, OptionalTensorsAreCheckedWhenPresent) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.add_tensor("output.weight", TensorType::F32, {64, 41});
    EXPECT_NE(one_error(m).find("output.weight has shape [64, 41]"), std::string::npos);

    m = test::tiny_model(test::llama_spec());
    m.add_tensor(blk(0, "attn_q", "bias"), TensorType::F32, {64});  // llama: allowed
    m.add_tensor("rope_freqs.weight", TensorType::F32, {8});        // [n_rot / 2]
    TensorCheck c = check(m);
    EXPECT_TRUE(c.errors.empty()) << c.errors.front();
    EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
}

TEST_F(ValidationTest, VocabularyOnlyFileHasNothingToCheck) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.tensors.clear();
    TensorCheck c = check(m);
    EXPECT_TRUE(c.errors.empty());
    EXPECT_TRUE(c.warnings.empty());
}

}  // namespace
}  // namespace strata
