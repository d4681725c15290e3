// The engine's backend boundary: layers assigned to different backends hand the hidden state
// over between them, each backend keeping the KV cache of its own layers. With two CPU backends
// the arithmetic is the same as with one, so the logits must be bit-identical for every split,
// in a prompt batch and in decode steps, dense and MoE; a wrong hand-over (rows, the cache of the
// wrong backend, a stale hidden state) changes them.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"

namespace strata {
namespace {

std::vector<float> run(const std::string& path, const std::vector<int>& layer_backend) {
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 64;
    options.engine.max_batch = 8;  // the 12-token prompt crosses a batch boundary too
    if (!layer_backend.empty()) {
        options.engine.execution =
            ExecutionTable::by_layer({ComputeUnit{}, ComputeUnit{}}, layer_backend);
    }
    const auto loaded = test::load_model(path, options);
    if (!loaded) return {};
    const std::vector<int32_t> prompt{1, 17, 33, 49, 65, 81, 97, 113, 129, 145, 161, 177};
    return test::prompt_then_decode(*loaded->engine, prompt, engine::LogitsWanted::All);
}

class EngineBackendSplit : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineBackendSplit, TwoBackendsGiveTheLogitsOfOne) {
    const std::string& path = test::synth_test_model(GetParam(), TensorType::Q8_0);
    const std::vector<float> one = run(path, {});
    ASSERT_FALSE(one.empty());
    // The tiny presets have two layers: each on its own backend, and the reverse assignment
    // (the embedding and head then live on different backends).
    for (const std::vector<int>& split : {std::vector<int>{0, 1}, std::vector<int>{1, 0}}) {
        const std::vector<float> two = run(path, split);
        ASSERT_EQ(two.size(), one.size());
        EXPECT_EQ(std::memcmp(two.data(), one.data(), one.size() * sizeof(float)), 0)
            << "split " << split[0] << "," << split[1] << " changed the logits";
    }
}

TEST(EngineBackendSplit, RefusesAnAssignmentOfTheWrongLength) {
    ModelLoadOptions options;
    const int assign[] = {0, 1, 0};
    options.engine.execution = ExecutionTable::by_layer({ComputeUnit{}, ComputeUnit{}}, assign);
    auto loaded = LoadedModel::load(test::synth_test_model("tiny", TensorType::Q8_0), options);
    ASSERT_FALSE(loaded);
    EXPECT_NE(loaded.error().message.find("execution table names 3 layers"), std::string::npos)
        << loaded.error().message;
}

INSTANTIATE_TEST_SUITE_P(Presets, EngineBackendSplit,
                         ::testing::Values("tiny", "tiny-moe", "tiny-qwen3", "tiny-qwen2moe"),
                         [](const auto& p) {
                             std::string n = p.param;
                             for (char& ch : n) {
                                 if (ch == '-') ch = '_';
                             }
                             return n;
                         });

}  // namespace
}  // namespace strata
