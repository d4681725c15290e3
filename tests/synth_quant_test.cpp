// Quantized synthetic models: every type the quant module writes and every llama-quantize mix
// (Q4_K_M, ...) gives the per-tensor types llama-quantize gives (checked against the golden
// files), the right general.file_type, and weights that dequantize to the F32 values within the
// format's error.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "synth/row_encoder.h"
#include "synth_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

using T = TensorType;
using M = QuantMix;

// ---- Plain types: every weight matrix of the type, dequantizing close to the F32 values -------

struct PlainCase {
    T type;
    uint32_t file_type;  // llama_ftype, written down from llama.cpp's enum
    double max_rel_rms;  // bound on rms(dequantized - f32) / rms(f32) per tensor
};

// Bounds sit about 1.3x above what the formats give on these weights (measured 0.005 for Q8_0,
// 0.08 for Q4_0, 0.26 for Q2_K, ...): a wrong scale or a broken block would exceed them.
constexpr PlainCase kPlainCases[] = {
    {T::Q8_0, 7, 0.0066},  {T::Q4_0, 2, 0.105},  {T::Q4_1, 3, 0.10},     {T::Q5_0, 8, 0.053},
    {T::Q5_1, 9, 0.048},   {T::Q2_K, 10, 0.34},  {T::Q3_K, 12, 0.18},    {T::Q4_K, 15, 0.088},
    {T::Q5_K, 17, 0.044},  {T::Q6_K, 18, 0.021}, {T::IQ4_NL, 25, 0.096}, {T::IQ4_XS, 30, 0.097},
    {T::MXFP4, 38, 0.153},
};

double rel_rms_error(const std::vector<float>& ref, const std::vector<float>& got) {
    double e = 0, r = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        e += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
        r += double(ref[i]) * ref[i];
    }
    return r == 0 ? std::sqrt(e) : std::sqrt(e / r);
}

class SynthPlainType : public ::testing::TestWithParam<PlainCase> {};

