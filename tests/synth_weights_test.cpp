// Synthetic weights: reproducible (same seed, same bytes, whatever the threads and chunking),
// seed-dependent, and drawn with the scales of the recipe in the golden data's README.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "synth/weight_init.h"
#include "synth_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

struct Stats {
    double mean = 0, std = 0, min = 0, max = 0, within_1sd = 0;
};

Stats stats_of(const std::vector<float>& v) {
    Stats s;
    double sum = 0, sq = 0;
    s.min = s.max = v.empty() ? 0 : v[0];
    for (float x : v) {
        sum += x;
        sq += double{x} * x;
        s.min = std::min<double>(s.min, x);
        s.max = std::max<double>(s.max, x);
    }
    const double n = static_cast<double>(v.size());
    s.mean = sum / n;
    s.std = std::sqrt(std::max(0.0, sq / n - s.mean * s.mean));
    size_t inside = 0;
    for (float x : v) inside += std::fabs(x - s.mean) <= s.std;
    s.within_1sd = static_cast<double>(inside) / n;
    return s;
}

// A normal-looking projection: mean ~0, std within 5% of sigma, bell-shaped (about 68% of the
// values within one standard deviation; a uniform distribution would give 58%).
void expect_normal(const GgufFile& f, const std::string& name, double sigma) {
    SCOPED_TRACE(name);
    const std::vector<float> v = test::read_tensor_floats(f, name);
    ASSERT_GT(v.size(), 1000u);
    const Stats s = stats_of(v);
    EXPECT_NEAR(s.mean, 0.0, 5 * sigma / std::sqrt(static_cast<double>(v.size())));
    EXPECT_NEAR(s.std / sigma, 1.0, 0.05);
    EXPECT_NEAR(s.within_1sd, 0.68, 0.03);
}

void expect_uniform(const GgufFile& f, const std::string& name, double lo, double hi) {
    SCOPED_TRACE(name);
    const Stats s = stats_of(test::read_tensor_floats(f, name));
    EXPECT_GE(s.min, lo);
    EXPECT_LE(s.max, hi);
    // Spread over the whole range, centred: not all ones, not a constant.
    EXPECT_LT(s.min, lo + 0.1 * (hi - lo));
    EXPECT_GT(s.max, hi - 0.1 * (hi - lo));
    EXPECT_NEAR(s.mean, (lo + hi) / 2, 0.06 * (hi - lo));
}

// Embedding rows: N(sigma) times a per-row factor exp(0.5 z): the log of each row's standard
// deviation has mean log(sigma) and standard deviation 0.5.
void expect_row_scaled(const GgufFile& f, const std::string& name, double sigma) {
    SCOPED_TRACE(name);
    const TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr);
    const std::vector<float> v = test::read_tensor_floats(f, *t);
    const size_t row = t->shape[0], rows = t->shape[1];
    std::vector<double> log_std;
    for (size_t r = 0; r < rows; ++r) {
        const std::vector<float> one(v.begin() + r * row, v.begin() + (r + 1) * row);
        log_std.push_back(std::log(stats_of(one).std));
    }
    const double mean = std::accumulate(log_std.begin(), log_std.end(), 0.0) / rows;
    double var = 0;
    for (double x : log_std) var += (x - mean) * (x - mean);
    EXPECT_NEAR(mean, std::log(sigma), 0.06);
    EXPECT_NEAR(std::sqrt(var / rows), 0.5, 0.05);
}

TEST(SynthWeights, DenseLlamaFollowsTheRecipe) {
    test::TempDir tmp;
    const GgufFile f =
        test::synth_and_read(test::preset_config("tiny", TensorType::F32), tmp.file("m.gguf"));
    const double e = 256, ff = 512;  // n_embd, n_ff; n_head * head_dim = 256
    for (int il = 0; il < 2; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        expect_normal(f, b + "attn_q.weight", 1.28 / std::sqrt(e));
        expect_normal(f, b + "attn_k.weight", 1.28 / std::sqrt(e));
        expect_normal(f, b + "attn_v.weight", 0.96 / std::sqrt(e));
        expect_normal(f, b + "attn_output.weight", 0.80 / std::sqrt(e));
        expect_normal(f, b + "ffn_gate.weight", 0.96 / std::sqrt(e));
        expect_normal(f, b + "ffn_up.weight", 0.96 / std::sqrt(e));
        expect_normal(f, b + "ffn_down.weight", 1.39 / std::sqrt(ff));
        expect_uniform(f, b + "attn_norm.weight", 0.6, 1.4);
        expect_uniform(f, b + "ffn_norm.weight", 0.6, 1.4);
    }
    // Untied: d = 1.
    expect_uniform(f, "output_norm.weight", 0.6 * 4.5, 1.4 * 4.5);
    expect_row_scaled(f, "token_embd.weight", 0.1);
    expect_row_scaled(f, "output.weight", 0.1);
}

