// Hyper-parameters from GGUF metadata: llama.cpp's defaults, every integer encoding, per-layer
// arrays, MoE and rope-scaling keys, and errors that name the file and the key.
#include <gtest/gtest.h>

#include "model/hparams.h"
#include "model_test_files.h"

namespace strata {
namespace {

using test::TinyModel;

class HparamsTest : public ::testing::Test {
  protected:
    Result<ModelHparams> load(const TinyModel& m) {
        file_ = m.write(path_);
        return load_hparams(file_);
    }
    // Loads a file that must fail and returns the message.
    std::string load_error(const TinyModel& m) {
        auto r = load(m);
        EXPECT_FALSE(r.ok());
        if (r.ok()) return "";
        // Every message names the file it is about.
        EXPECT_EQ(r.error().message.rfind(path_ + ": ", 0), 0u) << r.error().message;
        return r.error().message;
    }

    test::TempDir tmp_;
    std::string path_ = tmp_.file("model.gguf");
    GgufFile file_;
};

TEST_F(HparamsTest, LlamaDefaultsFollowLlamaCpp) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.erase("llama.attention.head_count_kv");  // -> n_head
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->arch, "llama");
    EXPECT_EQ(hp->name, "tiny-llama");
    EXPECT_EQ(hp->n_ctx_train, 256u);
    EXPECT_EQ(hp->n_embd, 64u);
    EXPECT_EQ(hp->n_layer, 2u);
    EXPECT_EQ(hp->n_head, 4u);
    EXPECT_EQ(hp->n_head_kv, 4u);
    EXPECT_EQ(hp->head_dim_k, 16u);  // n_embd / n_head
    EXPECT_EQ(hp->head_dim_v, 16u);
    EXPECT_EQ(hp->n_rot, 16u);  // head size
    EXPECT_FLOAT_EQ(hp->rope_freq_base, 10000.0f);
    EXPECT_EQ(hp->rope_style, RopeStyle::Normal);
    EXPECT_EQ(hp->rope_scaling.type, "none");
    EXPECT_FLOAT_EQ(hp->rms_eps, 1e-6f);
    EXPECT_EQ(hp->n_ff, 96u);
    EXPECT_EQ(hp->n_vocab, 40u);  // length of tokenizer.ggml.tokens
    EXPECT_FALSE(hp->is_moe());
    EXPECT_TRUE(hp->tied_output);
    EXPECT_FALSE(hp->has_qkv_bias);
    EXPECT_FALSE(hp->has_qk_norm);
    EXPECT_TRUE(hp->n_head_per_layer.empty());
}

TEST_F(HparamsTest, ExplicitKeysOverrideDefaults) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.attention.key_length", uint32_t{32});
    m.set("llama.attention.value_length", uint32_t{24});
    m.set("llama.rope.dimension_count", uint32_t{8});
    m.set("llama.rope.freq_base", 500000.0f);
    m.set("llama.vocab_size", uint32_t{100});  // preferred over the token list
    m.add_tensor("output.weight", TensorType::F32, {64, 40});
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->head_dim_k, 32u);
    EXPECT_EQ(hp->head_dim_v, 24u);
    EXPECT_EQ(hp->n_embd_k_gqa(), 64u);
    EXPECT_EQ(hp->n_embd_v_gqa(), 48u);
    EXPECT_EQ(hp->n_rot, 8u);
    EXPECT_FLOAT_EQ(hp->rope_freq_base, 500000.0f);
    EXPECT_EQ(hp->n_vocab, 100u);
    EXPECT_FALSE(hp->tied_output);
}

TEST_F(HparamsTest, VocabularySizeFromTokenEmbeddingWhenNoTokenizer) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.erase("tokenizer.ggml.tokens");
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_vocab, 40u);  // token_embd is [n_embd, n_vocab]

    m.remove_tensor("token_embd.weight");
    const std::string e = load_error(m);
    EXPECT_NE(e.find("cannot tell the vocabulary size"), std::string::npos) << e;
}

