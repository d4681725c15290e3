// Qwen3-Next (qwen3next) in the engine, beside engine_hybrid_test's invariants for every hybrid:
// its hyper-parameters (value heads grouped per key head, plain rope whatever the file says of
// sections), the tensors a file must have in either of its two forms, and the fused projection
// ssm_in giving the logits of the split one it was regrouped from: a file of the current
// converter (attn_qkv, attn_gate) is rewritten with each delta-net layer's rows regrouped into
// ssm_in as the earlier converters wrote it, and both files must compute the same.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
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

std::vector<char> tensor_bytes(const GgufFile& f, const TensorInfo& t) {
    std::ifstream in(f.path, std::ios::binary);
    in.seekg(std::streamoff(t.offset));
    std::vector<char> out(t.n_bytes);
    in.read(out.data(), std::streamsize(out.size()));
    EXPECT_TRUE(in.good()) << t.name;
    return out;
}

// Rewrites `split` (attn_qkv and attn_gate per delta-net layer) with ssm_in in their place: per
// key head, the rows of its q, its k, its value heads' v and their z. A row is one output
// feature, whole in every type, so the rows' bytes move as they are.
std::string regroup_into_ssm_in(const std::string& split, const std::string& out) {
    auto file = read_gguf(split);
    EXPECT_TRUE(file) << file.error().message;
    if (!file) return "";
    auto hp = load_hparams(*file);
    EXPECT_TRUE(hp) << hp.error().message;
    if (!hp) return "";
    const uint64_t S = hp->ssm_d_state, r = hp->ssm_dt_rank / hp->ssm_n_group;
    const uint64_t key = hp->ssm_key_dim();

    GgufWriter w;
    for (const MetadataEntry& m : file->metadata) w.set(m.key, m.value);
    std::vector<std::vector<char>> data;
    for (const TensorInfo& t : file->tensors) {
        const TensorName n = classify_tensor_name(t.name);
        if (n.role == TensorRole::AttnGate) continue;  // goes into ssm_in with attn_qkv
        if (n.role != TensorRole::AttnQkv) {
            std::vector<uint64_t> shape(t.shape.begin(), t.shape.begin() + t.n_dims);
            EXPECT_TRUE(w.add_tensor(t.name, t.type, shape));
            data.push_back(tensor_bytes(*file, t));
            continue;
        }
        const TensorInfo* gate =
            file->find_tensor("blk." + std::to_string(n.layer) + ".attn_gate.weight");
        EXPECT_TRUE(gate && gate->type == t.type) << t.name;
        if (!gate) return "";
        const std::vector<char> qkv = tensor_bytes(*file, t), z = tensor_bytes(*file, *gate);
        const uint64_t row = t.row_bytes();
        std::vector<char> fused;
        const auto rows = [&](const std::vector<char>& from, uint64_t first, uint64_t count) {
            fused.insert(fused.end(), from.begin() + long(first * row),
                         from.begin() + long((first + count) * row));
        };
        for (uint64_t kh = 0; kh < hp->ssm_n_group; ++kh) {
            rows(qkv, kh * S, S);                    // q
            rows(qkv, key + kh * S, S);              // k
            rows(qkv, 2 * key + kh * r * S, r * S);  // v of its value heads
            rows(z, kh * r * S, r * S);              // z of its value heads
        }
        EXPECT_TRUE(w.add_tensor("blk." + std::to_string(n.layer) + ".ssm_in.weight", t.type,
                                 {t.shape[0], hp->ssm_qkvz_dim()}));
        data.push_back(std::move(fused));
    }
    EXPECT_TRUE(w.open(out, true));
    for (const auto& d : data) EXPECT_TRUE(w.write(d.data(), d.size()));
    EXPECT_TRUE(w.finish());
    return out;
}

TEST(EngineQwen3Next, TheFusedProjectionGivesTheSplitOnesLogits) {
    const std::string& split = test::synth_test_model("tiny-qwen3next-qkv", TensorType::Q8_0);
    test::TempDir dir;
    const std::string fused = regroup_into_ssm_in(split, dir.file("fused.gguf"));
    ASSERT_FALSE(fused.empty());
    for (const std::string mode : {"resident", "expert-stream"}) {
        SCOPED_TRACE(mode);
        auto a = test::load_in_mode(split, mode, test::small_load_options());
        auto b = test::load_in_mode(fused, mode, test::small_load_options());
        ASSERT_TRUE(a && b);
        ASSERT_FALSE(a->info.hparams->ssm_fused_qkvz);
        ASSERT_TRUE(b->info.hparams->ssm_fused_qkvz);
        // Each output feature is the same row's dot product with the same input wherever the
        // row lies: the same bits.
        test::expect_same_logits(*a->engine, *b->engine, kPrompt);
    }
}

