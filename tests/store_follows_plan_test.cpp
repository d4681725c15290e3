// The store is assembled from the plan: what the plan counts as resident is exactly what the
// store holds, and what the plan streams the store streams, in every mode, also where a mode is
// forced onto a model it does not suit (ffn-stream on a mixture-of-experts model streams the
// routed experts with their layer, as the plan counted them) — with resident mode's logits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_test_support.h"
#include "model/streamable.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

struct Case {
    const char* preset;
    const char* mode;
};

class StoreFollowsPlan : public ::testing::TestWithParam<Case> {};

TEST_P(StoreFollowsPlan, HoldsWhatThePlanCountsAndGivesResidentLogits) {
    // Four layers: more than the two slots of the smallest ffn-stream plan, so layers stream.
    const Case c = GetParam();
    const std::string& path = test::synth_test_model(c.preset, TensorType::Q8_0, 1, 4);
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 64;
    options.expert_statistics = false;
    auto resident = test::load_in_mode(path, "resident", options);
    auto streamed = test::load_in_mode(path, c.mode, options);
    ASSERT_TRUE(resident && streamed);
    ASSERT_TRUE(streamed->plan);
    const Plan& plan = *streamed->plan;
    const StoreReport report = streamed->store->report();

    // Bytes held for the whole run: the plan's resident and cached weights, no more, no less.
    EXPECT_EQ(report.resident_bytes, plan.memory.resident_weights + plan.memory.cached_weights);
    uint64_t streamed_layers = 0, streamed_experts = 0;
    for (const TensorPlacement& p : plan.tensors) {
        streamed_layers += p.use == TensorUse::Streamed && p.unit == StreamUnit::Layer;
        streamed_experts += p.use == TensorUse::Streamed && p.unit == StreamUnit::Expert;
    }
    EXPECT_GT(streamed_layers + streamed_experts, 0u) << "the smallest plan streams nothing";
    EXPECT_EQ(report.slots > 0, streamed_layers > 0);
    EXPECT_EQ(report.cache_entries > 0, streamed_experts > 0);
    if (report.slots > 0) {
        EXPECT_EQ(uint32_t(report.slots), plan.stream.slots);
    }

    const auto want = test::greedy_logits(resident->info, *resident->store, 6);
    const auto got = test::greedy_logits(streamed->info, *streamed->store, 6);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    EXPECT_GT(streamed->store->stats().bytes_from_disk, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Models, StoreFollowsPlan,
    ::testing::Values(Case{"tiny", "ffn-stream"}, Case{"tiny-qwen3", "ffn-stream"},
                      Case{"tiny-moe", "expert-stream"}, Case{"tiny-moe", "ffn-stream"},
                      Case{"tiny-qwen2moe", "ffn-stream"}, Case{"tiny-qwen2moe", "expert-stream"}),
    [](const auto& param_info) {
        std::string n = std::string(param_info.param.preset) + "_" + param_info.param.mode;
        for (char& ch : n) {
            if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
        }
        return n;
    });

}  // namespace
}  // namespace strata