TEST(SynthWeights, MoeAndQwenTensorsFollowTheRecipe) {
    test::TempDir tmp;
    // Tied: the embedding shrinks 6x and output_norm grows 6x.
    const GgufFile moe = test::synth_and_read(test::preset_config("tiny-moe", TensorType::F32),
                                              tmp.file("moe.gguf"));
    expect_row_scaled(moe, "token_embd.weight", 0.1 / 6);
    expect_uniform(moe, "output_norm.weight", 0.6 * 27, 1.4 * 27);
    expect_normal(moe, "blk.1.ffn_gate_inp.weight", 3.0 / 16);
    expect_normal(moe, "blk.1.ffn_gate_exps.weight", 0.96 / 16);
    expect_normal(moe, "blk.1.ffn_down_exps.weight", 1.39 / 16);  // n_ff_exp = 256

    const GgufFile q2 = test::synth_and_read(test::preset_config("tiny-qwen2moe", TensorType::F32),
                                             tmp.file("q2.gguf"));
    for (const char* bias : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
        SCOPED_TRACE(bias);
        const Stats s = stats_of(test::read_tensor_floats(q2, std::string("blk.0.") + bias));
        EXPECT_NEAR(s.std, 0.1, 0.03);  // only 64-256 values
        EXPECT_NEAR(s.mean, 0.0, 0.04);
    }
    expect_normal(q2, "blk.0.ffn_down_shexp.weight", 1.39 / std::sqrt(512.0));
    expect_normal(q2, "blk.0.ffn_up_shexp.weight", 0.96 / 16);

    const GgufFile q3 = test::synth_and_read(test::preset_config("tiny-qwen3", TensorType::F32),
                                             tmp.file("q3.gguf"));
    expect_uniform(q3, "blk.0.attn_q_norm.weight", 0.6, 1.4);
    expect_uniform(q3, "blk.0.attn_k_norm.weight", 0.6, 1.4);
    expect_normal(q3, "blk.0.attn_output.weight", 0.80 / std::sqrt(8 * 64.0));
}

// F16 and BF16 files hold exactly the rounded values of the F32 file with the same seed.
TEST(SynthWeights, HalfTypesAreTheRoundedF32Values) {
    test::TempDir tmp;
    const GgufFile f32 = test::synth_and_read(test::preset_config("tiny-qwen3", TensorType::F32),
                                              tmp.file("f32.gguf"));
    const GgufFile f16 = test::synth_and_read(test::preset_config("tiny-qwen3", TensorType::F16),
                                              tmp.file("f16.gguf"));
    const GgufFile bf16 = test::synth_and_read(test::preset_config("tiny-qwen3", TensorType::BF16),
                                               tmp.file("bf16.gguf"));
    ASSERT_EQ(f32.tensors.size(), f16.tensors.size());
    ASSERT_EQ(f32.tensors.size(), bf16.tensors.size());
    EXPECT_EQ(bf16.get_uint("general.file_type"), 32u);
    for (size_t i = 0; i < f32.tensors.size(); ++i) {
        const auto& name = f32.tensors[i].name;
        const auto a = test::read_tensor_floats(f32, f32.tensors[i]);
        const auto h = test::read_tensor_floats(f16, f16.tensors[i]);
        const auto b = test::read_tensor_floats(bf16, bf16.tensors[i]);
        ASSERT_EQ(a.size(), h.size());
        for (size_t j = 0; j < a.size(); ++j) {
            if (f16.tensors[i].type == TensorType::F16) {
                ASSERT_EQ(h[j], quant::fp16_to_fp32(quant::fp32_to_fp16(a[j]))) << name << j;
                ASSERT_EQ(b[j], quant::bf16_to_fp32(quant::fp32_to_bf16(a[j]))) << name << j;
            } else {
                ASSERT_EQ(h[j], a[j]) << name << " " << j;  // F32 in every file
                ASSERT_EQ(b[j], a[j]) << name << " " << j;
            }
        }
    }
}

// ---- Reproducibility ------------------------------------------------------------------------