TEST(EngineQwen3Next, HyperParametersAndTensors) {
    auto file = read_gguf(test::synth_test_model("tiny-qwen3next", TensorType::Q8_0));
    ASSERT_TRUE(file) << file.error().message;
    GgufFile f = std::move(*file);
    // A file that gives rope sections anyway: qwen3next rotates as plain NEOX, as the reference.
    Array sections{ValueType::I32, {}};
    for (int32_t x : {3, 3, 2, 0}) sections.items.emplace_back(x);
    f.metadata.push_back({"qwen3next.rope.dimension_sections", Value(sections)});
    f.reindex();
    auto hp = load_hparams(f);
    ASSERT_TRUE(hp) << hp.error().message;
    EXPECT_EQ(hp->rope_style, RopeStyle::Neox);
    EXPECT_EQ(hp->n_rot, 16u);
    EXPECT_EQ(hp->rope_sections, (std::array<uint32_t, 4>{}));
    EXPECT_TRUE(hp->ssm_grouped_heads);
    EXPECT_TRUE(hp->ssm_fused_qkvz);
    EXPECT_EQ(hp->recurrent_layers, (std::vector<bool>{true, true, true, false}));
    // Two key heads of two value heads each: 0 1 | 2 3 (qwen35 would pair 0 2 | 1 3).
    for (uint32_t h = 0; h < 4; ++h) EXPECT_EQ(hp->ssm_key_head(h), h / 2) << h;
    EXPECT_TRUE(check_tensors(f, *hp).errors.empty());

    // A delta-net layer without its fused projection is named, with the shape it needs.
    std::erase_if(f.tensors, [](const TensorInfo& t) { return t.name == "blk.1.ssm_in.weight"; });
    f.reindex();
    const TensorCheck check = check_tensors(f, *hp);
    ASSERT_EQ(check.errors.size(), 1u);
    EXPECT_NE(check.errors[0].find("blk.1.ssm_in.weight is missing"), std::string::npos);
    EXPECT_NE(check.errors[0].find("[256, 768]"), std::string::npos) << check.errors[0];
}

// The full-size preset has the sizes its name says: 80 B parameters with Qwen3's vocabulary, about
// 3 B of them read per token besides the embedding (A3B: the non-expert weights, 10 routed
// experts of 512 and the shared one).
TEST(Qwen3NextPreset, HasTheParametersItsNameSays) {
    ModelHparams hp = with_layout_defaults(*synth_preset("qwen3next-80b-a3b"));
    hp.n_vocab = 151936;
    double total = 0, experts = 0, embedding = 0;
    for (const TensorSpec& t : tensor_layout(hp)) {
        const double n = double(t.n_elements());
        total += n;
        if (is_expert_role(t.role)) experts += n;
        if (t.role == TensorRole::TokenEmbedding || t.role == TensorRole::Output) embedding += n;
    }
    const double active = total - embedding - experts * (1.0 - 10.0 / 512.0);
    EXPECT_GT(total, 79e9);
    EXPECT_LT(total, 81e9);
    EXPECT_GT(active, 2.8e9);
    EXPECT_LT(active, 3.6e9);

    SynthConfig config;
    config.hparams = *synth_preset("qwen3next-80b-a3b");
    config.weights = WeightFormat(TensorType::Q4_K, QuantMix::Q4_K_M);
    auto plan = plan_synthetic_model(config);
    ASSERT_TRUE(plan) << plan.error().message;
    double bytes = 0;
    for (size_t i = 0; i < plan->layout.size(); ++i) {
        const auto info = tensor_type_info(plan->types[i]);
        ASSERT_TRUE(info);
        bytes += double(plan->layout[i].n_elements()) / info->block_size * info->type_size;
    }
    std::printf("qwen3next-80b-a3b: %.2f B parameters (%.2f B active), %.1f GB at Q4_K_M\n",
                total / 1e9, active / 1e9, bytes / 1e9);
}

}  // namespace
}  // namespace strata
