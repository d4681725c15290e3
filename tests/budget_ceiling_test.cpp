// The RAM budget is a hard ceiling (design invariant 2 with no stated overhead): `strata run`
// streams a model inside a memory cgroup capped at exactly its --ram, in ffn-stream (dense) and
// expert-stream (MoE) mode, and
//  - is not killed (exit status 0, no OOM kill in the group),
//  - generates the same greedy tokens as a resident run without a cap,
//  - peaks (VmHWM) at or below the budget, and the group's peak charge (anonymous memory, page
//    cache and kernel memory the process caused) stays at or below the cap,
//  - with a plan that counts no more than the budget.
// The budget is the smallest the mode accepts for the model (strata names it when --ram is too
// small) plus a quarter of the file, so some weights stream and some stay cached. The cgroup is
// v1 or v2, whichever the machine has (util/memory_cap.h); without the rights to make one (no
// root, a read-only cgroup filesystem in a container) the test is skipped and says why.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"
#include "util/memory_cap.h"

namespace strata {
namespace {

using nlohmann::json;
using test::shell_quote;

struct Case {
    std::string name;
    std::string mode;  // the streaming mode the capped run is forced into
    std::string preset;
    uint32_t n_layer, n_embd, n_ff;
};

// Exit status of the shell when the child cannot join the group.
constexpr int kCannotJoin = 125;

std::string write_model(const test::TempDir& dir, const Case& c) {
    SynthConfig config;
    config.hparams = *synth_preset(c.preset);
    config.hparams.n_layer = c.n_layer;
    config.hparams.n_embd = c.n_embd;
    config.hparams.n_head = c.n_embd / 64;
    config.hparams.n_head_kv = c.n_embd / 256;
    config.hparams.n_ff = c.n_ff;
    config.weights = TensorType::Q8_0;
    config.threads = 2;
    const std::string path = dir.file(c.name + ".gguf");
    auto r = write_synthetic_model(config, path, /*overwrite=*/true);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return path;
}

// The arguments of every run: the same prompt, greedy, a short context that the prompt and the
// answer nearly fill.
std::string run_args(const std::string& model, const std::string& extra) {
    return "run " + shell_quote(model) +
           " --raw --greedy -n 12 --ctx 96 -t 2 --json "
           "--prompt 'The river town kept its records in a stone house by the bridge' " +
           extra;
}

// `strata ARGS` with the test's hardware profile, inside the cgroup when `procs` is given: the
// shell moves itself into the group, then becomes strata.
test::CommandResult strata_in(const std::string& procs, const std::string& args) {
    std::string line;
    if (!procs.empty()) {
        line = "echo 0 > " + shell_quote(procs) + " || exit " + std::to_string(kCannotJoin) + "; ";
    }
    line += "export STRATA_CACHE_DIR=" + shell_quote(test::test_cache_dir()) + "; exec " +
            shell_quote(test::strata_binary()) + " " + args;
    return test::run_command(line);
}

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name << " (" << c.mode << ")";
}

class BudgetCeiling : public ::testing::TestWithParam<Case> {};

TEST_P(BudgetCeiling, RunStaysWithinACgroupCappedAtTheBudget) {
    const Case c = GetParam();
    test::TempDir dir;
    const std::string model = write_model(dir, c);
    const uint64_t file_bytes = std::filesystem::file_size(model);

    const auto resident = strata_in("", run_args(model, "--mode resident"));
    ASSERT_EQ(resident.exit_code, 0) << resident.err;
    const json expected = json::parse(resident.out);

    // The smallest budget of the mode, as strata names it, and a quarter of the file more.
    const uint64_t smallest = test::smallest_ram(run_args(model, "--mode " + c.mode));
    ASSERT_GT(smallest, 0u);
    const uint64_t budget = (smallest + file_bytes / 4) >> 10 << 10;
    ASSERT_LT(budget, file_bytes + (64u << 20));

    auto cap = MemoryCap::create(budget);
    if (!cap) GTEST_SKIP() << "no memory cgroup to run in: " << cap.error().message;
    const auto capped = strata_in(
        (*cap)->procs_file(),
        run_args(model, "--mode " + c.mode + " --ram " + std::to_string(budget >> 10) + "K"));
    if (capped.exit_code == kCannotJoin) {
        GTEST_SKIP() << "cannot move a process into " << (*cap)->procs_file() << ": " << capped.err;
    }
    const uint64_t group_peak = (*cap)->peak_usage();
    EXPECT_EQ((*cap)->oom_kills(), 0u) << "killed for memory in a group capped at the budget";
    ASSERT_EQ(capped.exit_code, 0) << capped.err;

    const json j = json::parse(capped.out);
    EXPECT_EQ(j["mode"], c.mode);
    EXPECT_EQ(j["generated_ids"], expected["generated_ids"]) << "streaming changed the tokens";
    EXPECT_EQ(j["memory_budget"].get<uint64_t>(), budget);
    EXPECT_LE(j["memory_planned"].get<uint64_t>(), budget);
    EXPECT_TRUE(j["memory_baseline_measured"].get<bool>());
    EXPECT_LE(j["peak_rss_bytes"].get<uint64_t>(), budget)
        << "peak RSS above the budget (plan " << j["memory_planned"] << ")";
    if (group_peak > 0) {
        EXPECT_LE(group_peak, budget) << "the group's peak charge";
    }
    std::printf("  %s: budget %llu KiB, planned %llu KiB, peak RSS %llu KiB, group peak %llu KiB\n",
                c.mode.c_str(), static_cast<unsigned long long>(budget >> 10),
                static_cast<unsigned long long>(j["memory_planned"].get<uint64_t>() >> 10),
                static_cast<unsigned long long>(j["peak_rss_bytes"].get<uint64_t>() >> 10),
                static_cast<unsigned long long>(group_peak >> 10));
}

INSTANTIATE_TEST_SUITE_P(Modes, BudgetCeiling,
                         ::testing::Values(Case{"dense", "ffn-stream", "tiny", 6, 512, 2048},
                                           Case{"moe", "expert-stream", "tiny-moe", 4, 512, 1024}),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace strata
