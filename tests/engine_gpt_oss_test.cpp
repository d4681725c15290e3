// The tiny gpt-oss model through the whole engine: the same logits resident and streaming its
// experts from the file (their biases stay with the layer and join whichever expert is read),
// and the same whether a prompt goes in one batch, whose windowed layers then keep the whole
// context, or in batches of 8, whose windowed layers keep a ring of window + 8 positions that the
// prompt goes round several times. Its agreement with llama.cpp itself is
// tests/external/compare_with_llama_cpp.mjs's.
//
// Tolerance: the two residencies run the same arithmetic row by row (measured: identical bits);
// the batchings differ in which kernels multiply (matmul for batches, matvec for one token) and
// in the summation order over the ring, a few ulps per value: kOrderTol of the largest logit, as
// engine_invariants_test.cpp argues. A wrong slot of the ring or a missing window moves logits by
// tens of percent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"

namespace strata {
namespace {

constexpr double kOrderTol = 1e-4;

std::vector<int32_t> prompt_ids(int n, uint32_t vocab) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(int32_t((i * 37 + 11) % vocab));
    return v;
}

double max_abs(const std::vector<float>& x) {
    double m = 0;
    for (float v : x) m = std::max(m, double(std::fabs(v)));
    return m;
}

ModelLoadOptions options(uint32_t max_batch) {
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 96;
    o.engine.max_batch = max_batch;
    return o;
}

TEST(EngineGptOss, ExpertStreamingGivesTheResidentLogits) {
    const std::string& path = test::synth_test_model("tiny-gpt-oss", TensorType::F32);
    auto resident = test::load_in_mode(path, "resident", options(64));
    auto streamed = test::load_in_mode(path, "expert-stream", options(64));
    ASSERT_TRUE(resident && streamed);
    const std::vector<int32_t> prompt = prompt_ids(40, resident->engine->n_vocab());
    const std::vector<float> want =
        test::prompt_then_decode(*resident->engine, prompt, engine::LogitsWanted::All);
    const std::vector<float> got =
        test::prompt_then_decode(*streamed->engine, prompt, engine::LogitsWanted::All);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got, want);
    EXPECT_GT(streamed->store->stats().bytes_from_disk, 0u);
}

TEST(EngineGptOss, PromptBatchesOverTheRingGiveTheOneBatchLogits) {
    const std::string& path = test::synth_test_model("tiny-gpt-oss", TensorType::F32);
    auto whole = test::load_in_mode(path, "resident", options(96));
    auto pieces = test::load_in_mode(path, "resident", options(8));
    ASSERT_TRUE(whole && pieces);
    const std::vector<int32_t> prompt = prompt_ids(60, whole->engine->n_vocab());
    const std::vector<float> want =
        test::prompt_then_decode(*whole->engine, prompt, engine::LogitsWanted::All, 10);
    const std::vector<float> got =
        test::prompt_then_decode(*pieces->engine, prompt, engine::LogitsWanted::All, 10);
    ASSERT_EQ(got.size(), want.size());
    const double scale = max_abs(want);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
    }
    EXPECT_LE(worst, kOrderTol * scale);
}

TEST(EngineGptOss, GoingBackPastTheRingStartsOver) {
    const std::string& path = test::synth_test_model("tiny-gpt-oss", TensorType::F32);
    auto loaded = test::load_in_mode(path, "resident", options(8));
    ASSERT_TRUE(loaded);
    engine::Engine& e = *loaded->engine;
    const std::vector<int32_t> prompt = prompt_ids(60, e.n_vocab());
    std::vector<float> logits;
    ASSERT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, logits));
    // The ring holds window 16 + batch 8 = 24 positions, 36..59 now: 55 still has its window
    // (40..54), 50 has lost position 35, 20 all of it.
    EXPECT_EQ(e.truncate(55), 55u);
    ASSERT_TRUE(e.eval(std::span(prompt).subspan(55), engine::LogitsWanted::Last, logits));
    EXPECT_EQ(e.truncate(50), 0u);
    ASSERT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, logits));
    EXPECT_EQ(e.truncate(20), 0u);
    EXPECT_EQ(e.n_past(), 0u);
}

}  // namespace
}  // namespace strata
