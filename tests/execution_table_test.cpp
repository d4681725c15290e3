// The execution table a plan implies (plan/execution_table.h): which unit computes each layer's
// blocks, where its routed experts run, which prompt batches stage their weights onto the GPU,
// and which layers the GPU level of the expert cache serves. The engine runs it as it is, so it
// must say exactly what the plan counted.
#include <gtest/gtest.h>

#include <cstdint>

#include "plan/execution_table.h"
#include "plan/plan.h"
#include "plan_test_support.h"

namespace strata {
namespace {

constexpr uint64_t GiB = 1ull << 30;

HardwareProfile with_gpu() {
    HardwareProfile p = test::plan_profile_with_gpu(80 * GiB);
    p.gpus.front().host_to_device_pinned_bandwidth = 50e9;
    return p;
}

Budgets budgets(uint64_t ram, uint64_t gpu) {
    return test::plan_budgets(ram, gpu);
}

TEST(ExecutionTable, ACpuPlanRunsEverythingOnTheCpu) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    auto plan = make_plan(m, test::plan_profile(), budgets(8 * GiB, 0));
    ASSERT_TRUE(plan) << plan.error().message;
    const ExecutionTable t = execution_table(*plan, m);
    ASSERT_TRUE(t.check(m.hparams->n_layer));
    ASSERT_EQ(t.units.size(), 1u);
    EXPECT_EQ(t.units[0].kind, ComputeUnit::Kind::Cpu);
    for (const LayerExecution& l : t.layers) EXPECT_EQ(l, LayerExecution{});
    EXPECT_EQ(t.expert_level_unit, -1);
}

TEST(ExecutionTable, AGpuResidentPlanRunsEverythingOnItsGpu) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(), budgets(8 * GiB, 60 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_resident());
    const ExecutionTable t = execution_table(*plan, m);
    ASSERT_EQ(t.units.size(), 1u);
    EXPECT_EQ(t.units[0].kind, ComputeUnit::Kind::Gpu);
    EXPECT_EQ(t.units[0].staging_bytes, 0u);
    EXPECT_EQ(t.embedding_unit, 0);
    EXPECT_EQ(t.head_unit, 0);
    EXPECT_FALSE(t.stages(0, 512));
}

// A dense model split by layers: the first layers and the embedding on the CPU, the last layers
// and the head on the GPU; prompt batches of 16 tokens or more stage the CPU's matrices.
TEST(ExecutionTable, ADenseLayerSplitStagesTheCpusMatricesForPrompts) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(), budgets(16 * GiB, m.totals.bytes / 2));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    ASSERT_GT(plan->gpu_memory.prompt_staging, 0u);
    const ExecutionTable t = execution_table(*plan, m);
    ASSERT_TRUE(t.check(m.hparams->n_layer));
    ASSERT_EQ(t.units.size(), 2u);
    EXPECT_EQ(t.units[0].kind, ComputeUnit::Kind::Cpu);
    EXPECT_EQ(t.units[1].kind, ComputeUnit::Kind::Gpu);
    EXPECT_EQ(t.units[1].staging_bytes, plan->gpu_memory.prompt_staging);
    EXPECT_EQ(t.embedding_unit, 0);
    EXPECT_EQ(t.head_unit, 1);
    for (size_t l = 0; l < t.layers.size(); ++l) {
        const LayerExecution& e = t.layers[l];
        const bool gpu = plan->layers[l].on_gpu;
        EXPECT_EQ(e.unit, gpu ? 1 : 0) << "layer " << l;
        EXPECT_EQ(e.experts_unit, e.unit);
        EXPECT_EQ(e.prompt, gpu ? PromptStaging::None : PromptStaging::Matrices);
        EXPECT_FALSE(e.expert_level);
        if (!gpu) {
            EXPECT_EQ(e.staged_on, 1);
            EXPECT_FALSE(t.stages(int(l), ModelHparams::kShippedLayerBatch - 1));
            EXPECT_TRUE(t.stages(int(l), ModelHparams::kShippedLayerBatch));
        }
    }
}

// A mixture of experts split by experts: every layer on the GPU, the routed experts of the first
// layers on the CPU; prompt batches that use each expert twice on average stage them onto the
// GPU, and the GPU level of the expert cache serves the CPU's layers.
TEST(ExecutionTable, AnExpertSplitComputesTheCpusExpertsThereAndStagesThemForPrompts) {
    const ModelInfo m = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    uint64_t experts = 0;
    for (const ModelTensor& x : m.tensors) experts += x.is_routed_expert() ? m.info(x).n_bytes : 0;
    auto plan =
        make_plan(m, with_gpu(), budgets(48 * GiB, m.totals.bytes - experts * 3 / 4 + 2 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    ASSERT_GT(plan->cpu_expert_layers, 0u);
    const ExecutionTable t = execution_table(*plan, m);
    ASSERT_TRUE(t.check(hp.n_layer));
    EXPECT_EQ(t.head_unit, 1);
    EXPECT_EQ(t.units[1].expert_entries, plan->gpu_memory.expert_entries);
    EXPECT_EQ(t.expert_level_unit, plan->gpu_memory.expert_entries > 0 ? 1 : -1);
    // The smallest batch with n * k >= 2 * n_expert.
    const int64_t min_tokens = (2 * int64_t(hp.n_expert) + hp.n_expert_used - 1) / hp.n_expert_used;
    for (size_t l = 0; l < t.layers.size(); ++l) {
        const LayerExecution& e = t.layers[l];
        const bool cpu = plan->layers[l].experts_on_cpu;
        EXPECT_EQ(e.unit, 1) << "layer " << l;
        EXPECT_EQ(e.experts_unit, cpu ? 0 : 1);
        EXPECT_EQ(e.expert_level, cpu && plan->gpu_memory.expert_entries > 0);
        if (cpu && plan->gpu_memory.prompt_staging > 0) {
            EXPECT_EQ(e.prompt, PromptStaging::Experts);
            EXPECT_EQ(e.staged_on, 1);
            EXPECT_FALSE(t.stages(int(l), min_tokens - 1));
            EXPECT_TRUE(t.stages(int(l), min_tokens));
        } else {
            EXPECT_EQ(e.prompt, PromptStaging::None);
        }
    }
}

TEST(ExecutionTable, CheckNamesWhatDoesNotFit) {
    const int assign[] = {0, 1, 0};
    ExecutionTable t = ExecutionTable::by_layer({ComputeUnit{}, ComputeUnit{}}, assign);
    EXPECT_TRUE(t.check(3));
    EXPECT_EQ(t.embedding_unit, 0);
    EXPECT_EQ(t.layers[1].unit, 1);
    auto wrong = t.check(2);
    ASSERT_FALSE(wrong);
    EXPECT_NE(wrong.error().message.find("names 3 layers, the model has 2"), std::string::npos);
    t.layers[2].experts_unit = 5;
    auto unit = t.check(3);
    ASSERT_FALSE(unit);
    EXPECT_NE(unit.error().message.find("compute unit 5 of 2"), std::string::npos);
    EXPECT_FALSE(ExecutionTable{}.check(0));
}

}  // namespace
}  // namespace strata