TEST_P(SynthPlainType, EveryMatrixHasTheTypeAndDequantizesCloseToF32) {
    const PlainCase& c = GetParam();
    test::TempDir tmp;
    const GgufFile ref =
        test::synth_and_read(test::preset_config("tiny-qwen2moe", T::F32), tmp.file("f32.gguf"));
    const GgufFile q = test::synth_and_read(
        test::preset_config("tiny-qwen2moe", WeightFormat(c.type, M::Pure)), tmp.file("q.gguf"));
    ASSERT_EQ(ref.tensors.size(), q.tensors.size());
    EXPECT_EQ(q.get_uint("general.file_type"), c.file_type);
    for (size_t i = 0; i < q.tensors.size(); ++i) {
        const TensorInfo& t = q.tensors[i];
        const bool matrix = t.shape[1] > 1 && t.name.find(".bias") == std::string::npos &&
                            t.name.find("_norm") == std::string::npos &&
                            t.name.find("ffn_gate_inp") == std::string::npos;
        EXPECT_EQ(t.type, matrix ? c.type : T::F32) << t.name;
        const auto a = test::read_tensor_floats(ref, ref.tensors[i]);
        const auto b = test::read_tensor_floats(q, t);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_LE(rel_rms_error(a, b), matrix ? c.max_rel_rms : 0.0) << t.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Synth, SynthPlainType, ::testing::ValuesIn(kPlainCases),
                         [](const auto& p) { return std::string(tensor_type_name(p.param.type)); });

// ---- Mixes: types per tensor as llama-quantize picks them --------------------------------------

std::map<std::string, T> planned_types(const SynthConfig& config) {
    auto plan = plan_synthetic_model(config);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
    std::map<std::string, T> out;
    if (!plan.ok()) return out;
    for (size_t i = 0; i < plan->layout.size(); ++i) out[plan->layout[i].name] = plan->types[i];
    return out;
}

// Expected weight-matrix types of the 2-layer tiny presets, written out by hand from
// llama-quantize's rules: with 2 layers only layer 1 is a "use more bits" layer; the 8-expert
// model has attn_k / attn_v at Q8_0 and attn_output at Q5_K; a tied token_embd is the LM head.
std::map<std::string, T> expected_tiny(T base, T more_bits) {
    std::map<std::string, T> e = {{"token_embd.weight", base}, {"output.weight", T::Q6_K}};
    for (int l = 0; l < 2; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        for (const char* n : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
            e[b + n + ".weight"] = base;
        }
        e[b + "attn_v.weight"] = l == 1 ? more_bits : base;
        e[b + "ffn_down.weight"] = l == 1 ? more_bits : base;
    }
    return e;
}

std::map<std::string, T> expected_tiny_moe(T base, T more_bits) {
    std::map<std::string, T> e = {{"token_embd.weight", T::Q6_K}};
    for (int l = 0; l < 2; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        e[b + "attn_q.weight"] = base;
        e[b + "attn_k.weight"] = T::Q8_0;
        e[b + "attn_v.weight"] = T::Q8_0;
        e[b + "attn_output.weight"] = T::Q5_K;
        e[b + "ffn_gate_exps.weight"] = base;
        e[b + "ffn_up_exps.weight"] = base;
        e[b + "ffn_down_exps.weight"] = l == 1 ? more_bits : base;
    }
    return e;
}

void expect_matrices(const std::map<std::string, T>& got, const std::map<std::string, T>& want) {
    size_t matrices = 0;
    for (const auto& [name, type] : got) {
        const auto it = want.find(name);
        if (it == want.end()) {
            EXPECT_EQ(type, T::F32) << name;  // norms and routers
            continue;
        }
        ++matrices;
        EXPECT_EQ(tensor_type_name(type), tensor_type_name(it->second)) << name;
    }
    EXPECT_EQ(matrices, want.size());
}

TEST(SynthMix, TinyPresetsAtQ4KMAndQ5KMHaveLlamaQuantizeTypes) {
    expect_matrices(planned_types(test::preset_config("tiny", {T::Q4_K, M::Q4_K_M})),
                    expected_tiny(T::Q4_K, T::Q6_K));
    expect_matrices(planned_types(test::preset_config("tiny", {T::Q5_K, M::Q5_K_M})),
                    expected_tiny(T::Q5_K, T::Q6_K));
    expect_matrices(planned_types(test::preset_config("tiny-moe", {T::Q4_K, M::Q4_K_M})),
                    expected_tiny_moe(T::Q4_K, T::Q6_K));
    auto q5 = expected_tiny_moe(T::Q5_K, T::Q6_K);
    for (auto& [name, type] : q5) {
        if (name.find("attn_output") != std::string::npos) type = T::Q5_K;
    }
    expect_matrices(planned_types(test::preset_config("tiny-moe", {T::Q5_K, M::Q5_K_M})), q5);
}

// The golden files were made by llama-quantize from models of the tiny presets' shapes: synth
// given the same shape and mix must pick the same type for every tensor.
struct GoldenMix {
    const char* file;
    const char* preset;
    const char* mix;
    uint32_t file_type;
};

class SynthGoldenMix : public ::testing::TestWithParam<GoldenMix> {};

TEST_P(SynthGoldenMix, PicksTheSameTypesAsLlamaQuantize) {
    STRATA_REQUIRE_TESTDATA();
    const GoldenMix& g = GetParam();
    auto golden = read_gguf((test::testdata_dir() / g.file).string());
    ASSERT_TRUE(golden.ok()) << golden.error().message;
    EXPECT_EQ(golden->get_uint("general.file_type"), g.file_type);

    SynthConfig config = test::preset_config(g.preset, *weight_format_from_name(g.mix));
    config.vocab_from = (test::testdata_dir() / "models/real/aidreams260K-F32.gguf").string();
    const auto got = planned_types(config);
    ASSERT_EQ(got.size(), golden->tensors.size());
    for (const TensorInfo& t : golden->tensors) {
        const auto it = got.find(t.name);
        ASSERT_NE(it, got.end()) << t.name;
        EXPECT_EQ(tensor_type_name(it->second), tensor_type_name(t.type)) << t.name;
    }

    test::TempDir tmp;
    const GgufFile f = test::synth_and_read(config, tmp.file("m.gguf"));
    EXPECT_EQ(f.get_uint("general.file_type"), g.file_type);
    EXPECT_EQ(f.file_size,
              golden->file_size - golden->tensors.front().offset + f.tensors.front().offset)
        << "same tensor bytes as the golden file";
}

INSTANTIATE_TEST_SUITE_P(
    Synth, SynthGoldenMix,
    ::testing::Values(GoldenMix{"models/synthetic/llama-dense-Q4_K_M.gguf", "tiny", "Q4_K_M", 15},
                      GoldenMix{"models/synthetic/llama-dense-Q5_K_M.gguf", "tiny", "Q5_K_M", 17},
                      GoldenMix{"models/synthetic/llama-dense-Q3_K_M.gguf", "tiny", "Q3_K_M", 12},
                      GoldenMix{"models/synthetic/llama-dense-Q2_K.gguf", "tiny", "Q2_K", 10},
                      GoldenMix{"models/synthetic/llama-dense-Q6_K.gguf", "tiny", "Q6_K", 18},
                      GoldenMix{"models/synthetic/llama-dense-IQ4_XS.gguf", "tiny", "IQ4_XS", 30},
                      GoldenMix{"models/synthetic/llama-moe-Q4_K_M.gguf", "tiny-moe", "Q4_K_M",
                                15}));

// Every mix writes a model that reads back with its file type and the planned types.
struct MixCase {
    const char* name;
    uint32_t file_type;
};

constexpr MixCase kMixCases[] = {
    {"Q2_K", 10},   {"Q3_K_S", 11}, {"Q3_K_M", 12}, {"Q3_K_L", 13}, {"Q4_K_S", 14},
    {"Q4_K_M", 15}, {"Q5_K_S", 16}, {"Q5_K_M", 17}, {"Q6_K", 18},   {"IQ4_XS", 30},
};

class SynthMixFile : public ::testing::TestWithParam<MixCase> {};

TEST_P(SynthMixFile, WritesItsFileTypeAndPlannedTypes) {
    const MixCase& c = GetParam();
    const std::optional<WeightFormat> w = weight_format_from_name(c.name);
    ASSERT_TRUE(w.has_value());
    EXPECT_NE(w->mix, M::Pure);
    EXPECT_EQ(weight_format_name(*w), c.name);
    test::TempDir tmp;
    const SynthConfig config = test::preset_config("tiny-qwen3moe", *w);
    const auto planned = planned_types(config);
    const GgufFile f = test::synth_and_read(config, tmp.file("m.gguf"));
    EXPECT_EQ(f.get_uint("general.file_type"), c.file_type);
    ASSERT_EQ(f.tensors.size(), planned.size());
    for (const TensorInfo& t : f.tensors) EXPECT_EQ(t.type, planned.at(t.name)) << t.name;
    const auto embd = test::read_tensor_floats(f, "token_embd.weight");
    EXPECT_FALSE(embd.empty());
}

INSTANTIATE_TEST_SUITE_P(Synth, SynthMixFile, ::testing::ValuesIn(kMixCases),
                         [](const auto& p) { return std::string(p.param.name); });

// ---- Row lengths that do not fit 256-element blocks --------------------------------------------

TEST(SynthMix, RowLengthsOffTheKQuantBlockFallBackAsLlamaQuantizeDoes) {
    ModelHparams hp = with_layout_defaults(*synth_preset("tiny"));
    const TensorSpec q{"blk.0.attn_q.weight", TensorRole::AttnQ, 0, false, {96, 96}};
    const TensorSpec v{"blk.1.attn_v.weight", TensorRole::AttnV, 1, false, {96, 32}};
    const TensorSpec down{"blk.1.ffn_down.weight", TensorRole::FfnDown, 1, false, {160, 96}};
    const TensorSpec head{"output.weight", TensorRole::Output, -1, false, {96, 512}};
    const TensorSpec odd{"blk.0.attn_q.weight", TensorRole::AttnQ, 0, false, {100, 100}};
    const WeightFormat q4km(T::Q4_K, M::Q4_K_M);
    EXPECT_EQ(synth_tensor_type(q, q4km, hp), T::Q5_0);     // Q4_K -> Q5_0
    EXPECT_EQ(synth_tensor_type(v, q4km, hp), T::Q8_0);     // Q6_K -> Q8_0
    EXPECT_EQ(synth_tensor_type(head, q4km, hp), T::Q8_0);  // head off the base blocks: Q8_0
    EXPECT_EQ(synth_tensor_type(odd, q4km, hp), T::F16);    // no 32-block either: F16
    EXPECT_EQ(synth_tensor_type(q, {T::Q5_K, M::Q5_K_S}, hp), T::Q5_1);
    EXPECT_EQ(synth_tensor_type(q, {T::Q3_K, M::Q3_K_S}, hp), T::IQ4_NL);
    EXPECT_EQ(synth_tensor_type(down, {T::Q2_K, M::Q2_K}, hp), T::IQ4_NL);  // Q3_K -> IQ4_NL
    EXPECT_EQ(synth_tensor_type(q, {T::IQ4_XS, M::IQ4_XS}, hp), T::IQ4_NL);
    // A plain type is kept; the planner rejects it (below).
    EXPECT_EQ(synth_tensor_type(q, T::Q4_K, hp), T::Q4_K);
}

TEST(SynthMix, SmallShapeWritesWithFallbacksButAPlainKQuantIsAnError) {
    SynthConfig config = test::preset_config("tiny", {T::Q4_K, M::Q4_K_M});
    config.hparams.n_embd = 128;
    config.hparams.n_ff = 384;
    test::TempDir tmp;
    const GgufFile f = test::synth_and_read(config, tmp.file("m.gguf"));
    ASSERT_NE(f.find_tensor("blk.0.attn_q.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, T::Q5_0);
    EXPECT_EQ(f.find_tensor("blk.1.attn_v.weight")->type, T::Q8_0);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, T::Q5_0);  // row length 384
    EXPECT_EQ(f.find_tensor("output.weight")->type, T::Q8_0);

    config.weights = T::Q4_K;
    const auto plan = plan_synthetic_model(config);
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("token_embd.weight: row length 128"), std::string::npos)
        << plan.error().message;
    EXPECT_NE(plan.error().message.find("Q4_K block size 256"), std::string::npos);
}

TEST(SynthMix, NamesParseAndPureGivesTheBaseType) {
    EXPECT_EQ(weight_format_from_name("q4_k_m"), WeightFormat(T::Q4_K, M::Q4_K_M));
    EXPECT_EQ(weight_format_from_name("Q4_K_M", /*pure=*/true), WeightFormat(T::Q4_K));
    EXPECT_EQ(weight_format_from_name("Q2_K"), WeightFormat(T::Q2_K, M::Q2_K));
    EXPECT_EQ(weight_format_from_name("Q4_K"), WeightFormat(T::Q4_K));
    EXPECT_EQ(weight_format_from_name("Q8_0"), WeightFormat(T::Q8_0));
    EXPECT_FALSE(weight_format_from_name("IQ2_XXS").has_value());
    EXPECT_FALSE(weight_format_from_name("Q4_K_X").has_value());
    EXPECT_EQ(file_type_for({T::Q4_K, M::Q4_K_S}), 14u);
    EXPECT_FALSE(file_type_for({T::Q8_0, M::Q4_K_M}).has_value());  // mix on the wrong base
}

}  // namespace
}  // namespace strata
