// Synthetic models as written and read back: every tiny preset has the planned tensors, types and
// metadata; the tokenizer is copied verbatim or built in and well-formed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/tensor_layout.h"
#include "synth/row_encoder.h"
#include "synth/vocabulary.h"
#include "synth_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// What each tiny preset must contain, written down independently of the presets table.
struct PresetExpectation {
    const char* preset;
    const char* arch;
    uint32_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_ctx, n_rot;
    float rope_base, rms_eps;
    uint32_t key_length;  // 0: key absent (head_dim = n_embd / n_head)
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;  // 0: key absent
    bool tied;
    size_t n_tensors;
};

constexpr PresetExpectation kTinyPresets[] = {
    {"tiny", "llama", 2, 256, 8, 2, 512, 2048, 32, 500000.0f, 1e-5f, 0, 0, 0, 0, 0, false, 21},
    {"tiny-moe", "llama", 2, 256, 8, 2, 256, 2048, 32, 1e6f, 1e-5f, 0, 8, 2, 0, 0, true, 22},
    {"tiny-qwen2", "qwen2", 2, 256, 8, 2, 512, 4096, 32, 1e6f, 1e-6f, 0, 0, 0, 0, 0, true, 26},
    {"tiny-qwen3", "qwen3", 2, 256, 8, 2, 512, 4096, 64, 1e6f, 1e-6f, 64, 0, 0, 0, 0, true, 24},
    {"tiny-qwen2moe", "qwen2moe", 2, 256, 8, 2, 512, 4096, 32, 1e6f, 1e-6f, 0, 8, 2, 256, 512,
     false, 37},
    {"tiny-qwen3moe", "qwen3moe", 2, 256, 8, 2, 512, 4096, 64, 1e6f, 1e-6f, 64, 8, 2, 256, 0, false,
     27},
};

class TinyPreset : public ::testing::TestWithParam<PresetExpectation> {};

TEST_P(TinyPreset, ReadsBackWithPlannedTensorsTypesAndMetadata) {
    const PresetExpectation& e = GetParam();
    test::TempDir tmp;
    const SynthConfig config = test::preset_config(e.preset, TensorType::F16);
    const GgufFile f = test::synth_and_read(config, tmp.file("m.gguf"));
    ASSERT_FALSE(f.tensors.empty());
    EXPECT_EQ(f.file_size, fs::file_size(tmp.file("m.gguf")));
    EXPECT_FALSE(fs::exists(tmp.file("m.gguf.partial")));

    // Metadata, by llama.cpp's key names.
    const std::string a = std::string(e.arch) + ".";
    EXPECT_EQ(f.get_string("general.architecture"), e.arch);
    EXPECT_EQ(f.get_string("general.name"), "synthetic-" + std::string(e.preset));
    EXPECT_EQ(f.get_uint("general.file_type"), 1u);  // MOSTLY_F16
    EXPECT_EQ(f.get_uint(a + "block_count"), e.n_layer);
    EXPECT_EQ(f.get_uint(a + "embedding_length"), e.n_embd);
    EXPECT_EQ(f.get_uint(a + "attention.head_count"), e.n_head);
    EXPECT_EQ(f.get_uint(a + "attention.head_count_kv"), e.n_head_kv);
    EXPECT_EQ(f.get_uint(a + "feed_forward_length"), e.n_ff);
    EXPECT_EQ(f.get_uint(a + "context_length"), e.n_ctx);
    EXPECT_EQ(f.get_uint(a + "rope.dimension_count"), e.n_rot);
    EXPECT_EQ(f.get_float(a + "rope.freq_base"), e.rope_base);
    EXPECT_EQ(f.get_float(a + "attention.layer_norm_rms_epsilon"), e.rms_eps);
    auto optional_key = [&](const std::string& key, uint32_t want) {
        if (want == 0) {
            EXPECT_EQ(f.find(a + key), nullptr) << key;
        } else {
            EXPECT_EQ(f.get_uint(a + key), want) << key;
        }
    };
    optional_key("attention.key_length", e.key_length);
    optional_key("attention.value_length", e.key_length);
    optional_key("expert_count", e.n_expert);
    optional_key("expert_used_count", e.n_expert_used);
    optional_key("expert_feed_forward_length", e.n_ff_exp);
    optional_key("expert_shared_feed_forward_length", e.n_ff_shexp);
    // Counts are written as u32 like gguf-py does, floats as f32.
    EXPECT_EQ(f.find(a + "block_count")->type(), ValueType::U32);
    EXPECT_EQ(f.find(a + "rope.freq_base")->type(), ValueType::F32);

    const Array* tokens = f.get_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    const uint64_t n_vocab = tokens->items.size();
    EXPECT_EQ(f.get_uint(a + "vocab_size"), n_vocab);

    // Tensors: the planned layout, in order, with llama.cpp's type rule.
    ASSERT_EQ(f.tensors.size(), e.n_tensors);
    EXPECT_EQ(f.find_tensor("output.weight") == nullptr, e.tied);
    ModelHparams hp = config.hparams;
    hp.n_vocab = static_cast<uint32_t>(n_vocab);
    const std::vector<TensorSpec> layout = tensor_layout(hp);
    ASSERT_EQ(layout.size(), f.tensors.size());
    for (size_t i = 0; i < layout.size(); ++i) {
        const TensorInfo& t = f.tensors[i];
        EXPECT_EQ(t.name, layout[i].name);
        EXPECT_EQ(std::vector<uint64_t>(t.shape.begin(), t.shape.begin() + t.n_dims),
                  layout[i].shape)
            << t.name;
        const bool stays_f32 = t.n_dims == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
        EXPECT_EQ(t.type, stays_f32 ? TensorType::F32 : TensorType::F16) << t.name;
        EXPECT_EQ(t.offset % f.alignment, 0u) << t.name;
    }
    const TensorInfo* embd = f.find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->shape[0], e.n_embd);
    EXPECT_EQ(embd->shape[1], n_vocab);
}

