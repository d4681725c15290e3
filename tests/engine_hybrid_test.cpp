// The hybrid families (qwen35, qwen35moe, qwen3next: Gated DeltaNet layers between gated
// attention layers) in the engine: every residency mode computes the same logits as the resident
// one; the recurrent state is sized beside the KV cache, which only the attention layers have;
// and a sequence's context can only be kept whole, since its recurrent state cannot be rolled
// back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "gguf/reader.h"
#include "model/hparams.h"
#include "model/kv_layout.h"
#include "runtime/loaded_model.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

const std::vector<int32_t> kPrompt = {1, 17, 230, 4, 99, 5, 61, 8, 140, 3, 27};

void expect_modes_agree(const std::string& preset, const std::string& streamed) {
    SCOPED_TRACE(preset + " " + streamed);
    const std::string& path = test::synth_test_model(preset, TensorType::Q4_K);
    auto resident = test::load_in_mode(path, "resident", test::small_load_options());
    auto streaming = test::load_in_mode(path, streamed, test::small_load_options());
    ASSERT_TRUE(resident && streaming);
    // The same weights' bytes and the same arithmetic, only read from elsewhere: the same bits.
    test::expect_same_logits(*resident->engine, *streaming->engine, kPrompt);
    EXPECT_GT(streaming->store->stats().bytes_from_disk, 0u);
}

TEST(EngineHybrid, StreamingModesGiveTheResidentLogits) {
    expect_modes_agree("tiny-qwen35", "ffn-stream");
    expect_modes_agree("tiny-qwen35moe", "expert-stream");
    expect_modes_agree("tiny-qwen3next", "expert-stream");
    expect_modes_agree("tiny-qwen3next-qkv", "expert-stream");
}

TEST(EngineHybrid, OnlyAttentionLayersHaveAKvCache) {
    const ModelHparams hp = *synth_preset("tiny-qwen35");
    ModelHparams full = hp;
    full.recurrent_layers = {true, true, true, false};
    // One attention layer: 2 KV heads x 64 keys and values per position in F16.
    const uint64_t kv = kv_layer_bytes(full, 3, 100, KvType::F16);
    EXPECT_EQ(kv, 2 * 100 * 2 * 64 * 2u);
    // A delta-net layer: 3 past inputs of 512 channels, and 4 value heads of 64 x 64, whatever the
    // context.
    const uint64_t state = 3 * 512 * 4 + 4 * 64 * 64 * 4;
    EXPECT_EQ(kv_layer_bytes(full, 0, 100, KvType::F16), state);
    EXPECT_EQ(kv_layer_bytes(full, 0, 4000, KvType::F16), state);
    EXPECT_EQ(kv_cache_bytes(full, 100, KvType::F16), kv + 3 * state);
}

TEST(EngineHybrid, APrefixIsKeptOnlyWhole) {
    const std::string& path = test::synth_test_model("tiny-qwen35", TensorType::Q8_0);
    auto m = test::load_in_mode(path, "resident", test::small_load_options());
    ASSERT_TRUE(m);
    engine::Engine& e = *m->engine;
    std::vector<float> fresh, again, logits;
    ASSERT_TRUE(e.eval(kPrompt, engine::LogitsWanted::Last, fresh));
    // The whole context is kept: the state is at its end.
    EXPECT_EQ(e.truncate(uint32_t(kPrompt.size())), kPrompt.size());
    EXPECT_EQ(e.n_past(), kPrompt.size());
    // A shorter prefix cannot be: the sequence starts again, state and all.
    EXPECT_EQ(e.truncate(5), 0u);
    EXPECT_EQ(e.n_past(), 0u);
    ASSERT_TRUE(e.eval(kPrompt, engine::LogitsWanted::Last, again));
    EXPECT_EQ(std::memcmp(again.data(), fresh.data(), fresh.size() * sizeof(float)), 0)
        << "the recurrent state was not forgotten";
    // Continuing after a kept prefix is the same as evaluating everything at once.
    const std::vector<int32_t> more = {44, 45, 46};
    ASSERT_TRUE(e.eval(more, engine::LogitsWanted::Last, logits));
    std::vector<int32_t> whole = kPrompt;
    whole.insert(whole.end(), more.begin(), more.end());
    std::vector<float> at_once;
    EXPECT_EQ(e.truncate(0), 0u);
    ASSERT_TRUE(e.eval(whole, engine::LogitsWanted::Last, at_once));
    ASSERT_EQ(at_once.size(), logits.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        worst = std::max(worst, double(std::fabs(logits[i] - at_once[i])));
        scale = std::max(scale, double(std::fabs(at_once[i])));
    }
    // Chunks cut at other places sum in another order: float rounding, which may tip an 8-bit
    // activation rounding a step (engine_invariants_test.cpp's kFlipTol), nothing more.
    EXPECT_LT(worst, 4.0 / 127 * scale);
}

