// deepseek2 (DeepSeek-V3, Kimi K2) in the engine: its hyper-parameters from either converter's
// keys; the latent cache the plan counts (the latent and the rotary key per token, not keys and
// values per head); streaming computes the resident logits; a prompt's logits are those of its
// tokens decoded one by one; a file with attn_kv_b (the earlier converters) gives the logits of
// the one with attn_k_b and attn_v_b holding the same matrices; the plan keeps such models off
// the GPU; and the full-size presets have the sizes their names say.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/hparams.h"
#include "model/kv_layout.h"
#include "model/rope.h"
#include "model/tensor_layout.h"
#include "model/tensor_validation.h"
#include "plan/plan.h"
#include "plan_test_support.h"
#include "runtime/loaded_model.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

constexpr uint64_t GiB = 1ull << 30;
const std::vector<int32_t> kPrompt = {1, 17, 230, 4, 99, 5, 61, 8, 140, 3, 27};

std::vector<char> tensor_bytes(const GgufFile& f, const TensorInfo& t) {
    std::ifstream in(f.path, std::ios::binary);
    in.seekg(std::streamoff(t.offset));
    std::vector<char> out(t.n_bytes);
    in.read(out.data(), std::streamsize(out.size()));
    EXPECT_TRUE(in.good()) << t.name;
    return out;
}

TEST(EngineDeepseek2, HyperParametersAndTensors) {
    auto file = read_gguf(test::synth_test_model("tiny-deepseek2", TensorType::Q8_0));
    ASSERT_TRUE(file) << file.error().message;
    GgufFile f = std::move(*file);
    auto hp = load_hparams(f);
    ASSERT_TRUE(hp) << hp.error().message;
    EXPECT_TRUE(hp->is_mla());
    EXPECT_FALSE(hp->mla_kv_b);
    EXPECT_EQ(hp->n_lora_q, 128u);
    EXPECT_EQ(hp->n_lora_kv, 128u);
    // The heads' sizes come from the _mla keys; key_length and value_length describe the cache.
    EXPECT_EQ(hp->head_dim_k, 96u);
    EXPECT_EQ(hp->head_dim_v, 64u);
    EXPECT_EQ(hp->n_rot, 32u);
    EXPECT_EQ(hp->mla_cache_width(), 160u);
    EXPECT_EQ(hp->rope_style, RopeStyle::Normal);
    EXPECT_FLOAT_EQ(hp->rope_scaling.mscale_all_dim, 1.0f);
    EXPECT_EQ(hp->n_leading_dense, 1u);
    EXPECT_FALSE(hp->is_moe_layer(0));
    EXPECT_TRUE(hp->is_moe_layer(1));
    EXPECT_EQ(hp->n_expert_shared, 1u);
    EXPECT_EQ(hp->n_ff_shexp, 256u);  // the experts' width times their count
    EXPECT_EQ(hp->expert_gating, ExpertGating::Sigmoid);
    EXPECT_TRUE(hp->has_selection_bias);
    EXPECT_EQ(hp->n_expert_group, 4u);
    EXPECT_EQ(hp->n_expert_group_used, 2u);
    EXPECT_FLOAT_EQ(hp->expert_weights_scale, 2.5f);
    EXPECT_TRUE(hp->norm_topk_prob);
    EXPECT_TRUE(check_tensors(f, *hp).errors.empty());

    // DeepSeek's YaRN scales the logits by mscale^2 with mscale = 1 + 0.1 ln(4) here, and leaves
    // the rotation's magnitude alone.
    auto rope = make_rope_config(*hp, nullptr);
    ASSERT_TRUE(rope);
    const float mscale = 1.0f + 0.1f * std::log(4.0f);
    EXPECT_NEAR(mla_attention_scale(*rope, *hp), mscale * mscale / std::sqrt(96.0f), 1e-6);
    std::vector<float> cos(16), sin(16);
    rope_angles(*rope, 0, cos.data(), sin.data());
    EXPECT_NEAR(cos[0], 1.0f, 1e-6);

    // A layer without its value up-projection is named, with the shape it needs.
    std::erase_if(f.tensors, [](const TensorInfo& t) { return t.name == "blk.2.attn_v_b.weight"; });
    f.reindex();
    const TensorCheck check = check_tensors(f, *hp);
    ASSERT_EQ(check.errors.size(), 1u);
    EXPECT_NE(check.errors[0].find("blk.2.attn_v_b.weight is missing"), std::string::npos);
    EXPECT_NE(check.errors[0].find("[128, 64, 8]"), std::string::npos) << check.errors[0];

    // A file that gives the _mla keys must describe the cache in key_length and value_length.
    for (MetadataEntry& m : f.metadata) {
        if (m.key == "deepseek2.attention.value_length") m.value = Value(uint32_t(64));
    }
    f.reindex();
    auto bad = load_hparams(f);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("kv_lora_rank"), std::string::npos) << bad.error().message;
}