INSTANTIATE_TEST_SUITE_P(Synth, TinyPreset, ::testing::ValuesIn(kTinyPresets),
                         [](const auto& param_info) {
                             std::string n = param_info.param.preset;
                             for (char& c : n) {
                                 if (c == '-') c = '_';
                             }
                             return n;
                         });

TEST(SynthPresets, EveryPresetIsValidAndPlansWithoutWriting) {
    for (const auto& p : synth_presets()) {
        SCOPED_TRACE(std::string(p.name));
        SynthConfig c;
        c.hparams = *synth_preset(p.name);
        auto plan = plan_synthetic_model(c);
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        EXPECT_EQ(plan->layout.size(), plan->types.size());
    }
    EXPECT_FALSE(synth_preset("no-such-preset").has_value());
}

TEST(SynthPresets, LargePresetsHaveTheDocumentedSizes) {
    auto params = [](const char* preset) {
        SynthConfig c;
        c.hparams = *synth_preset(preset);
        auto plan = plan_synthetic_model(c);
        EXPECT_TRUE(plan.ok());
        return plan.ok() ? layout_parameter_count(plan->layout) : 0;
    };
    // Without a large vocabulary the embeddings are tiny; the blocks carry the size.
    EXPECT_NEAR(static_cast<double>(params("1b")), 0.975e9, 0.01e9);
    EXPECT_NEAR(static_cast<double>(params("8b")), 6.98e9, 0.02e9);
    EXPECT_NEAR(static_cast<double>(params("70b")), 68.5e9, 0.5e9);
    EXPECT_NEAR(static_cast<double>(params("mixtral-10g")), 17.4e9, 0.1e9);
    EXPECT_NEAR(static_cast<double>(params("qwen3moe-30b-a3b")), 29.9e9, 0.1e9);
    const ModelHparams q = *synth_preset("qwen3moe-30b-a3b");
    EXPECT_EQ(q.n_expert, 128u);
    EXPECT_EQ(q.n_expert_used, 8u);
    EXPECT_EQ(q.head_dim_k, 128u);
}

// ---- Vocabulary ---------------------------------------------------------------------------

std::vector<std::string> strings_of(const Array& a) {
    std::vector<std::string> out;
    for (const auto& v : a.items) out.push_back(*v.as_string());
    return out;
}

