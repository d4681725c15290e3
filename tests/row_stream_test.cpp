// Anything can stream: the token-embedding table read by rows (only the rows a batch looks up),
// the LM head read in chunks of rows, and whole layers (attention and norms too) through the
// slot ring give the logits of everything resident, bit for bit, for untied and tied outputs
// and any chunk size; the plan deepens its streaming step by step as the budget shrinks, never
// counts more than the budget, and the store it sets up gives the resident tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_test_support.h"
#include "gguf/reader.h"
#include "model/streamable.h"
#include "store/model_store.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

std::string write_model(const test::TempDir& dir, const std::string& preset, uint32_t layers,
                        const std::string& vocab_from = "") {
    const std::string path = dir.file(preset + "-" + std::to_string(layers) + ".gguf");
    SynthConfig config;
    config.hparams = *synth_preset(preset);
    config.hparams.n_layer = layers;
    config.vocab_from = vocab_from;
    config.weights = TensorType::Q8_0;
    config.threads = 2;
    EXPECT_TRUE(write_synthetic_model(config, path, /*overwrite=*/true));
    return path;
}

ModelInfo load_info(const std::string& path) {
    auto file = read_gguf(path);
    EXPECT_TRUE(file) << (file ? "" : file.error().message);
    auto info = load_model_info(std::move(*file));
    EXPECT_TRUE(info) << (info ? "" : info.error().message);
    return std::move(*info);
}

// Every tensor of every layer through one slot, token_embd and the head by rows.
StoreLayout everything_streamed(const ModelInfo& info, uint64_t head_chunk_bytes) {
    StoreLayout l = resident_layout(info);
    l.mode = "ffn-stream";
    l.ring = {.lookahead = 0, .slots = 1};
    l.head_chunk_bytes = head_chunk_bytes;
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        const ModelTensor& t = info.tensors[i];
        if (t.layer >= 0) l.tensors[i] = Residence::Slot;
        if (t.layer < 0 && !t.is_bias &&
            (t.role == TensorRole::TokenEmbedding || t.role == TensorRole::Output)) {
            l.tensors[i] = Residence::Rows;
        }
    }
    return l;
}

struct Case {
    const char* preset;  // tiny: untied output; tiny-qwen3: tied; tiny-qwen2moe: MoE, untied
    uint64_t head_chunk_bytes;
};

class RowStreaming : public ::testing::TestWithParam<Case> {};

TEST_P(RowStreaming, EverythingStreamedGivesResidentLogits) {
    static test::TempDir dir;
    const ModelInfo info = load_info(write_model(dir, GetParam().preset, 3));
    auto resident = ModelStore::open(info, resident_layout(info));
    ASSERT_TRUE(resident) << resident.error().message;
    const auto want = test::greedy_logits(info, **resident, 6);

    auto streamed = ModelStore::open(info, everything_streamed(info, GetParam().head_chunk_bytes));
    ASSERT_TRUE(streamed) << streamed.error().message;
    EXPECT_EQ((*streamed)->resident_bytes() > 0, true);  // norms of the globals at least
    const auto got = test::greedy_logits(info, **streamed, 6);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    if (GetParam().head_chunk_bytes < kHeadChunkBytes) {
        EXPECT_GT((*streamed)->head_pieces(), 2);
    }
    // Every layer and the head are read again at every step; the embedding only its rows.
    const StoreReport r = (*streamed)->report();
    EXPECT_EQ(r.slot_stats.misses, r.slot_stats.layer_loads);
    EXPECT_GT(r.totals.bytes_from_disk, 7 * (info.totals.bytes / 2));
}

INSTANTIATE_TEST_SUITE_P(Models, RowStreaming,
                         ::testing::Values(Case{"tiny", kHeadChunkBytes}, Case{"tiny", 4096},
                                           Case{"tiny-qwen3", 3000}, Case{"tiny-qwen2moe", 8192}),
                         [](const auto& param_info) {
                             std::string n = std::string(param_info.param.preset) + "_" +
                                             std::to_string(param_info.param.head_chunk_bytes);
                             for (char& ch : n) {
                                 if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             }
                             return n;
                         });

TEST(RowStreaming, PlanDeepensAsTheBudgetShrinksAndTheStoreFollows) {
    STRATA_REQUIRE_TESTDATA();
    // A 128k vocabulary: the tables (2 x 35 MB) outweigh the six small layers, as in small real
    // models, so each step of deeper streaming lowers the minimum budget.
    test::TempDir dir;
    const std::string path = write_model(
        dir, "tiny", 6, (test::testdata_dir() / "vocab/ggml-vocab-llama-bpe.gguf").string());
    const ModelInfo info = load_info(path);
    PlanOptions po;
    po.n_ctx = 64;
    po.mode = PlanMode::FfnStream;
    Budgets b;
    int deepest = -1;
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 64;
    auto resident = LoadedModel::load(path, options);
    ASSERT_TRUE(resident);
    const auto want = test::greedy_logits(info, *(*resident)->store, 4);
    // From what a resident plan takes (the weights and what the process needs besides) down.
    b.ram = 16ull << 30;
    PlanOptions at_64;
    at_64.n_ctx = 64;
    auto whole = make_plan(info, HardwareProfile{}, b, at_64);
    ASSERT_TRUE(whole) << whole.error().message;
    for (uint64_t ram = whole->memory.total; ram > (64u << 10); ram -= ram / 64) {
        b.ram = ram;
        auto plan = make_plan(info, HardwareProfile{}, b, po);
        if (!plan) {
            EXPECT_NE(plan.error().message.find("need at least"), std::string::npos);
            break;
        }
        EXPECT_LE(plan->memory.total, ram);
        const int depth = plan->deep.whole_layers     ? 3
                          : plan->deep.head_rows      ? 2
                          : plan->deep.embedding_rows ? 1
                                                      : 0;
        EXPECT_GE(depth, deepest) << "streaming got shallower at a smaller budget";
        if (depth == deepest) continue;
        deepest = depth;
        SCOPED_TRACE("depth " + std::to_string(depth) + " at " + std::to_string(ram));
        auto loaded = LoadedModel::load(info, *plan, options);
        ASSERT_TRUE(loaded) << loaded.error().message;
        EXPECT_EQ((*loaded)->store->report().resident_bytes,
                  plan->memory.resident_weights + plan->memory.cached_weights);
        const auto got = test::greedy_logits(info, *(*loaded)->store, 4);
        for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    }
    EXPECT_EQ(deepest, 3) << "the smallest budgets did not stream whole layers";
}

}  // namespace
}  // namespace strata