class SynthDeterminism : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(SynthDeterminism, SameSeedGivesIdenticalBytesForAnyThreadsAndChunking) {
    test::TempDir tmp;
    SynthConfig c = test::preset_config("tiny-qwen2moe", GetParam(), 7);
    c.threads = 1;
    ASSERT_TRUE(write_synthetic_model(c, tmp.file("a.gguf"), false).ok());
    c.threads = 3;
    c.chunk_bytes = 4096;  // many chunks per tensor, several rows each
    ASSERT_TRUE(write_synthetic_model(c, tmp.file("b.gguf"), false).ok());
    c.threads = 2;
    c.chunk_bytes = 100;  // less than a row: one row per chunk
    ASSERT_TRUE(write_synthetic_model(c, tmp.file("c.gguf"), false).ok());
    const std::string a = test::read_text_file(tmp.file("a.gguf"));
    EXPECT_GT(a.size(), 300000u);
    EXPECT_TRUE(a == test::read_text_file(tmp.file("b.gguf")));
    EXPECT_TRUE(a == test::read_text_file(tmp.file("c.gguf")));
}

INSTANTIATE_TEST_SUITE_P(Synth, SynthDeterminism,
                         ::testing::Values(WeightFormat(TensorType::F16),
                                           WeightFormat(TensorType::Q8_0),
                                           WeightFormat(TensorType::Q4_K, QuantMix::Q4_K_M),
                                           WeightFormat(TensorType::IQ4_XS, QuantMix::IQ4_XS)),
                         [](const auto& p) { return weight_format_name(p.param); });

TEST(SynthSeeds, DifferentSeedChangesEveryTensor) {
    test::TempDir tmp;
    const GgufFile a = test::synth_and_read(test::preset_config("tiny-moe", TensorType::F16, 1),
                                            tmp.file("a.gguf"));
    const GgufFile b = test::synth_and_read(test::preset_config("tiny-moe", TensorType::F16, 2),
                                            tmp.file("b.gguf"));
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    EXPECT_EQ(a.file_size, b.file_size);
    for (size_t i = 0; i < a.tensors.size(); ++i) {
        const auto x = test::read_tensor_floats(a, a.tensors[i]);
        const auto y = test::read_tensor_floats(b, b.tensors[i]);
        size_t same = 0;
        for (size_t j = 0; j < x.size(); ++j) same += x[j] == y[j];
        EXPECT_LT(same, x.size() / 20 + 2) << a.tensors[i].name;
    }
}

// A tensor's values depend only on the seed and its name: adding layers or untying the output
// leaves the other tensors' bytes alone.
TEST(SynthValues, TensorValuesDoNotDependOnTheRestOfTheModel) {
    test::TempDir tmp;
    SynthConfig c = test::preset_config("tiny", TensorType::F16, 3);
    const GgufFile a = test::synth_and_read(c, tmp.file("a.gguf"));
    c.hparams.n_layer = 3;
    c.hparams.tied_output = true;
    const GgufFile b = test::synth_and_read(c, tmp.file("b.gguf"));
    for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_down.weight"}) {
        EXPECT_EQ(test::read_tensor_floats(a, name), test::read_tensor_floats(b, name)) << name;
    }
}

TEST(SynthValues, GeneratedValuesDoNotDependOnHowTheRangeIsSplit) {
    WeightInit kinds[3];
    kinds[0].kind = InitKind::Normal;
    kinds[0].sigma = 0.02f;
    kinds[1].kind = InitKind::Uniform;
    kinds[1].lo = 0.6f;
    kinds[1].hi = 1.4f;
    kinds[2].kind = InitKind::RowScaledNormal;
    kinds[2].sigma = 0.1f;
    kinds[2].row_log_sigma = 0.5f;
    const uint64_t key = tensor_stream_key(42, "token_embd.weight");
    const uint64_t row = 100, n = 1000;
    for (const WeightInit& w : kinds) {
        std::vector<float> whole(n), parts(n);
        generate_values(w, key, 0, n, row, whole.data());
        // Pieces that cut rows anywhere.
        for (uint64_t first = 0, len = 1; first < n; first += len, len = len * 3 % 157 + 1) {
            const uint64_t take = std::min(len, n - first);
            generate_values(w, key, first, take, row, parts.data() + first);
        }
        EXPECT_EQ(whole, parts);
        std::vector<float> other(n);
        generate_values(w, tensor_stream_key(43, "token_embd.weight"), 0, n, row, other.data());
        EXPECT_NE(whole, other);
    }
}

}  // namespace
}  // namespace strata
