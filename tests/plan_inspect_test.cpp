// `strata inspect` with the plan: the text and --json forms, the budget flags and their errors,
// and files that get no plan. The hardware profile is the fixed one of test_cache_dir(), so the
// figures do not depend on the machine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model_test_files.h"
#include "plan/plan.h"
#include "plan_test_support.h"
#include "profile/profile.h"
#include "synth_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

using nlohmann::json;

// A tiny llama with 8 layers, written once for the whole suite.
class PlanInspect : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        SynthConfig c = test::preset_config("tiny");
        c.hparams.n_layer = 8;
        auto r = write_synthetic_model(c, dir_->file("tiny8.gguf"), true);
        ASSERT_TRUE(r.ok()) << r.error().message;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    static std::string model() { return test::shell_quote(dir_->file("tiny8.gguf")); }
    static json inspect_json(const std::string& flags) {
        const auto r = test::run_strata("inspect --json " + flags + " " + model());
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(r.err.empty()) << r.err;
        return r.exit_code == 0 ? json::parse(r.out) : json();
    }
    static test::TempDir* dir_;
};
test::TempDir* PlanInspect::dir_ = nullptr;

TEST_F(PlanInspect, TextShowsThePlanAfterTheDescription) {
    const auto r = test::run_strata("inspect --ram 1G " + model());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    const size_t described = r.out.find("by layer");
    const size_t plan = r.out.find("\nplan\n");
    ASSERT_NE(described, std::string::npos) << r.out;
    ASSERT_NE(plan, std::string::npos) << r.out;
    EXPECT_LT(described, plan);
    for (const char* s : {"resident: the weights", "1.00 GiB RAM (--ram)", "speed limit",
                          "bound by ram", "plan by tier", "plan by layer", "10.00 GB/s"}) {
        EXPECT_NE(r.out.find(s, plan), std::string::npos) << "missing '" << s << "' in\n" << r.out;
    }
}