TEST_F(HparamsTest, AcceptsEveryIntegerEncoding) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.context_length", uint64_t{256});
    m.set("llama.embedding_length", int32_t{64});
    m.set("llama.block_count", uint8_t{2});
    m.set("llama.attention.head_count", int64_t{4});
    m.set("llama.attention.head_count_kv", uint16_t{2});
    m.set("llama.feed_forward_length", int16_t{96});
    m.set("llama.attention.layer_norm_rms_epsilon", 1e-6);  // f64
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_ctx_train, 256u);
    EXPECT_EQ(hp->n_embd, 64u);
    EXPECT_EQ(hp->n_layer, 2u);
    EXPECT_EQ(hp->n_head, 4u);
    EXPECT_EQ(hp->n_head_kv, 2u);
    EXPECT_EQ(hp->n_ff, 96u);
    EXPECT_FLOAT_EQ(hp->rms_eps, 1e-6f);
}

TEST_F(HparamsTest, RejectsNegativeHugeAndMistypedValues) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.embedding_length", int32_t{-64});
    EXPECT_NE(load_error(m).find("'llama.embedding_length' is negative (-64)"), std::string::npos);
    m.set("llama.embedding_length", uint64_t{1} << 33);
    EXPECT_NE(load_error(m).find("'llama.embedding_length' is 8589934592, which is out of range"),
              std::string::npos);
    m.set("llama.embedding_length", "64");
    EXPECT_NE(load_error(m).find("'llama.embedding_length' should be an integer but is string"),
              std::string::npos);
    m.set("llama.embedding_length", 64.0f);
    EXPECT_NE(load_error(m).find("should be an integer but is f32"), std::string::npos);
    m.set("llama.embedding_length", uint32_t{0});
    EXPECT_NE(load_error(m).find("'llama.embedding_length' is 0"), std::string::npos);
}

TEST_F(HparamsTest, MissingRequiredKeysAreNamed) {
    for (const char* key :
         {"context_length", "embedding_length", "block_count", "attention.head_count",
          "attention.layer_norm_rms_epsilon", "feed_forward_length"}) {
        SCOPED_TRACE(key);
        TinyModel m = test::tiny_model(test::llama_spec());
        m.erase(std::string("llama.") + key);
        EXPECT_EQ(load_error(m),
                  path_ + ": metadata key 'llama." + key + "' is missing; a llama model needs it");
    }
}

TEST_F(HparamsTest, UnsupportedOrMissingArchitecture) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("general.architecture", "mamba");
    EXPECT_EQ(load_error(m), path_ +
                                 ": architecture 'mamba' is not supported (supported: llama, "
                                 "qwen2, qwen3, qwen2moe, qwen3moe, qwen35, qwen35moe, "
                                 "qwen3next, gpt-oss, glm4moe, deepseek2)");
    m.erase("general.architecture");
    EXPECT_NE(load_error(m).find("'general.architecture' is missing"), std::string::npos);
    m.set("general.architecture", uint32_t{1});
    EXPECT_NE(load_error(m).find("'general.architecture' should be a string"), std::string::npos);
}

TEST_F(HparamsTest, PerLayerHeadArrays) {
    TinyModel m = test::tiny_model(test::llama_spec());
    // Uniform arrays are the same as scalars.
    m.set("llama.attention.head_count", make_i32_array({4, 4}));
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_head, 4u);
    EXPECT_TRUE(hp->n_head_per_layer.empty());

    // Varying arrays keep per-layer values; the scalar is the maximum.
    m.set("llama.attention.head_count_kv", make_i32_array({1, 2}));
    Array ff;
    ff.elem_type = ValueType::U32;
    ff.items = {Value(uint32_t{96}), Value(uint32_t{128})};
    m.set("llama.feed_forward_length", ff);
    hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_head_kv, 2u);
    EXPECT_EQ(hp->n_head_kv_per_layer, (std::vector<uint32_t>{1, 2}));
    EXPECT_EQ(hp->n_head_kv_at(0), 1u);
    EXPECT_EQ(hp->n_head_kv_at(1), 2u);
    EXPECT_EQ(hp->n_head_at(1), 4u);
    EXPECT_EQ(hp->n_ff, 128u);
    EXPECT_EQ(hp->n_ff_at(0), 96u);

    m.set("llama.attention.head_count_kv", make_i32_array({2, 2, 2}));
    EXPECT_NE(load_error(m).find("'llama.attention.head_count_kv' has 3 per-layer entries but "
                                 "the model has 2 layers"),
              std::string::npos);
}

