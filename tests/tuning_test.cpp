// The performance settings (backend/tuning.h): the defaults are what strata did before they were
// settings, every key takes each of its values and prints it back the same, a bad key or value is
// an error naming what is taken, and the engine hands the settings to the CPU backend it creates
// (the kernel path set from them, or the kernel table it is given installed; attention split
// either way giving the same bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/cpu_path.h"
#include "backend/cpu/kernel_table.h"
#include "backend/tuning.h"
#include "engine_test_support.h"
#include "runtime/loaded_model.h"

namespace strata {
namespace {

// The values an entry lists ("off|experts|all"), without an open end ("...").
std::vector<std::string> listed_values(std::string_view values) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at <= values.size()) {
        const size_t bar = std::min(values.find('|', at), values.size());
        const std::string v(values.substr(at, bar - at));
        if (v != "...") out.push_back(v);
        at = bar + 1;
    }
    return out;
}

TEST(Tuning, DefaultsAreTheBehaviourWithoutSettings) {
    const Tuning t;
    EXPECT_TRUE(t.cuda_graphs);
    EXPECT_TRUE(t.prompt_cublas);
    EXPECT_EQ(t.prompt_mmq, PromptMmq::Experts);
    EXPECT_EQ(t.pdl, Pdl::AtEnd);
    EXPECT_TRUE(t.qkv_parts);
    EXPECT_EQ(t.q8_rows_per_warp, 2u);
    EXPECT_EQ(t.cpu_path, CpuPathChoice::Best);
    EXPECT_TRUE(t.attention_by_positions);
    EXPECT_EQ(t.gpu_expert_prefetch, 4u);
    EXPECT_EQ(tuning_line(t),
              "cuda_graphs=true prompt_cublas=true prompt_mmq=experts pdl=at_end qkv_parts=true "
              "q8_rows_per_warp=2 cpu_path=best attention_by_positions=true "
              "gpu_expert_prefetch=4");
}

TEST(Tuning, EveryKeyTakesEachOfItsValuesAndPrintsItBack) {
    const std::vector<TuningEntry> defaults = tuning_entries(Tuning{});
    ASSERT_EQ(defaults.size(), 9u);
    for (size_t i = 0; i < defaults.size(); ++i) {
        const TuningEntry& d = defaults[i];
        SCOPED_TRACE(std::string(d.key));
        EXPECT_FALSE(d.about.empty());
        const std::vector<std::string> values = listed_values(d.values);
        ASSERT_GE(values.size(), 2u) << d.values;
        if (!d.values.ends_with("...")) {
            EXPECT_NE(std::find(values.begin(), values.end(), d.value), values.end())
                << "the default " << d.value << " is not among " << d.values;
        }
        for (const std::string& v : values) {
            Tuning t;
            ASSERT_TRUE(set_tuning(t, d.key, v)) << v;
            EXPECT_EQ(tuning_entries(t)[i].value, v);
            EXPECT_EQ(t == Tuning{}, v == d.value) << v;
            // Only this key changed.
            for (size_t j = 0; j < defaults.size(); ++j) {
                if (j != i) {
                    EXPECT_EQ(tuning_entries(t)[j].value, defaults[j].value);
                }
            }
            // The printed line sets the same value again.
            Tuning again;
            for (const TuningEntry& e : tuning_entries(t)) {
                ASSERT_TRUE(set_tuning(again, std::string(e.key) + "=" + e.value));
            }
            EXPECT_TRUE(again == t) << v;
        }
    }
    Tuning t;
    ASSERT_TRUE(set_tuning(t, "gpu_expert_prefetch", "16"));
    EXPECT_EQ(t.gpu_expert_prefetch, 16u);
}

TEST(Tuning, SwitchesTakeTheirOldSpellings) {
    Tuning t;
    ASSERT_TRUE(set_tuning(t, "cuda_graphs", "0"));
    EXPECT_FALSE(t.cuda_graphs);
    ASSERT_TRUE(set_tuning(t, "cuda_graphs", "1"));
    EXPECT_TRUE(t.cuda_graphs);
    ASSERT_TRUE(set_tuning(t, "qkv_parts", "off"));
    EXPECT_FALSE(t.qkv_parts);
    ASSERT_TRUE(set_tuning(t, "qkv_parts", "on"));
    EXPECT_TRUE(t.qkv_parts);
}

// The error of set_tuning(key, value), which must fail and leave the settings as they were.
std::string failure(std::string_view key, std::string_view value) {
    Tuning t;
    const Result<void> r = set_tuning(t, key, value);
    EXPECT_FALSE(r) << key << "=" << value;
    EXPECT_TRUE(t == Tuning{}) << key << "=" << value;
    return r ? "" : r.error().message;
}