// The plan shows the CPU kernels the profile measured for the model's weight types (the model is
// F16; its F32 norms are no products' weights) and leaves the others out.
TEST_F(PlanInspect, TheProfilesKernelTableIsShownForTheModelsWeightTypes) {
    HardwareProfile p = test::plan_profile();
    CpuKernelProfile k;
    k.cpu_model = "Other CPU";
    k.table.widest = CpuPathChoice::Avx512;
    k.table.choices = {{TensorType::F16,
                        KernelPhase::Decode,
                        CpuPathChoice::Avx2,
                        27.1e9,
                        {{CpuPathChoice::Avx2, 27.1e9}, {CpuPathChoice::Avx512, 18e9}}},
                       {TensorType::F16, KernelPhase::Prompt, CpuPathChoice::Avx512, 4.1e11, {}},
                       {TensorType::F32, KernelPhase::Decode, CpuPathChoice::Avx2, 9e9, {}},
                       {TensorType::MXFP4, KernelPhase::Decode, CpuPathChoice::Avx2, 9e9, {}}};
    p.cpu_kernels = k;
    test::TempDir dir;
    const std::string file = dir.file("other.json");
    ASSERT_TRUE(save_profile(p, file));
    const json j = inspect_json("--profile " + test::shell_quote(file));
    ASSERT_TRUE(j.contains("plan")) << j.dump();
    const json& kernels = j["plan"]["cpu_kernels"];
    EXPECT_EQ(kernels["widest"], "avx512");
    ASSERT_EQ(kernels["choices"].size(), 2u) << kernels.dump();
    for (const json& c : kernels["choices"]) EXPECT_EQ(c["type"], "F16");
    const auto text =
        test::run_strata("inspect --profile " + test::shell_quote(file) + " " + model());
    ASSERT_EQ(text.exit_code, 0) << text.err;
    for (const char* s :
         {"cpu kernels (measured", "avx2 27.1 GB/s (avx512 18.0)", "avx512 410 GFLOP/s"}) {
        EXPECT_NE(text.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << text.out;
    }
    EXPECT_EQ(text.out.find("MXFP4"), std::string::npos) << text.out;

    // The fixed test profile has no measured choices.
    const auto plain = test::run_strata("inspect " + model());
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_NE(plain.out.find("cpu kernels: "), std::string::npos) << plain.out;
    EXPECT_NE(plain.out.find("(no measured table)"), std::string::npos) << plain.out;
}

TEST_F(PlanInspect, JsonHasThePlanInFull) {
    const json j = inspect_json("--ram 1G --ctx 512");
    ASSERT_TRUE(j.contains("plan"));
    const json& p = j["plan"];
    EXPECT_EQ(p["mode"], "resident");
    EXPECT_EQ(p["n_ctx"], 512);
    EXPECT_EQ(p["budgets"]["ram"].get<uint64_t>(), 1ull << 30);
    EXPECT_EQ(p["tensors"].size(), j["file"]["tensor_count"].get<size_t>());
    EXPECT_EQ(p["layers"].size(), 8u);
    EXPECT_EQ(p["memory"]["resident_weights"], j["totals"]["bytes"]);
    EXPECT_DOUBLE_EQ(p["tokens_per_second"].get<double>(),
                     10e9 / j["totals"]["bytes_per_token"].get<double>());
    EXPECT_FALSE(j.contains("plan_note"));
}

TEST_F(PlanInspect, SmallerBudgetStreamsTheFfn) {
    const json full = inspect_json("--ram 1G --ctx 512")["plan"];
    uint64_t ffn = 0, largest = 0;
    for (const json& l : full["layers"]) {
        ffn += l["ffn_bytes"].get<uint64_t>();
        largest = std::max(largest, l["ffn_bytes"].get<uint64_t>());
    }
    // Room for the resident part, the KV cache, what the process needs besides and about half
    // the FFN layers, with the slack of that budget.
    const uint64_t need =
        full["memory"]["total"].get<uint64_t>() - full["memory"]["slack"].get<uint64_t>() - ffn / 2;
    uint64_t ram = need;
    while (ram < need + kSlackBytes + ram / kSlackPerBudget) ++ram;
    const json j = inspect_json("--ctx 512 --ram " + std::to_string(ram));
    const json& p = j["plan"];
    EXPECT_EQ(p["mode"], "ffn-stream");
    EXPECT_LE(p["memory"]["total"].get<uint64_t>(), ram);
    EXPECT_GT(p["stream"]["streamed_layers"].get<int>(), 0);
    EXPECT_GT(p["stream"]["cached_layers"].get<int>(), 0);
    EXPECT_GE(p["stream"]["slot_bytes"].get<uint64_t>(), largest);
    EXPECT_EQ(p["bound"], "disk");

    const auto text =
        test::run_strata("inspect --ctx 512 --ram " + std::to_string(ram) + " " + model());
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("ffn-stream"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("disk (streamed)"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("ram (cached)"), std::string::npos) << text.out;
}

TEST_F(PlanInspect, ForcedMode) {
    const json j = inspect_json("--ram 1G --mode ffn-stream");
    EXPECT_EQ(j["plan"]["mode"], "ffn-stream");
    EXPECT_TRUE(j["plan"]["mode_forced"].get<bool>());
}

TEST_F(PlanInspect, KvTypeSizesTheKvCache) {
    const json f16 = inspect_json("--ram 1G --ctx 512")["plan"];
    const json q8 = inspect_json("--ram 1G --ctx 512 --kv-type q8_0")["plan"];
    EXPECT_EQ(f16["kv_type"], "f16");
    EXPECT_EQ(q8["kv_type"], "q8_0");
    const double f16_kv = f16["memory"]["kv_cache"].get<double>();
    const double q8_kv = q8["memory"]["kv_cache"].get<double>();
    // A Q8_0 block stores 32 values in 34 bytes, F16 in 64: 17/32 of the size.
    ASSERT_GT(f16_kv, 0);
    EXPECT_NEAR(q8_kv / f16_kv, 17.0 / 32.0, 0.01) << q8_kv << " vs " << f16_kv;
    // The rest of the plan is the same, but for the activations (attention over a Q8_0 cache
    // converts differently) and the load's staging beyond what running holds, which shrinks as
    // the KV cache and the activations grow.
    const auto others = [](const json& p) {
        const json& m = p["memory"];
        return m["total"].get<double>() - m["activations"].get<double>() -
               m["io_buffers"].get<double>();
    };
    EXPECT_EQ(others(q8) - others(f16), q8_kv - f16_kv);
}

TEST_F(PlanInspect, BadFlagsAndTooSmallBudgetsExitOne) {
    struct Case {
        const char* flags;
        const char* message;
    };
    for (const Case& c :
         {Case{"--ram 1K", "is too small for this model"}, Case{"--ram 1K", "need at least"},
          Case{"--ram 1X", "--ram: invalid size '1X'"},
          Case{"--gpu-mem 4G", "--gpu-mem 4G: this machine has no GPU"},
          Case{"--mode sideways", "--mode: unknown mode 'sideways'"},
          Case{"--kv-type q4", "--kv-type: unknown KV cache type 'q4'"},
          Case{"--mode expert-stream", "needs a mixture-of-experts model"},
          Case{"--ram 1G --slots 1", "at least 2 slots"}}) {
        for (const char* json_flag : {"", "--json "}) {
            const auto r =
                test::run_strata("inspect " + std::string(json_flag) + c.flags + " " + model());
            EXPECT_EQ(r.exit_code, 1) << c.flags << "\n" << r.out;
            EXPECT_EQ(r.err.rfind("strata: ", 0), 0u) << c.flags << ": " << r.err;
            EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << ": " << r.err;
            EXPECT_TRUE(r.out.empty()) << c.flags << ": " << r.out;
        }
    }
}

TEST_F(PlanInspect, DefaultBudgetAlwaysDescribes) {
    // The default RAM budget follows what is available now on this machine: there is a plan, or
    // a note saying why not, and the file is described either way.
    const auto r = test::run_strata("inspect --json " + model());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_TRUE(j["plan"].is_object() || j["plan_note"].is_string()) << j["plan_note"];
}

// A profile saved on another machine (here: one with a large GPU and a 128 GiB host) plans
// for that machine: the model goes to its GPU, at its bandwidth, with its RAM as the default
// budget; this machine's figures do not enter.
TEST_F(PlanInspect, AnotherMachinesProfilePlansForThatMachine) {
    HardwareProfile p = test::plan_profile();
    p.memory.total = p.memory.system_total = 128ull << 30;
    p.memory.available = 120ull << 30;
    GpuProfile g;
    g.name = "Other GPU";
    g.memory_total = 140ull << 30;
    g.memory_free = 139ull << 30;
    g.read_bandwidth = 4.4e12;
    g.device_copy_bandwidth = 4.2e12;
    p.gpus.push_back(g);
    test::TempDir dir;
    const std::string file = dir.file("other.json");
    ASSERT_TRUE(save_profile(p, file));
    const json j = inspect_json("--profile " + test::shell_quote(file));
    ASSERT_TRUE(j.contains("plan")) << j.dump();
    const json& plan = j["plan"];
    EXPECT_EQ(plan["gpu_device"], 0);
    EXPECT_EQ(plan["bound"], "gpu");
    EXPECT_DOUBLE_EQ(plan["tokens_per_second"].get<double>(),
                     4.4e12 / plan["tiers"][0]["bytes_per_token"].get<double>());
    // The budgets are that machine's: its available RAM less the headroom, its free GPU memory
    // less the margin.
    EXPECT_GT(plan["budgets"]["ram"].get<uint64_t>(), 100ull << 30);
    EXPECT_GT(plan["budgets"]["gpu_mem"].get<uint64_t>(), 100ull << 30);
    const auto text =
        test::run_strata("inspect --profile " + test::shell_quote(file) + " " + model());
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("bound by gpu"), std::string::npos) << text.out;
    // A file that is not a profile is an error naming it.
    const auto bad = test::run_strata("inspect --profile " + model() + " " + model());
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("tiny8.gguf"), std::string::npos) << bad.err;
}

TEST(PlanInspectNoPlan, UnsupportedArchitectureIsDescribedWithoutAPlan) {
    test::TempDir dir;
    test::TinySpec spec;
    spec.arch = "no-such-arch";
    const std::string path = dir.file("unsupported.gguf");
    test::tiny_model(spec).write(path);

    const auto text = test::run_strata("inspect --ram 1K " + test::shell_quote(path));
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("plan: none: strata cannot run this file"), std::string::npos)
        << text.out;

    const auto r = test::run_strata("inspect --json " + test::shell_quote(path));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_TRUE(j["plan"].is_null());
    EXPECT_NE(j["plan_note"].get<std::string>().find("cannot run"), std::string::npos);
}

}  // namespace
}  // namespace strata
