// Memory budgets (plan/budget.h): defaults from the profile with the RAM headroom and the GPU
// reserve, flags used as given (with a warning above what the machine has), and clear errors.
#include <gtest/gtest.h>

#include "plan/budget.h"
#include "plan_test_support.h"

namespace strata {
namespace {

constexpr uint64_t GiB = 1ull << 30;

GpuProfile gpu(uint64_t total, uint64_t free) {
    GpuProfile g;
    g.name = "Test GPU";
    g.memory_total = total;
    g.memory_free = free;
    return g;
}

TEST(PlanBudget, DefaultRamIsAvailableMinusHeadroomAndNoGpuIsZero) {
    auto b = resolve_budgets(test::plan_profile(), std::nullopt, std::nullopt);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->ram, 48 * GiB - kRamHeadroom);
    EXPECT_EQ(b->gpu_mem, 0u);
    EXPECT_FALSE(b->ram_from_flag);
    EXPECT_TRUE(b->warnings.empty());
}

TEST(PlanBudget, TooLittleAvailableRamIsAnErrorNamingTheFigures) {
    HardwareProfile p = test::plan_profile();
    p.memory.available = 3 * GiB;
    auto b = resolve_budgets(p, std::nullopt, std::nullopt);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("3.00 GiB"), std::string::npos) << b.error().message;
    EXPECT_NE(b.error().message.find("4.00 GiB"), std::string::npos) << b.error().message;
    EXPECT_NE(b.error().message.find("--ram"), std::string::npos) << b.error().message;
    p.memory.available = kRamHeadroom;  // exactly the headroom leaves nothing
    EXPECT_FALSE(resolve_budgets(p, std::nullopt, std::nullopt).ok());
    // A flag needs no headroom: the user decided.
    auto flagged = resolve_budgets(p, std::string("2G"), std::nullopt);
    ASSERT_TRUE(flagged.ok());
    EXPECT_EQ(flagged->ram, 2 * GiB);
}

TEST(PlanBudget, RamFlagIsUsedAsGivenWithAWarningAboveTheMachine) {
    auto b = resolve_budgets(test::plan_profile(), std::string("8G"), std::nullopt);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->ram, 8 * GiB);
    EXPECT_TRUE(b->ram_from_flag);
    EXPECT_TRUE(b->warnings.empty());
    // Above the available figure (a snapshot): no warning. Above the total: used, with a warning.
    b = resolve_budgets(test::plan_profile(), std::string("60G"), std::nullopt);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->ram, 60 * GiB);
    EXPECT_TRUE(b->warnings.empty());
    b = resolve_budgets(test::plan_profile(), std::string("100G"), std::nullopt);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->ram, 100 * GiB);
    ASSERT_EQ(b->warnings.size(), 1u);
    EXPECT_NE(b->warnings[0].find("64.00 GiB"), std::string::npos) << b->warnings[0];
}

TEST(PlanBudget, BadFlagsNameTheFlag) {
    auto b = resolve_budgets(test::plan_profile(), std::string("lots"), std::nullopt);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().message.rfind("--ram: invalid size 'lots'", 0), 0u) << b.error().message;
    b = resolve_budgets(test::plan_profile(), std::nullopt, std::string("8X"));
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().message.rfind("--gpu-mem: invalid size", 0), 0u) << b.error().message;
}

TEST(PlanBudget, GpuDefaultKeepsAReserveOfOneGibOrFivePercent) {
    // Large GPU: 5% of 140 GiB = 7 GiB is more than 1 GiB.
    EXPECT_EQ(default_gpu_budget(gpu(140 * GiB, 100 * GiB)), 93 * GiB);
    // Small GPU: 5% of 8 GiB is 0.4 GiB, so the 1 GiB floor applies.
    EXPECT_EQ(default_gpu_budget(gpu(8 * GiB, 6 * GiB)), 5 * GiB);
    // Less free than the reserve: nothing, never a wrapped-around huge number.
    EXPECT_EQ(default_gpu_budget(gpu(8 * GiB, GiB / 2)), 0u);

    HardwareProfile p = test::plan_profile();
    p.gpus.push_back(gpu(140 * GiB, 100 * GiB));
    p.gpus.push_back(gpu(8 * GiB, 8 * GiB));  // only GPU 0 is used
    auto b = resolve_budgets(p, std::nullopt, std::nullopt);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->gpu_mem, 93 * GiB);
}

TEST(PlanBudget, GpuFlag) {
    HardwareProfile p = test::plan_profile();
    // No GPU: asking for GPU memory is an error; asking for none is fine.
    p.gpu_note = "no NVIDIA driver";
    auto b = resolve_budgets(p, std::nullopt, std::string("8G"));
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("no GPU"), std::string::npos) << b.error().message;
    EXPECT_NE(b.error().message.find("no NVIDIA driver"), std::string::npos);
    b = resolve_budgets(p, std::nullopt, std::string("0"));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->gpu_mem, 0u);

    p.gpus.push_back(gpu(80 * GiB, 70 * GiB));
    b = resolve_budgets(p, std::nullopt, std::string("20G"));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->gpu_mem, 20 * GiB);
    EXPECT_TRUE(b->gpu_from_flag);
    EXPECT_TRUE(b->warnings.empty());
    b = resolve_budgets(p, std::nullopt, std::string("96G"));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->gpu_mem, 96 * GiB);
    ASSERT_EQ(b->warnings.size(), 1u);
    EXPECT_NE(b->warnings[0].find("Test GPU"), std::string::npos);
}

}  // namespace
}  // namespace strata