TEST(Tuning, BadKeysAndValuesSayWhatIsTaken) {
    const std::string unknown = failure("nonsense", "1");
    EXPECT_NE(unknown.find("nonsense"), std::string::npos) << unknown;
    for (const TuningEntry& e : tuning_entries(Tuning{})) {
        EXPECT_NE(unknown.find(e.key), std::string::npos) << unknown;
    }
    const std::string boolean = failure("cuda_graphs", "maybe");
    EXPECT_NE(boolean.find("cuda_graphs=maybe"), std::string::npos) << boolean;
    EXPECT_NE(boolean.find("true or false"), std::string::npos) << boolean;
    const std::string choice = failure("pdl", "sometimes");
    EXPECT_NE(choice.find("off, at_end, at_start"), std::string::npos) << choice;
    EXPECT_NE(failure("prompt_mmq", "ALL").find("off, experts, all"), std::string::npos);
    EXPECT_NE(failure("cpu_path", "neon").find("best, scalar, avx2, avx512"), std::string::npos);
    EXPECT_NE(failure("q8_rows_per_warp", "3").find("1 or 2"), std::string::npos);
    for (const char* bad : {"-1", "4x", "", " 4", "99999999999"}) {
        EXPECT_NE(failure("gpu_expert_prefetch", bad).find("a whole number"), std::string::npos)
            << bad;
    }
    EXPECT_FALSE(failure("cuda_graphs", "").empty());
    Tuning t;
    const Result<void> no_value = set_tuning(t, "cuda_graphs");
    ASSERT_FALSE(no_value);
    EXPECT_NE(no_value.error().message.find("key=value"), std::string::npos);
    ASSERT_TRUE(set_tuning(t, "cuda_graphs=false"));
    EXPECT_FALSE(t.cuda_graphs);
    EXPECT_FALSE(set_tuning(t, "=false"));
}

// The logits of a prompt and a few greedy decode steps on the tiny model, with these settings
// and more threads than it has KV heads (so that decode attention can split over positions).
std::vector<float> tiny_logits(const Tuning& tuning, const CpuKernelTable& kernels = {}) {
    ModelLoadOptions options;
    options.engine.threads = 4;
    options.engine.n_ctx = 64;
    options.engine.tuning = tuning;
    options.engine.cpu_kernels = kernels;
    const auto loaded = test::load_model(test::synth_test_model("tiny", TensorType::Q8_0), options);
    if (!loaded) return {};
    const std::vector<int32_t> prompt{1, 17, 33, 49, 65, 81};
    return test::prompt_then_decode(*loaded->engine, prompt, engine::LogitsWanted::Last);
}

TEST(EngineTuning, AttentionOverQueryHeadsGivesTheBitsOfAttentionOverPositions) {
    const std::vector<float> by_positions = tiny_logits(Tuning{});
    Tuning by_heads;
    by_heads.attention_by_positions = false;
    const std::vector<float> other = tiny_logits(by_heads);
    ASSERT_FALSE(by_positions.empty());
    ASSERT_EQ(other.size(), by_positions.size());
    EXPECT_EQ(std::memcmp(other.data(), by_positions.data(), other.size() * sizeof(float)), 0);
}

TEST(EngineTuning, TheCpuBackendTakesTheKernelPathOfItsSettings) {
    const cpu::CpuPath before = cpu::active_cpu_path();
    Tuning scalar;
    scalar.cpu_path = CpuPathChoice::Scalar;
    EXPECT_FALSE(tiny_logits(scalar).empty());
    EXPECT_EQ(cpu::active_cpu_path(), cpu::CpuPath::scalar);
    // The default leaves the process's path as it is.
    EXPECT_FALSE(tiny_logits(Tuning{}).empty());
    EXPECT_EQ(cpu::active_cpu_path(), cpu::CpuPath::scalar);
    ASSERT_TRUE(cpu::set_cpu_path(before));
}

// With the default setting the CPU backend installs the kernel table it is given: a table that
// names one path for every type and phase gives the logits of that path forced, bit for bit;
// a forced path still takes everything.
TEST(EngineTuning, TheCpuBackendDispatchesByTheKernelTableItIsGiven) {
    const cpu::CpuPath before = cpu::active_cpu_path();
    for (const cpu::CpuPath path : cpu::kAllCpuPaths) {
        if (!cpu::cpu_path_runs_on(path, cpu::detect_cpu_features())) continue;
        SCOPED_TRACE(cpu::cpu_path_name(path));
        CpuKernelTable table;
        for (const TensorType t : kAllTensorTypes) {
            for (const KernelPhase p : kAllKernelPhases) {
                table.choices.push_back({t, p, cpu::cpu_path_choice(path), 1e9, {}});
            }
        }
        const std::vector<float> via_table = tiny_logits(Tuning{}, table);
        EXPECT_FALSE(cpu::forced_cpu_path());
        EXPECT_EQ(cpu::kernel_path(TensorType::Q8_0, 1), path);
        Tuning forced;
        forced.cpu_path = cpu::cpu_path_choice(path);
        const std::vector<float> by_setting = tiny_logits(forced, table);
        EXPECT_EQ(cpu::forced_cpu_path(), path);
        ASSERT_FALSE(via_table.empty());
        ASSERT_EQ(via_table.size(), by_setting.size());
        EXPECT_EQ(std::memcmp(via_table.data(), by_setting.data(), via_table.size() * 4), 0);
    }
    cpu::install_kernel_table({});
    ASSERT_TRUE(cpu::set_cpu_path(before));
}

}  // namespace
}  // namespace strata
