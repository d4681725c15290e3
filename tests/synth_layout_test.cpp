// tensor_layout() against the files llama.cpp's tools wrote (golden data) and against the
// per-family rules: which tensors exist, their ggml shapes and their order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/tensor_layout.h"
#include "test_support.h"

namespace strata {
namespace {

using Shape = std::vector<uint64_t>;

// The shape of a golden model, read from its metadata keys directly.
ModelHparams hparams_from_file(const GgufFile& f) {
    ModelHparams hp;
    hp.arch = f.get_string("general.architecture").value_or("");
    const std::string a = hp.arch + ".";
    auto u32 = [&](const std::string& key) {
        return static_cast<uint32_t>(f.get_uint(a + key).value_or(0));
    };
    hp.n_embd = u32("embedding_length");
    hp.n_layer = u32("block_count");
    hp.n_head = u32("attention.head_count");
    hp.n_head_kv = u32("attention.head_count_kv");
    hp.n_ff = u32("feed_forward_length");
    hp.n_expert = u32("expert_count");
    hp.n_expert_used = u32("expert_used_count");
    const Array* tokens = f.get_array("tokenizer.ggml.tokens");
    hp.n_vocab = tokens ? static_cast<uint32_t>(tokens->items.size()) : 0;
    hp.tied_output = f.find_tensor("output.weight") == nullptr;
    return hp;
}

struct NamedShape {
    std::string name;
    Shape shape;
    bool operator==(const NamedShape&) const = default;
    bool operator<(const NamedShape& o) const { return name < o.name; }
};

std::vector<NamedShape> file_tensors(const GgufFile& f) {
    std::vector<NamedShape> out;
    for (const auto& t : f.tensors) {
        out.push_back({t.name, Shape(t.shape.begin(), t.shape.begin() + t.n_dims)});
    }
    return out;
}

std::vector<NamedShape> layout_tensors(const std::vector<TensorSpec>& layout) {
    std::vector<NamedShape> out;
    for (const auto& t : layout) out.push_back({t.name, t.shape});
    return out;
}

void expect_same_list(const std::vector<NamedShape>& want, const std::vector<NamedShape>& got) {
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(want[i].name, got[i].name) << "tensor " << i;
        EXPECT_EQ(want[i].shape, got[i].shape) << want[i].name;
    }
}

class GoldenLayout : public ::testing::Test {
  protected:
    void SetUp() override { STRATA_REQUIRE_TESTDATA(); }
    GgufFile load(const std::string& rel) {
        auto f = read_gguf((test::testdata_dir() / rel).string());
        EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
        return f.ok() ? std::move(*f) : GgufFile{};
    }
};

// The gguf-py-written F32 files are in converter order; the layout must match them exactly.
TEST_F(GoldenLayout, DenseLlamaMatchesFileOrderExactly) {
    const GgufFile f = load("models/synthetic/llama-dense-F32.gguf");
    const ModelHparams hp = hparams_from_file(f);
    EXPECT_FALSE(hp.tied_output);
    expect_same_list(file_tensors(f), layout_tensors(tensor_layout(hp)));
}

TEST_F(GoldenLayout, Qwen2WithBiasesMatchesFileOrderExactly) {
    const GgufFile f = load("models/synthetic/qwen2-F32.gguf");
    const ModelHparams hp = hparams_from_file(f);
    EXPECT_TRUE(hp.tied_output);
    expect_same_list(file_tensors(f), layout_tensors(tensor_layout(hp)));
}

// llama-quantize reorders tensors (by layer, then name), so compare the MoE file as a set.
TEST_F(GoldenLayout, MixtralStyleMoeHasTheSameTensorsAsTheFile) {
    const GgufFile f = load("models/synthetic/llama-moe-F16.gguf");
    const ModelHparams hp = hparams_from_file(f);
    ASSERT_EQ(hp.n_expert, 8u);
    auto want = file_tensors(f), got = layout_tensors(tensor_layout(hp));
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    expect_same_list(want, got);
}

TEST_F(GoldenLayout, RealModelHasTheSameTensorsAsTheFile) {
    const GgufFile f = load("models/real/aidreams260K-F32.gguf");
    auto want = file_tensors(f), got = layout_tensors(tensor_layout(hparams_from_file(f)));
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    expect_same_list(want, got);
}

ModelHparams small(const std::string& arch) {
    ModelHparams hp;
    hp.arch = arch;
    hp.n_vocab = 100;
    hp.n_embd = 64;
    hp.n_layer = 3;
    hp.n_head = 4;
    hp.n_head_kv = 2;
    hp.n_ff = 96;
    return hp;
}

std::map<std::string, Shape> by_name(const std::vector<TensorSpec>& layout) {
    std::map<std::string, Shape> m;
    for (const auto& t : layout) m[t.name] = t.shape;
    return m;
}

TEST(TensorLayout, TiedOutputOmitsOutputWeight) {
    ModelHparams hp = small("llama");
    hp.tied_output = false;
    EXPECT_EQ(by_name(tensor_layout(hp)).count("output.weight"), 1u);
    hp.tied_output = true;
    const auto layout = tensor_layout(hp);
    EXPECT_EQ(by_name(layout).count("output.weight"), 0u);
    EXPECT_EQ(layout.size(), 2u + 3u * 9u);
}

TEST(TensorLayout, Qwen3HasPerHeadQkNormsAndSeparateHeadDim) {
    ModelHparams hp = small("qwen3");
    hp.head_dim_k = hp.head_dim_v = 32;  // != 64 / 4
    const auto layout = tensor_layout(hp);
    const auto m = by_name(layout);
    EXPECT_EQ(m.at("blk.2.attn_q_norm.weight"), Shape({32}));
    EXPECT_EQ(m.at("blk.2.attn_k_norm.weight"), Shape({32}));
    EXPECT_EQ(m.at("blk.0.attn_q.weight"), Shape({64, 4 * 32}));
    EXPECT_EQ(m.at("blk.0.attn_k.weight"), Shape({64, 2 * 32}));
    EXPECT_EQ(m.at("blk.0.attn_v.weight"), Shape({64, 2 * 32}));
    EXPECT_EQ(m.at("blk.0.attn_output.weight"), Shape({4 * 32, 64}));
    EXPECT_EQ(m.count("blk.0.attn_q.bias"), 0u);
    // Norms come after the projections and before attn_output.
    std::vector<std::string> blk0;
    for (const auto& t : layout) {
        if (t.layer == 0) blk0.push_back(t.name.substr(6));
    }
    const std::vector<std::string> want = {
        "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",      "attn_v.weight",
        "attn_q_norm.weight", "attn_k_norm.weight", "attn_output.weight", "ffn_norm.weight",
        "ffn_gate.weight",    "ffn_up.weight",      "ffn_down.weight"};
    EXPECT_EQ(blk0, want);
}

TEST(TensorLayout, Qwen2MoeHasBiasesExpertsAndSharedExpert) {
    ModelHparams hp = small("qwen2moe");
    hp.n_expert = 4;
    hp.n_expert_used = 2;
    hp.n_ff_exp = 32;
    hp.n_ff_shexp = 80;
    const auto m = by_name(tensor_layout(hp));
    EXPECT_EQ(m.at("blk.1.attn_q.bias"), Shape({64}));
    EXPECT_EQ(m.at("blk.1.attn_k.bias"), Shape({32}));
    EXPECT_EQ(m.at("blk.1.ffn_gate_inp.weight"), Shape({64, 4}));
    EXPECT_EQ(m.at("blk.1.ffn_gate_exps.weight"), Shape({64, 32, 4}));
    EXPECT_EQ(m.at("blk.1.ffn_up_exps.weight"), Shape({64, 32, 4}));
    EXPECT_EQ(m.at("blk.1.ffn_down_exps.weight"), Shape({32, 64, 4}));
    EXPECT_EQ(m.at("blk.1.ffn_gate_inp_shexp.weight"), Shape({64}));
    EXPECT_EQ(m.at("blk.1.ffn_gate_shexp.weight"), Shape({64, 80}));
    EXPECT_EQ(m.at("blk.1.ffn_up_shexp.weight"), Shape({64, 80}));
    EXPECT_EQ(m.at("blk.1.ffn_down_shexp.weight"), Shape({80, 64}));
    EXPECT_EQ(m.count("blk.1.ffn_gate.weight"), 0u);
}

TEST(TensorLayout, Qwen3MoeHasQkNormsAndNoSharedExpert) {
    ModelHparams hp = small("qwen3moe");
    hp.n_expert = 4;
    hp.n_expert_used = 2;
    hp.n_ff_exp = 32;
    const auto m = by_name(tensor_layout(hp));
    EXPECT_EQ(m.at("blk.0.attn_q_norm.weight"), Shape({16}));
    EXPECT_EQ(m.at("blk.0.ffn_down_exps.weight"), Shape({32, 64, 4}));
    EXPECT_EQ(m.count("blk.0.ffn_gate_shexp.weight"), 0u);
    EXPECT_EQ(m.count("blk.0.ffn_gate_inp_shexp.weight"), 0u);
    EXPECT_EQ(m.count("blk.0.attn_q.bias"), 0u);
}

TEST(TensorLayout, DefaultsFollowLlamaCpp) {
    ModelHparams hp = small("qwen3moe");
    hp.n_head_kv = 0;
    hp.n_expert = 8;
    hp.n_expert_used = 2;
    const ModelHparams d = with_layout_defaults(hp);
    EXPECT_EQ(d.n_head_kv, 4u);
    EXPECT_EQ(d.head_dim_k, 16u);
    EXPECT_EQ(d.head_dim_v, 16u);
    EXPECT_EQ(d.n_rot, 16u);
    EXPECT_EQ(d.n_ff_exp, 96u / 2);  // n_ff / n_expert_used
    EXPECT_TRUE(d.has_qk_norm);
    EXPECT_FALSE(d.has_qkv_bias);

    ModelHparams mix = small("llama");
    mix.n_expert = 8;
    mix.n_expert_used = 2;
    EXPECT_EQ(with_layout_defaults(mix).n_ff_exp, 96u);  // Mixtral layout: experts use n_ff
    EXPECT_EQ(by_name(tensor_layout(mix)).at("blk.0.ffn_up_exps.weight"), Shape({64, 96, 8}));

    ModelHparams q2 = small("qwen2moe");
    q2.n_expert = 4;
    q2.n_expert_used = 4;
    const ModelHparams d2 = with_layout_defaults(q2);
    EXPECT_EQ(d2.n_ff_shexp, 96u);
    EXPECT_EQ(d2.n_ff_exp, 24u);
    EXPECT_TRUE(d2.has_qkv_bias);
}

TEST(TensorLayout, RolesAndLayersAgreeWithNameClassification) {
    for (const auto& traits : known_arch_traits()) {
        ModelHparams hp = small(std::string(traits.name));
        if (traits.always_moe) {
            hp.n_expert = 4;
            hp.n_expert_used = 1;
            hp.n_ff_exp = 32;  // families whose files must give the expert width
        }
        if (traits.hybrid_delta_net) {  // the delta net's sizes have no defaults
            hp.ssm_d_conv = 4;
            hp.ssm_d_state = 16;
            hp.ssm_n_group = 2;
            hp.ssm_dt_rank = 4;
            hp.ssm_d_inner = 64;
        }
        if (traits.mla) {  // latent attention's sizes have no defaults either
            hp.n_lora_q = 32;
            hp.n_lora_kv = 32;
            hp.n_rot = 8;
            hp.head_dim_k = 24;
            hp.head_dim_v = 16;
        }
        for (const auto& t : tensor_layout(hp)) {
            const TensorName n = classify_tensor_name(t.name);
            EXPECT_EQ(n.role, t.role) << t.name;
            EXPECT_EQ(n.layer, t.layer) << t.name;
            EXPECT_EQ(n.is_bias, t.is_bias) << t.name;
            EXPECT_EQ(t.n_elements() % t.row_length(), 0u);
        }
    }
}

TEST(TensorLayout, ParameterCountOfALlama3_8BShape) {
    ModelHparams hp;
    hp.arch = "llama";
    hp.n_vocab = 128256;
    hp.n_embd = 4096;
    hp.n_layer = 32;
    hp.n_head = 32;
    hp.n_head_kv = 8;
    hp.n_ff = 14336;
    // Meta-Llama-3-8B has 8,030,261,248 parameters.
    EXPECT_EQ(layout_parameter_count(tensor_layout(hp)), 8030261248ull);
}

}  // namespace
}  // namespace strata