// The reference converter appends the multi-token-prediction block after the trunk and counts it
// in block_count. strata runs the trunk: the file with the block gives the logits of the file
// without it (the trunk's weights are seeded by name, so they are the same bytes), in every
// mode, and neither the plan nor the store counts or reads the block.
TEST(EngineHybrid, MultiTokenPredictionBlocksAreSetAside) {
    const std::string& plain = test::synth_test_model("tiny-qwen35moe", TensorType::Q4_K);
    test::TempDir dir;
    SynthConfig config;
    config.hparams = *synth_preset("tiny-qwen35moe");
    config.hparams.n_layer_nextn = 1;
    config.weights = TensorType::Q4_K;
    config.threads = 2;
    const std::string with_mtp = dir.file("tiny-qwen35moe-mtp.gguf");
    auto written = write_synthetic_model(config, with_mtp, /*overwrite=*/true);
    ASSERT_TRUE(written) << written.error().message;

    for (const std::string mode : {"resident", "expert-stream"}) {
        SCOPED_TRACE(mode);
        auto want_model = test::load_in_mode(plain, mode, test::small_load_options());
        auto got_model = test::load_in_mode(with_mtp, mode, test::small_load_options());
        ASSERT_TRUE(want_model && got_model);
        const ModelInfo& info = got_model->info;
        ASSERT_TRUE(info.hparams);
        EXPECT_EQ(info.hparams->n_layer, 4u);
        EXPECT_EQ(info.hparams->n_layer_nextn, 1u);
        EXPECT_EQ(info.hparams->recurrent_layers.size(), 4u);
        // The block's attention, FFN, shared expert and own tensors: set aside, named in a note.
        EXPECT_GE(info.set_aside.size(), 15u);
        EXPECT_EQ(info.file.tensors.size(), want_model->info.file.tensors.size());
        EXPECT_EQ(info.totals.bytes, want_model->info.totals.bytes);
        EXPECT_TRUE(std::any_of(info.warnings.begin(), info.warnings.end(), [](auto& w) {
            return w.find("1 multi-token-prediction layer") != std::string::npos;
        }));
        ASSERT_EQ(got_model->plan.has_value(), want_model->plan.has_value());
        if (got_model->plan) {
            EXPECT_EQ(got_model->plan->memory.resident_weights,
                      want_model->plan->memory.resident_weights);
            EXPECT_EQ(got_model->plan->memory.expert_cache, want_model->plan->memory.expert_cache);
            EXPECT_EQ(got_model->plan->memory.slots, want_model->plan->memory.slots);
        }
        EXPECT_EQ(got_model->loaded_bytes, want_model->loaded_bytes);
        test::expect_same_logits(*want_model->engine, *got_model->engine, kPrompt);
    }
}

// Sets <arch>.<key> in the file's metadata, replacing it when present.
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

TEST(EngineHybrid, RecurrentLayersAndPredictionBlocksFromTheMetadata) {
    auto file = read_gguf(test::synth_test_model("tiny-qwen35moe", TensorType::Q4_K));
    ASSERT_TRUE(file) << file.error().message;
    GgufFile f = std::move(*file);

    // One bool per layer of the file, the multi-token-prediction block included.
    set_key(f, "qwen35moe.block_count", Value(uint32_t{5}));
    set_key(f, "qwen35moe.nextn_predict_layers", Value(uint32_t{1}));
    Array listed{ValueType::BOOL, {}};
    for (bool b : {false, true, false, true, false}) listed.items.emplace_back(b);
    set_key(f, "qwen35moe.attention.recurrent_layers", Value(listed));
    auto hp = load_hparams(f);
    ASSERT_TRUE(hp) << hp.error().message;
    EXPECT_EQ(hp->n_layer, 4u);
    EXPECT_EQ(hp->n_layer_nextn, 1u);
    EXPECT_EQ(hp->recurrent_layers, (std::vector<bool>{false, true, false, true}));

    // A list of the trunk's length only does not fit block_count.
    listed.items.pop_back();
    set_key(f, "qwen35moe.attention.recurrent_layers", Value(listed));
    hp = load_hparams(f);
    ASSERT_FALSE(hp);
    EXPECT_NE(hp.error().message.find("attention.recurrent_layers"), std::string::npos);

    // Every layer a prediction block: no trunk.
    set_key(f, "qwen35moe.nextn_predict_layers", Value(uint32_t{5}));
    hp = load_hparams(f);
    ASSERT_FALSE(hp);
    EXPECT_NE(hp.error().message.find("no trunk layer"), std::string::npos);
}

}  // namespace
}  // namespace strata