TEST_F(HparamsTest, HeadCountsMustDivide) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.attention.head_count_kv", uint32_t{3});
    EXPECT_NE(load_error(m).find("'llama.attention.head_count_kv' is 3 for layer 0, which does "
                                 "not divide its 4 query heads"),
              std::string::npos);
    m.set("llama.attention.head_count_kv", uint32_t{2});
    m.set("llama.attention.head_count", uint32_t{6});  // 64 / 6 is not whole
    EXPECT_NE(load_error(m).find("is not a multiple of llama.attention.head_count (6)"),
              std::string::npos);
    m.set("llama.attention.key_length", uint32_t{16});  // with an explicit head size it is fine
    EXPECT_TRUE(load(m).ok());
}

TEST_F(HparamsTest, QwenFamiliesUseNeoxRopeAndDetectStructure) {
    auto qwen2 = load(test::tiny_model(test::qwen2_spec()));
    ASSERT_TRUE(qwen2.ok()) << qwen2.error().message;
    EXPECT_EQ(qwen2->rope_style, RopeStyle::Neox);
    EXPECT_TRUE(qwen2->has_qkv_bias);
    EXPECT_FALSE(qwen2->has_qk_norm);

    auto qwen3 = load(test::tiny_model(test::qwen3_spec()));
    ASSERT_TRUE(qwen3.ok()) << qwen3.error().message;
    EXPECT_EQ(qwen3->rope_style, RopeStyle::Neox);
    EXPECT_FALSE(qwen3->has_qkv_bias);
    EXPECT_TRUE(qwen3->has_qk_norm);
}

TEST_F(HparamsTest, MixtralExpertsAreAsWideAsFeedForwardLength) {
    auto hp = load(test::tiny_model(test::mixtral_spec()));
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->arch, "llama");
    EXPECT_TRUE(hp->is_moe());
    EXPECT_EQ(hp->n_expert, 4u);
    EXPECT_EQ(hp->n_expert_used, 2u);
    EXPECT_EQ(hp->n_ff_exp, 96u);
    EXPECT_EQ(hp->n_expert_shared, 0u);
    EXPECT_TRUE(hp->norm_topk_prob);
    EXPECT_EQ(hp->rope_style, RopeStyle::Normal);
}

TEST_F(HparamsTest, QwenMoeExpertWidthsAndSharedExpert) {
    TinyModel m = test::tiny_model(test::qwen2moe_spec());
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_ff_exp, 32u);
    EXPECT_EQ(hp->n_ff_shexp, 48u);
    EXPECT_EQ(hp->n_expert_shared, 1u);
    EXPECT_FALSE(hp->norm_topk_prob);
    EXPECT_EQ(hp->rope_style, RopeStyle::Neox);

    // Without expert_feed_forward_length llama.cpp takes feed_forward_length / expert_used_count.
    m.erase("qwen2moe.expert_feed_forward_length");
    m.set("qwen2moe.feed_forward_length", uint32_t{64});
    hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_ff_exp, 32u);
    m.erase("qwen2moe.feed_forward_length");
    EXPECT_NE(load_error(m).find("'qwen2moe.expert_feed_forward_length' is missing"),
              std::string::npos);

    auto q3 = load(test::tiny_model(test::qwen3moe_spec()));
    ASSERT_TRUE(q3.ok()) << q3.error().message;
    EXPECT_TRUE(q3->norm_topk_prob);
    EXPECT_EQ(q3->n_expert_shared, 0u);
    EXPECT_EQ(q3->n_ff_shexp, 0u);
}

