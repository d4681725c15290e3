// Layers streamed through the slot ring must change nothing but where the bytes come from
// (design invariant 1): the same tokens give bit-identical logits with FFN layers streamed through
// any number of slots and any prefetch depth as with everything resident, on io_uring and on the
// pread fallback; its counters must add up (every streamed layer found ready, waited for or read on
// demand; disk bytes = streamed bytes per load).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "engine/engine.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "runtime/backend_factory.h"
#include "store/model_store.h"
#include "test_support.h"

namespace strata {
namespace {

struct TokenRun {
    std::vector<std::vector<float>> logits;  // per step
};

TokenRun run_tokens(const ModelInfo& info, WeightStore& store) {
    return {test::greedy_logits(info, store, 6)};
}

ModelInfo load_info(const std::string& stem_path) {
    auto f = read_gguf((test::testdata_dir() / stem_path).string());
    EXPECT_TRUE(f);
    auto info = load_model_info(std::move(*f));
    EXPECT_TRUE(info);
    return std::move(*info);
}

class StreamingStoreTest : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamingStoreTest, StreamedFfnGivesResidentLogits) {
    STRATA_REQUIRE_TESTDATA();
    const ModelInfo info = load_info(GetParam());
    auto resident = ModelStore::open(info, resident_layout(info));
    ASSERT_TRUE(resident) << resident.error().message;
    const TokenRun want = run_tokens(info, **resident);
    const uint32_t n_layer = info.hparams->n_layer;

    struct Case {
        int lookahead, slots;
        bool every_other;
    };
    for (const Case c : {Case{0, 1, false}, Case{1, 2, false}, Case{2, 3, false},
                         Case{1, int(n_layer), false}, Case{1, 2, true}}) {
        SCOPED_TRACE("lookahead " + std::to_string(c.lookahead) + " slots " +
                     std::to_string(c.slots) + (c.every_other ? " every other layer" : ""));
        std::vector<bool> stream_layers;
        for (uint32_t l = 0; l < n_layer; ++l) stream_layers.push_back(!c.every_other || l % 2);
        const SlotRingConfig ring{.lookahead = c.lookahead, .slots = c.slots};
        auto store = ModelStore::open(info, layer_stream_layout(info, stream_layers, ring));
        ASSERT_TRUE(store) << store.error().message;
        const TokenRun got = run_tokens(info, **store);
        ASSERT_EQ(got.logits.size(), want.logits.size());
        for (size_t i = 0; i < want.logits.size(); ++i) EXPECT_EQ(got.logits[i], want.logits[i]);

        EXPECT_EQ((*store)->mode_name(), "ffn-stream");
        const SlotStats& st = (*store)->slot_ring().stats();
        uint32_t streamed = 0;
        for (bool b : stream_layers) streamed += b;
        EXPECT_EQ(st.layer_loads, uint64_t(streamed) * want.logits.size());
        EXPECT_EQ(st.hits + st.waits + st.misses, st.layer_loads);
        EXPECT_GT((*store)->stats().bytes_from_disk, 0u);
        ASSERT_EQ(st.layer_stall_seconds.size(), n_layer);
        double stall = 0;
        for (double x : st.layer_stall_seconds) stall += x;
        EXPECT_NEAR(stall, (*store)->stats().stall_seconds, 1e-9);
        if (c.slots >= int(streamed)) {
            // Every layer keeps its slot: read once, then always found.
            EXPECT_EQ(st.misses, c.lookahead > 0 ? 1u : uint64_t(streamed));
            EXPECT_GE(st.hits, st.layer_loads - streamed);
        }
        if (c.lookahead == 0) {
            EXPECT_EQ(st.misses, st.layer_loads);  // no prefetch: all demand
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Models, StreamingStoreTest,
                         ::testing::Values("models/real/aidreams260K-Q4_K_M.gguf",
                                           "models/synthetic/llama-dense-Q4_K_M.gguf",
                                           "models/synthetic/qwen2-Q8_0.gguf",
                                           "models/synthetic/llama-dense-BF16.gguf"),
                         [](const auto& param_info) {
                             std::string n = param_info.param;
                             n = n.substr(n.rfind('/') + 1);
                             for (char& ch : n) {
                                 if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             }
                             return n;
                         });

TEST(StreamingStore, PreadFallbackGivesTheSameLogits) {
    STRATA_REQUIRE_TESTDATA();
    const ModelInfo info = load_info("models/synthetic/llama-dense-Q8_0.gguf");
    auto resident = ModelStore::open(info, resident_layout(info));
    ASSERT_TRUE(resident);
    const TokenRun want = run_tokens(info, **resident);
    ::setenv("STRATA_IO", "pread", 1);
    const std::vector<bool> every_layer(info.hparams->n_layer, true);
    auto store = ModelStore::open(info, layer_stream_layout(info, every_layer, {.lookahead = 1}));
    ::unsetenv("STRATA_IO");
    ASSERT_TRUE(store) << store.error().message;
    const TokenRun got = run_tokens(info, **store);
    for (size_t i = 0; i < want.logits.size(); ++i) EXPECT_EQ(got.logits[i], want.logits[i]);
}

TEST(StreamingStore, RefusesALayoutThatDoesNotFitTheModel) {
    STRATA_REQUIRE_TESTDATA();
    const ModelInfo info = load_info("models/synthetic/llama-dense-Q8_0.gguf");
    StoreLayout longer = resident_layout(info);
    longer.tensors.push_back(Residence::Arena);
    auto store = ModelStore::open(info, longer);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("tensors"), std::string::npos);

    // Tensors outside the layers have no layer to stream with.
    StoreLayout global_streamed = resident_layout(info);
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        if (info.tensors[i].layer < 0) global_streamed.tensors[i] = Residence::Slot;
    }
    store = ModelStore::open(info, global_streamed);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("cannot stream"), std::string::npos);
}