TEST(EngineDeepseek2, TheCacheHoldsTheLatentAndTheRotaryKey) {
    const ModelHparams hp = with_layout_defaults(*synth_preset("deepseek-v3"));
    ASSERT_TRUE(hp.is_mla());
    // 512 latent values and 64 of the rotary key per position and layer: 1152 bytes in F16,
    // 18 Q8_0 blocks of 34 bytes; against 128 heads x (192 + 128) x 2 = 80 KiB a token and layer
    // for the decompressed keys and values.
    EXPECT_EQ(kv_layer_bytes(hp, 10, 4096, KvType::F16), 4096u * 576 * 2);
    EXPECT_EQ(kv_layer_bytes(hp, 10, 4096, KvType::Q8_0), 4096u * 18 * 34);
    EXPECT_EQ(kv_cache_bytes(hp, 4096, KvType::F16), 61u * 4096 * 576 * 2);
    EXPECT_TRUE(check_kv_type(hp, KvType::Q8_0));

    // The plan counts that cache and puts the model beside a GPU partly on it; the GPU's latent
    // attention reads the f16 cache only, so with Q8_0 every layer stays on the CPU.
    const ModelInfo m = test::synthetic_model_info("deepseek-v3", "Q4_K_M");
    PlanOptions options;
    options.n_ctx = 4096;
    auto plan = make_plan(m, test::plan_profile_with_gpu(140 * GiB),
                          test::plan_budgets(512 * GiB, 130 * GiB), options);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->gpu_resident() || plan->gpu_split()) << plan->gpu_note;
    options.kv_type = KvType::Q8_0;
    auto q8 = make_plan(m, test::plan_profile_with_gpu(140 * GiB),
                        test::plan_budgets(512 * GiB, 130 * GiB), options);
    ASSERT_TRUE(q8) << q8.error().message;
    EXPECT_FALSE(q8->gpu_resident());
    EXPECT_FALSE(q8->gpu_split());
    EXPECT_NE(q8->gpu_note.find("latent attention"), std::string::npos) << q8->gpu_note;
    EXPECT_EQ(q8->memory.kv_cache, kv_cache_bytes(*m.hparams, q8->n_ctx, q8->kv_type, q8->batch));
}

TEST(EngineDeepseek2, StreamingGivesTheResidentLogits) {
    const std::string& path = test::synth_test_model("tiny-deepseek2", TensorType::Q8_0);
    auto resident = test::load_in_mode(path, "resident", test::small_load_options());
    auto streaming = test::load_in_mode(path, "expert-stream", test::small_load_options());
    ASSERT_TRUE(resident && streaming);
    test::expect_same_logits(*resident->engine, *streaming->engine, kPrompt);
    EXPECT_GT(streaming->store->stats().bytes_from_disk, 0u);
}

// Absorbed decode steps compute what the prompt computes: each token's logits are those of the
// prompt's row for it.
TEST(EngineDeepseek2, DecodeStepsGiveThePromptsLogits) {
    const std::string& path = test::synth_test_model("tiny-deepseek2", TensorType::F32);
    auto m = test::load_in_mode(path, "resident", test::small_load_options());
    ASSERT_TRUE(m);
    engine::Engine& e = *m->engine;
    std::vector<float> all, one;
    ASSERT_TRUE(e.eval(kPrompt, engine::LogitsWanted::All, all));
    EXPECT_EQ(e.truncate(0), 0u);
    const size_t vocab = e.n_vocab();
    double worst = 0, scale = 0;
    for (size_t t = 0; t < kPrompt.size(); ++t) {
        ASSERT_TRUE(e.eval({&kPrompt[t], 1}, engine::LogitsWanted::Last, one));
        for (size_t i = 0; i < vocab; ++i) {
            worst = std::max(worst, double(std::fabs(one[i] - all[t * vocab + i])));
            scale = std::max(scale, double(std::fabs(all[t * vocab + i])));
        }
    }
    // Every row's arithmetic is the same alone as in a batch (docs/design.md).
    EXPECT_EQ(worst, 0.0) << "of " << scale;
}

