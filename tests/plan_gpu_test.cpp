// The plan's GPU tier (plan/plan.h): a model whose weights, KV cache and GPU buffers fit the GPU
// budget is resident on the GPU, every tensor placed there and the speed limit taken from the
// GPU's measured read bandwidth, RAM holding only the process; one that does not fit, or a plan
// asked for the CPU, is planned as before, with a note saying why.
#include <gtest/gtest.h>

#include "model/activation_memory.h"
#include "plan/budget.h"
#include "plan/plan.h"
#include "plan_test_support.h"
#include "profile/profile.h"

namespace strata {
namespace {

constexpr uint64_t GiB = 1ull << 30;

HardwareProfile with_gpu(uint64_t free_bytes) {
    HardwareProfile p = test::plan_profile();
    GpuProfile g;
    g.name = "Test GPU";
    g.memory_total = 80 * GiB;
    g.memory_free = free_bytes;
    g.read_bandwidth = 3e12;
    g.device_copy_bandwidth = 5e12;
    p.gpus.push_back(g);
    return p;
}

Budgets budgets(uint64_t ram, uint64_t gpu) {
    Budgets b;
    b.ram = ram;
    b.gpu_mem = gpu;
    return b;
}

TEST(PlanGpu, ModelThatFitsTheGpuIsResidentThere) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 60 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->gpu_resident());
    EXPECT_EQ(plan->mode, PlanMode::Resident);
    for (const TensorPlacement& t : plan->tensors) EXPECT_EQ(t.tier, Tier::Gpu);
    const GpuMemoryPlan& g = plan->gpu_memory;
    EXPECT_EQ(g.weights, m.totals.bytes);
    EXPECT_EQ(g.kv_cache, kv_cache_bytes(*m.hparams, plan->n_ctx, plan->kv_type));
    EXPECT_EQ(g.activations, gpu_activation_bytes(*m.hparams, {plan->batch, plan->n_ctx}));
    EXPECT_EQ(g.total, g.weights + g.kv_cache + g.activations);
    EXPECT_LE(g.total, g.budget);
    // RAM holds no weights and no KV cache.
    EXPECT_EQ(plan->memory.resident_weights, 0u);
    EXPECT_EQ(plan->memory.kv_cache, 0u);
    EXPECT_LE(plan->memory.total, plan->memory.budget);
    // The limit: every weight read once per token at the GPU's read bandwidth.
    EXPECT_EQ(plan->bound, Tier::Gpu);
    const TierTraffic& gpu = plan->traffic(Tier::Gpu);
    EXPECT_DOUBLE_EQ(gpu.bandwidth, 3e12);
    EXPECT_NEAR(plan->tokens_per_second, 3e12 / gpu.bytes_per_token, 1e-6);
}

TEST(PlanGpu, ModelLargerThanTheGpuBudgetIsPlannedForTheCpu) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, m.totals.bytes / 2));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_FALSE(plan->gpu_resident());
    for (const TensorPlacement& t : plan->tensors) EXPECT_NE(t.tier, Tier::Gpu);
    bool noted = false;
    for (const std::string& n : plan->notes) noted = noted || n.find("GPU budget") != n.npos;
    EXPECT_TRUE(noted) << "no note says why the GPU was not used";
}

TEST(PlanGpu, CpuOnlyPlansIgnoreTheGpu) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    PlanOptions o;
    o.gpu = false;
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 60 * GiB), o);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_FALSE(plan->gpu_resident());
    auto no_gpu = make_plan(m, test::plan_profile(), budgets(8 * GiB, 0));
    ASSERT_TRUE(no_gpu) << no_gpu.error().message;
    EXPECT_FALSE(no_gpu->gpu_resident());
}

// The profile measured on the H200 machine (docs/profiles/h200.json, `strata profile --json`
// there) plans an 8B Q4_K_M onto its GPU with its default budgets, at its measured HBM read
// bandwidth: what `strata inspect --profile docs/profiles/h200.json` shows anywhere.
TEST(PlanGpu, TheH200ProfilePlansAnEightBOnItsGpu) {
    auto profile = load_profile(std::string(STRATA_SOURCE_DIR) + "/docs/profiles/h200.json");
    ASSERT_TRUE(profile) << profile.error().message;
    ASSERT_EQ(profile->gpus.size(), 1u);
    EXPECT_GT(profile->gpus[0].read_bandwidth, 3e12);
    auto b = resolve_budgets(*profile, std::nullopt, std::nullopt);
    ASSERT_TRUE(b) << b.error().message;
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    auto plan = make_plan(m, *profile, *b);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->gpu_resident()) << plan->gpu_note;
    EXPECT_EQ(plan->bound, Tier::Gpu);
    EXPECT_NEAR(plan->tokens_per_second,
                profile->gpus[0].read_bandwidth / plan->traffic(Tier::Gpu).bytes_per_token, 1e-6);
}

}  // namespace
}  // namespace strata
