// Steady-state decode allocates nothing: after a prompt and a few warm-up steps, 32 more decode
// steps perform zero heap allocations, on dense and MoE models, resident and with streamed FFN
// layers or experts. Buffers are
// sized when the engine, backend and store are set up; a step only reuses them. This is what
// capturing a whole decode step as a CUDA graph needs, and it keeps latency steady.
//
// The test binary's global operator new counts calls while counting is switched on, on any
// thread (allocation_counter.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocation_counter.h"
#include "engine_test_support.h"
#include "runtime/loaded_model.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

struct Case {
    std::string preset;
    std::string mode;  // "resident", "ffn-stream", "expert-stream"
};

class DecodeAllocations : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeAllocations, ThirtyTwoDecodeStepsAllocateNothing) {
    const Case c = GetParam();
    // Four layers: more than the two slots of the smallest ffn-stream plan, so streamed layers
    // are read again at every step.
    const std::string& path = test::synth_test_model(c.preset, TensorType::Q8_0, 1, 4);
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 256;
    options.expert_statistics = false;
    auto loaded = test::load_in_mode(path, c.mode, options);
    ASSERT_TRUE(loaded);
    engine::Engine& e = *loaded->engine;

    std::vector<float> logits;
    // A short prompt, so that decode reaches context lengths the prompt's scratch never saw.
    const std::vector<int32_t> prompt{1, 20};
    ASSERT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, logits));
    auto step = [&](int i) {
        const int32_t token = int32_t(100 + i * 7) % int32_t(e.n_vocab());
        return e.eval({&token, 1}, engine::LogitsWanted::Last, logits);
    };
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(step(i));

    const uint64_t disk_before = loaded->store->stats().bytes_from_disk;
    test::start_counting_allocations();
    bool ok = true;
    for (int i = 4; i < 36; ++i) ok = ok && bool(step(i));
    const uint64_t allocations = test::stop_counting_allocations();
    ASSERT_TRUE(ok);
    if (c.mode != "resident") {
        EXPECT_GT(loaded->store->stats().bytes_from_disk, disk_before)
            << "the streamed steps read nothing: the test would not see the reads allocate";
    }
    EXPECT_EQ(allocations, 0u) << "heap allocations in 32 decode steps";
}

INSTANTIATE_TEST_SUITE_P(
    Models, DecodeAllocations,
    ::testing::Values(Case{"tiny", "resident"}, Case{"tiny", "ffn-stream"},
                      Case{"tiny-moe", "resident"}, Case{"tiny-moe", "expert-stream"},
                      Case{"tiny-qwen2moe", "resident"}, Case{"tiny-qwen35", "resident"},
                      Case{"tiny-qwen35", "ffn-stream"}, Case{"tiny-qwen35moe", "expert-stream"},
                      Case{"tiny-qwen3next", "expert-stream"}, Case{"tiny-glm4moe", "resident"},
                      Case{"tiny-glm4moe", "expert-stream"}, Case{"tiny-deepseek2", "resident"},
                      Case{"tiny-deepseek2", "expert-stream"}),
    [](const auto& p) {
        std::string n = p.param.preset + "_" + p.param.mode;
        for (char& ch : n) {
            if (ch == '-') ch = '_';
        }
        return n;
    });

}  // namespace
}  // namespace strata