// Rewrites a file with attn_k_b and attn_v_b (F32) as the earlier converters wrote it: per layer
// one attn_kv_b holding, per head, W_uk(h) (attn_k_b's matrix transposed: nope rows of the
// latent's width) and then W_uv(h) (attn_v_b's rows as they are), the heads' sizes in
// key_length and value_length and no _mla keys.
std::string with_kv_b(const std::string& split, const std::string& out) {
    auto file = read_gguf(split);
    EXPECT_TRUE(file) << file.error().message;
    if (!file) return "";
    auto hp = load_hparams(*file);
    EXPECT_TRUE(hp) << hp.error().message;
    if (!hp) return "";
    const uint64_t H = hp->n_head, nope = hp->head_dim_nope(), dv = hp->head_dim_v,
                   rank = hp->n_lora_kv;
    GgufWriter w;
    for (const MetadataEntry& m : file->metadata) {
        if (m.key.ends_with("_mla")) continue;
        if (m.key == "deepseek2.attention.key_length") {
            w.set(m.key, Value(hp->head_dim_k));
        } else if (m.key == "deepseek2.attention.value_length") {
            w.set(m.key, Value(hp->head_dim_v));
        } else if (m.key == "deepseek2.attention.head_count_kv") {
            w.set(m.key, Value(hp->n_head));
        } else {
            w.set(m.key, m.value);
        }
    }
    std::vector<std::vector<char>> data;
    for (const TensorInfo& t : file->tensors) {
        const TensorName n = classify_tensor_name(t.name);
        if (n.role == TensorRole::AttnVB) continue;  // goes into attn_kv_b with attn_k_b
        if (n.role != TensorRole::AttnKB) {
            std::vector<uint64_t> shape(t.shape.begin(), t.shape.begin() + t.n_dims);
            EXPECT_TRUE(w.add_tensor(t.name, t.type, shape));
            data.push_back(tensor_bytes(*file, t));
            continue;
        }
        const TensorInfo* vb =
            file->find_tensor("blk." + std::to_string(n.layer) + ".attn_v_b.weight");
        EXPECT_TRUE(vb && vb->type == TensorType::F32 && t.type == TensorType::F32) << t.name;
        if (!vb) return "";
        const std::vector<char> kb_bytes = tensor_bytes(*file, t),
                                vb_bytes = tensor_bytes(*file, *vb);
        std::vector<float> kb(kb_bytes.size() / 4), v(vb_bytes.size() / 4);
        std::memcpy(kb.data(), kb_bytes.data(), kb_bytes.size());
        std::memcpy(v.data(), vb_bytes.data(), vb_bytes.size());
        std::vector<float> kv(H * (nope + dv) * rank);
        for (uint64_t h = 0; h < H; ++h) {
            for (uint64_t i = 0; i < nope; ++i) {
                for (uint64_t r = 0; r < rank; ++r) {
                    kv[(h * (nope + dv) + i) * rank + r] = kb[(h * rank + r) * nope + i];
                }
            }
            std::memcpy(&kv[(h * (nope + dv) + nope) * rank], &v[h * dv * rank],
                        dv * rank * sizeof(float));
        }
        EXPECT_TRUE(w.add_tensor("blk." + std::to_string(n.layer) + ".attn_kv_b.weight",
                                 TensorType::F32, {rank, H * (nope + dv)}));
        std::vector<char> bytes(kv.size() * 4);
        std::memcpy(bytes.data(), kv.data(), bytes.size());
        data.push_back(std::move(bytes));
    }
    EXPECT_TRUE(w.open(out, true));
    for (const auto& d : data) EXPECT_TRUE(w.write(d.data(), d.size()));
    EXPECT_TRUE(w.finish());
    return out;
}