// A model file cut short while strata runs (a disk error, a copy still in progress): the next
// streamed read comes up short, and eval fails with an error naming the file instead of
// computing with a partial slot; the context stays as it was.
TEST(StreamingStore, FileTruncatedMidRunIsAnErrorNotGarbage) {
    STRATA_REQUIRE_TESTDATA();
    test::TempDir dir;
    const std::string copy = dir.file("model.gguf");
    std::filesystem::copy_file(test::testdata_dir() / "models/synthetic/llama-dense-Q8_0.gguf",
                               copy);
    auto f = read_gguf(copy);
    ASSERT_TRUE(f);
    auto info = load_model_info(std::move(*f));
    ASSERT_TRUE(info);
    const std::vector<bool> every_layer(info->hparams->n_layer, true);
    // One slot: every token reads every layer again.
    auto store = ModelStore::open(
        *info, layer_stream_layout(*info, every_layer, {.lookahead = 0, .slots = 1}));
    ASSERT_TRUE(store) << store.error().message;
    engine::EngineOptions opt;
    opt.threads = 2;
    opt.n_ctx = 32;
    auto e = engine::Engine::create(*info->hparams, **store, opt, make_backend);
    ASSERT_TRUE(e) << e.error().message;
    std::vector<float> logits;
    const std::vector<int32_t> prompt{1, 429, 491};
    ASSERT_TRUE((*e)->eval(prompt, engine::LogitsWanted::Last, logits));

    // Cut the file in the middle of the first layer's FFN tensors.
    uint64_t cut = info->file.file_size;
    for (const TensorInfo& t : info->file.tensors) {
        if (t.name.rfind("blk.0.ffn_", 0) == 0) cut = std::min(cut, t.offset + t.n_bytes / 2);
    }
    ASSERT_LT(cut, info->file.file_size);
    std::filesystem::resize_file(copy, cut);

    const uint32_t n_past = (*e)->n_past();
    const int32_t next = 5;
    bool failed = false;
    for (int step = 0; step < 3 && !failed; ++step) {  // a prefetched slot may still be whole
        auto r = (*e)->eval({&next, 1}, engine::LogitsWanted::Last, logits);
        if (!r) {
            failed = true;
            EXPECT_NE(r.error().message.find(copy), std::string::npos) << r.error().message;
            EXPECT_EQ((*e)->n_past(), n_past + uint32_t(step));
        }
    }
    EXPECT_TRUE(failed) << "reads past the new end of the file went unnoticed";
}

}  // namespace
}  // namespace strata