// Splits UTF-8 text into characters (SentencePiece's initial symbols).
std::vector<std::string> utf8_chars(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

TEST(BuiltinVocabulary, IsAWellFormedSentencePieceVocabulary) {
    test::TempDir tmp;
    const GgufFile f = test::synth_and_read(test::preset_config("tiny"), tmp.file("m.gguf"));
    const Array* tok = f.get_array("tokenizer.ggml.tokens");
    const Array* scores = f.get_array("tokenizer.ggml.scores");
    const Array* types = f.get_array("tokenizer.ggml.token_type");
    ASSERT_TRUE(tok && scores && types);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(tok->elem_type, ValueType::STRING);
    EXPECT_EQ(scores->elem_type, ValueType::F32);
    EXPECT_EQ(types->elem_type, ValueType::I32);
    const std::vector<std::string> tokens = strings_of(*tok);
    const size_t n = tokens.size();
    EXPECT_GE(n, 259u + 300u);
    EXPECT_LE(n, 2000u);
    ASSERT_EQ(scores->items.size(), n);
    ASSERT_EQ(types->items.size(), n);
    EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), n) << "duplicates";

    auto type_of = [&](size_t id) { return *types->items[id].as_int(); };
    EXPECT_EQ(tokens[0], "<unk>");
    EXPECT_EQ(type_of(0), 2);
    EXPECT_EQ(tokens[1], "<s>");
    EXPECT_EQ(tokens[2], "</s>");
    EXPECT_EQ(type_of(1), 3);
    EXPECT_EQ(f.get_uint("tokenizer.ggml.unknown_token_id"), 0u);
    EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
    EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
    EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
    for (int b = 0; b < 256; ++b) {
        char want[8];
        std::snprintf(want, sizeof want, "<0x%02X>", b);
        ASSERT_EQ(tokens[3 + b], want);
        ASSERT_EQ(type_of(3 + b), 6);
    }

    // Every normal piece can be built by SentencePiece's pairwise merges: each proper prefix
    // (in characters) of a multi-character piece is itself a token. Scores fall with the index.
    const std::set<std::string> vocab(tokens.begin(), tokens.end());
    std::optional<float> last_score;
    size_t normal = 0;
    for (size_t id = 259; id < n; ++id) {
        if (type_of(id) != 1) continue;
        ++normal;
        const auto chars = utf8_chars(tokens[id]);
        std::string prefix;
        for (size_t c = 0; c + 1 < chars.size(); ++c) {
            prefix += chars[c];
            EXPECT_TRUE(vocab.count(prefix))
                << "'" << prefix << "' (prefix of '" << tokens[id] << "') is missing";
        }
        const float s = static_cast<float>(*scores->items[id].as_float());
        if (last_score) {
            EXPECT_LT(s, *last_score) << tokens[id];
        }
        last_score = s;
    }
    EXPECT_GE(normal, 300u);
    const std::string space = "\xe2\x96\x81";  // "▁"
    for (const char* w : {"the", "of", "and", "Once", "upon", "time", "return"}) {
        EXPECT_TRUE(vocab.count(space + w)) << w;
    }
    EXPECT_TRUE(vocab.count("ing"));
    for (char c = '!'; c <= '~'; ++c) EXPECT_TRUE(vocab.count(std::string(1, c))) << c;

    // The chat template uses control tokens that exist as such.
    const auto tmpl = f.get_string("tokenizer.chat_template");
    ASSERT_TRUE(tmpl.has_value());
    for (const std::string control : {"<|im_start|>", "<|im_end|>"}) {
        EXPECT_NE(tmpl->find(control), std::string::npos);
        auto it = std::find(tokens.begin(), tokens.end(), control);
        ASSERT_NE(it, tokens.end()) << control;
        EXPECT_EQ(type_of(static_cast<size_t>(it - tokens.begin())), 3) << control;
    }
    const auto eot = f.get_uint("tokenizer.ggml.eot_token_id");
    ASSERT_TRUE(eot.has_value());
    ASSERT_LT(*eot, n);
    EXPECT_EQ(tokens[*eot], "<|im_end|>");
    EXPECT_EQ(builtin_vocabulary().n_tokens, n);
}

class VocabFrom : public ::testing::TestWithParam<const char*> {};

// Every tokenizer.* key of the source, in order, with identical type and value; nothing else of
// the source (its architecture or shape) leaks into the model.
TEST_P(VocabFrom, CopiesEveryTokenizerKeyVerbatim) {
    STRATA_REQUIRE_TESTDATA();
    const std::string source = (test::testdata_dir() / GetParam()).string();
    auto src = read_gguf(source);
    ASSERT_TRUE(src.ok()) << src.error().message;

    test::TempDir tmp;
    SynthConfig config = test::preset_config("tiny-qwen2");
    config.hparams.n_embd = 64;  // keep big vocabularies' embedding matrices small
    config.hparams.n_head = 4;
    config.vocab_from = source;
    const GgufFile f = test::synth_and_read(config, tmp.file("m.gguf"));

    std::vector<const MetadataEntry*> want, got;
    for (const auto& e : src->metadata) {
        if (e.key.starts_with("tokenizer.")) want.push_back(&e);
    }
    for (const auto& e : f.metadata) {
        if (e.key.starts_with("tokenizer.")) got.push_back(&e);
    }
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(want[i]->key, got[i]->key);
        EXPECT_TRUE(test::same_value(want[i]->value, got[i]->value)) << want[i]->key;
    }
    const uint64_t n_vocab = src->get_array("tokenizer.ggml.tokens")->items.size();
    EXPECT_EQ(f.get_uint("qwen2.vocab_size"), n_vocab);
    EXPECT_EQ(f.find_tensor("token_embd.weight")->shape[1], n_vocab);
    EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
    EXPECT_EQ(f.get_uint("qwen2.block_count"), 2u);
    EXPECT_EQ(f.get_uint("qwen2.embedding_length"), 64u);
}

INSTANTIATE_TEST_SUITE_P(Synth, VocabFrom,
                         ::testing::Values("models/real/aidreams260K-F32.gguf",
                                           "vocab/ggml-vocab-llama-spm.gguf",
                                           "vocab/ggml-vocab-qwen2.gguf"),
                         [](const auto& param_info) { return std::to_string(param_info.index); });

TEST(VocabFrom, FileWithoutTokenizerIsAnErrorNamingTheFile) {
    test::TempDir tmp;
    // A valid GGUF with no tokenizer keys.
    GgufWriter w;
    w.set("general.architecture", "llama");
    ASSERT_TRUE(w.open(tmp.file("novocab.gguf")).ok());
    ASSERT_TRUE(w.finish().ok());
    SynthConfig config = test::preset_config("tiny");
    config.vocab_from = tmp.file("novocab.gguf");
    auto r = write_synthetic_model(config, tmp.file("m.gguf"), false);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("novocab.gguf"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("tokenizer.ggml.tokens"), std::string::npos);
    EXPECT_FALSE(fs::exists(tmp.file("m.gguf")));
}

}  // namespace
}  // namespace strata