TEST(EngineDeepseek2, EarlierFilesWithAttnKvBGiveTheSameLogits) {
    const std::string& split = test::synth_test_model("tiny-deepseek2", TensorType::F32);
    test::TempDir dir;
    const std::string legacy = with_kv_b(split, dir.file("kv_b.gguf"));
    ASSERT_FALSE(legacy.empty());
    auto a = test::load_in_mode(split, "resident", test::small_load_options());
    auto b = test::load_in_mode(legacy, "resident", test::small_load_options());
    ASSERT_TRUE(a && b);
    ASSERT_FALSE(a->info.hparams->mla_kv_b);
    ASSERT_TRUE(b->info.hparams->mla_kv_b);
    const std::vector<float> want =
        test::prompt_then_decode(*a->engine, kPrompt, engine::LogitsWanted::All);
    const std::vector<float> got =
        test::prompt_then_decode(*b->engine, kPrompt, engine::LogitsWanted::All);
    ASSERT_EQ(got.size(), want.size());
    // The absorption sums the same products in another order: float rounding, which may tip
    // the F16 rounding of a query or a cached latent by a step (2^-11) now and then.
    EXPECT_LT(test::rel_l2(got, want), 1e-3);
}

// The full-size presets have the sizes their names say with their vocabularies: DeepSeek-V3
// 671 B parameters, 37 B read per token besides the embedding (8 routed experts of 256 and the
// shared one); Kimi K2.5 1.03 T and 32 B.
TEST(Deepseek2Presets, HaveTheParametersTheirNamesSay) {
    struct Want {
        const char* preset;
        uint32_t vocab;
        double total, active;
    };
    for (const Want& want :
         {Want{"deepseek-v3", 129280, 671e9, 37e9}, Want{"kimi-k2.5", 163840, 1.03e12, 32e9}}) {
        SCOPED_TRACE(want.preset);
        ModelHparams hp = with_layout_defaults(*synth_preset(want.preset));
        hp.n_vocab = want.vocab;
        double total = 0, experts = 0, embedding = 0;
        for (const TensorSpec& t : tensor_layout(hp)) {
            const double n = double(t.n_elements());
            total += n;
            if (is_expert_role(t.role)) experts += n;
            if (t.role == TensorRole::TokenEmbedding) embedding += n;
        }
        const double active = total - embedding - experts * (1.0 - 8.0 / hp.n_expert);
        EXPECT_NEAR(total, want.total, 0.01 * want.total);
        EXPECT_NEAR(active, want.active, 0.05 * want.active);

        // The mixes people download them in, every row in a type that fits it.
        std::printf("%s: %.1f B parameters (%.1f B active)", want.preset, total / 1e9,
                    active / 1e9);
        for (const char* mix : {"Q2_K", "Q3_K_M", "Q4_K_M"}) {
            SynthConfig config;
            config.hparams = *synth_preset(want.preset);
            config.weights = *weight_format_from_name(mix);
            auto plan = plan_synthetic_model(config);
            ASSERT_TRUE(plan) << mix << ": " << plan.error().message;
            double bytes = 0;
            for (size_t i = 0; i < plan->layout.size(); ++i) {
                const auto info = tensor_type_info(plan->types[i]);
                ASSERT_TRUE(info);
                bytes += double(plan->layout[i].n_elements()) / info->block_size * info->type_size;
            }
            std::printf(", %.0f GB at %s", bytes / 1e9, mix);
        }
        std::printf("\n");
    }
}

// --layers N writes a cut of the full width: the leading dense layers, then full-width layers
// of experts.
TEST(Deepseek2Presets, ACutKeepsTheFullWidth) {
    ModelHparams hp = *synth_preset("deepseek-v3");
    hp.n_layer = 5;
    ASSERT_TRUE(validate_synth_shape(hp));
    const ModelHparams full = with_layout_defaults(hp);
    uint32_t dense = 0, routed = 0;
    for (const TensorSpec& t : tensor_layout(full)) {
        if (t.role == TensorRole::FfnGate) ++dense;
        if (t.role == TensorRole::ExpertGate) {
            ++routed;
            EXPECT_EQ(t.shape, (std::vector<uint64_t>{7168, 2048, 256})) << t.name;
        }
    }
    EXPECT_EQ(dense, 3u);
    EXPECT_EQ(routed, 2u);
    // Fewer layers than the dense ones leave none with experts.
    hp.n_layer = 3;
    EXPECT_FALSE(validate_synth_shape(hp));
}

}  // namespace
}  // namespace strata