TEST_F(HparamsTest, ExpertCountErrors) {
    TinyModel m = test::tiny_model(test::qwen3moe_spec());
    m.erase("qwen3moe.expert_count");
    EXPECT_NE(load_error(m).find("'qwen3moe.expert_count' is missing"), std::string::npos);

    m = test::tiny_model(test::mixtral_spec());
    m.set("llama.expert_used_count", uint32_t{5});
    EXPECT_NE(load_error(m).find("'llama.expert_used_count' is 5; it must be between 1 and the 4 "
                                 "experts"),
              std::string::npos);
    m.erase("llama.expert_used_count");
    EXPECT_NE(load_error(m).find("'llama.expert_used_count' is missing"), std::string::npos);
}

TEST_F(HparamsTest, RopeScalingKeys) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.rope.scaling.type", "yarn");
    m.set("llama.rope.scaling.factor", 4.0f);
    m.set("llama.rope.scaling.original_context_length", uint32_t{4096});
    m.set("llama.rope.scaling.attn_factor", 0.5f);
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->rope_scaling.type, "yarn");
    EXPECT_FLOAT_EQ(hp->rope_scaling.factor, 4.0f);
    EXPECT_EQ(hp->rope_scaling.original_context, 4096u);
    EXPECT_FLOAT_EQ(hp->rope_scaling.attn_factor, 0.5f);

    // llama3-style keys.
    m.set("llama.rope.scaling.type", "llama3");
    m.set("llama.rope.scaling.factor", 8.0f);
    m.set("llama.rope.scaling.low_freq_factor", 2.0f);
    m.set("llama.rope.scaling.high_freq_factor", 6.0f);
    hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->rope_scaling.type, "llama3");
    EXPECT_FLOAT_EQ(hp->rope_scaling.low_freq_factor, 2.0f);
    EXPECT_FLOAT_EQ(hp->rope_scaling.high_freq_factor, 6.0f);

    // The old key alone means linear scaling.
    m = test::tiny_model(test::llama_spec());
    m.set("llama.rope.scale_linear", 2.0f);
    hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->rope_scaling.type, "linear");
    EXPECT_FLOAT_EQ(hp->rope_scaling.factor, 2.0f);

    m.set("llama.rope.scaling.type", "wavy");
    EXPECT_NE(load_error(m).find("'llama.rope.scaling.type' is 'wavy'"), std::string::npos);
}

TEST_F(HparamsTest, RopeFrequencyFactorsTensor) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.add_tensor("rope_freqs.weight", TensorType::F32, {8});
    auto hp = load(m);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_TRUE(hp->has_rope_freqs);
}

TEST_F(HparamsTest, AbsurdCountsAreRejected) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.block_count", uint32_t{4000000000u});
    EXPECT_NE(load_error(m).find("'llama.block_count' is 4000000000, more layers than any model "
                                 "has (at most 1024)"),
              std::string::npos);
    m = test::tiny_model(test::mixtral_spec());
    m.set("llama.expert_count", uint32_t{1u << 20});
    EXPECT_NE(load_error(m).find("'llama.expert_count' is 1048576, more experts than any model"),
              std::string::npos);
}

TEST_F(HparamsTest, RopeDimensionsMustFitTheHead) {
    TinyModel m = test::tiny_model(test::llama_spec());
    m.set("llama.rope.dimension_count", uint32_t{32});  // head size is 16
    EXPECT_NE(load_error(m).find("'llama.rope.dimension_count' is 32; it must be even and at most "
                                 "the head size 16"),
              std::string::npos);
}

}  // namespace
}  // namespace strata
