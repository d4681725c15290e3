// The plan as JSON (plan/plan_json.h) and as text (plan/plan_text.h): every field is in the JSON,
// it reads back to the same plan, and the text shows the figures people look for.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "plan/plan_json.h"
#include "plan/plan_text.h"
#include "plan_test_support.h"

namespace strata {
namespace {

using nlohmann::json;

Plan make(const ModelInfo& m, uint64_t ram, std::optional<PlanMode> mode = std::nullopt) {
    Budgets b;
    b.ram = ram;
    b.ram_from_flag = true;
    b.warnings.push_back("a budget warning");
    PlanOptions o;
    o.n_ctx = 4096;
    o.disk = 0;
    o.mode = mode;
    auto p = make_plan(m, test::plan_profile(), b, o);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    return p.ok() ? std::move(*p) : Plan{};
}

std::vector<std::string> keys(const json& j) {
    std::vector<std::string> out;
    for (const auto& [k, v] : j.items()) out.push_back(k);
    std::sort(out.begin(), out.end());
    return out;
}

TEST(PlanJson, EveryFieldAndRoundTrip) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    const Plan p = make(m, 3ull << 30);
    ASSERT_EQ(p.mode, PlanMode::FfnStream);
    const json j = plan_json(p, m);

    EXPECT_EQ(keys(j), (std::vector<std::string>{"batch",        "bound",
                                                 "budgets",      "cpu_expert_layers",
                                                 "cpu_kernels",  "deep",
                                                 "execution",    "expert_cache",
                                                 "gpu_device",   "gpu_layers",
                                                 "gpu_memory",   "gpu_note",
                                                 "kv_type",      "layers",
                                                 "memory",       "mode",
                                                 "mode_forced",  "n_ctx",
                                                 "n_seq",        "notes",
                                                 "prompt_bound", "prompt_tokens_per_second",
                                                 "reason",       "stream",
                                                 "tensors",      "threads",
                                                 "tiers",        "tokens_per_second"}));
    EXPECT_EQ(keys(j["memory"]),
              (std::vector<std::string>{"activations", "baseline", "baseline_measured", "budget",
                                        "cached_weights", "expert_cache", "io_buffers", "kv_cache",
                                        "recurrent_state", "resident_weights", "row_buffers",
                                        "slack", "slots", "total"}));
    EXPECT_EQ(j["batch"], 512);
    EXPECT_GT(j["memory"]["activations"].get<uint64_t>(), 0u);
    EXPECT_FALSE(j["memory"]["baseline_measured"].get<bool>());
    EXPECT_EQ(keys(j["deep"]),
              (std::vector<std::string>{"embedding_rows", "head_rows", "whole_layers"}));
    EXPECT_EQ(keys(j["tensors"][0]), (std::vector<std::string>{"name", "tier", "unit", "use"}));
    EXPECT_EQ(keys(j["stream"]).size(), 10u);
    // The execution table the engine would run (execution_table.h): a CPU plan, one unit.
    EXPECT_EQ(keys(j["execution"]), (std::vector<std::string>{"embedding_unit", "expert_level_unit",
                                                              "head_unit", "layers", "units"}));
    ASSERT_EQ(j["execution"]["units"].size(), 1u);
    EXPECT_EQ(j["execution"]["units"][0]["kind"], "cpu");
    EXPECT_EQ(j["execution"]["layers"].size(), 32u);
    EXPECT_EQ(keys(j["expert_cache"]).size(), 5u);
    EXPECT_EQ(keys(j["budgets"]).size(), 5u);
    EXPECT_EQ(j["mode"], "ffn-stream");
    EXPECT_EQ(j["kv_type"], "f16");
    EXPECT_EQ(j["bound"], "disk");
    EXPECT_EQ(j["budgets"]["warnings"][0], "a budget warning");
    ASSERT_EQ(j["tiers"].size(), 3u);
    EXPECT_EQ(j["tiers"][0]["tier"], "gpu");
    EXPECT_EQ(j["tiers"][2]["tier"], "disk");
    ASSERT_EQ(j["layers"].size(), 32u);
    EXPECT_EQ(keys(j["layers"][0]).size(), 7u);
    ASSERT_EQ(j["tensors"].size(), m.tensors.size());
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        EXPECT_EQ(j["tensors"][i]["name"], m.info(m.tensors[i]).name);
    }
    EXPECT_EQ(j["tensors"][0]["tier"], "ram");
    EXPECT_EQ(j["memory"]["total"].get<uint64_t>(), p.memory.total);
    EXPECT_DOUBLE_EQ(j["tokens_per_second"].get<double>(), p.tokens_per_second);

    auto back = plan_from_json(j);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(plan_json(*back, m), j);
    EXPECT_EQ(back->tensors.size(), p.tensors.size());
    EXPECT_EQ(back->stream.lookahead, p.stream.lookahead);
    EXPECT_EQ(back->budgets.warnings, p.budgets.warnings);

    // Through text as inspect --json prints it.
    auto reparsed = plan_from_json(json::parse(j.dump(2)));
    ASSERT_TRUE(reparsed.ok());
    EXPECT_EQ(plan_json(*reparsed, m), j);
}

TEST(PlanJson, ExpertStreamRoundTrip) {
    const ModelInfo m = test::synthetic_model_info("mixtral-10g", "Q4_K_M");
    const Plan p = make(m, 4ull << 30);
    ASSERT_EQ(p.mode, PlanMode::ExpertStream);
    const json j = plan_json(p, m);
    EXPECT_EQ(j["mode"], "expert-stream");
    EXPECT_GT(j["expert_cache"]["capacity"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["layers"][0]["ffn_use"], "streamed");
    auto back = plan_from_json(j);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(plan_json(*back, m), j);
}

TEST(PlanJson, MalformedJsonIsAnError) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    json j = plan_json(make(m, 16ull << 30), m);
    j["mode"] = "sideways";
    EXPECT_FALSE(plan_from_json(j).ok());
    j = plan_json(make(m, 16ull << 30), m);
    j.erase("memory");
    auto r = plan_from_json(j);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("memory"), std::string::npos) << r.error().message;
    j = plan_json(make(m, 16ull << 30), m);
    j["tensors"][3]["tier"] = "tape";
    EXPECT_FALSE(plan_from_json(j).ok());
}

TEST(PlanText, ShowsModeMemoryStreamingAndLimit) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    const Plan p = make(m, 3ull << 30);
    const std::string t = plan_text(p);
    for (const char* s : {"\nplan\n",
                          "ffn-stream",
                          "3.00 GiB RAM (--ram)",
                          "cached FFN",
                          "slots",
                          "lookahead",
                          "for 4096 tokens (f16)",
                          "tokens/s, bound by disk",
                          "plan by tier",
                          "1.50 GB/s",
                          "10.00 GB/s",
                          "plan by layer",
                          "disk (streamed)",
                          "ram (cached)",
                          "+ engine ",
                          "+ process ",
                          "+ slack ",
                          "for batches of 512 tokens on",
                          "before the weights are read",
                          "estimated"}) {
        EXPECT_NE(t.find(s), std::string::npos) << "missing '" << s << "' in\n" << t;
    }
    const std::string resident = plan_text(make(m, 16ull << 30));
    EXPECT_NE(resident.find("resident"), std::string::npos);
    EXPECT_NE(resident.find("bound by ram"), std::string::npos) << resident;
    EXPECT_NE(resident.find("nothing is read from disk"), std::string::npos) << resident;
    // A uniform model (one type for every matrix) is one row of 32 merged layers.
    const ModelInfo uniform = test::synthetic_model_info("8b", "Q4_K");
    const std::string merged = plan_text(make(uniform, 16ull << 30));
    EXPECT_NE(merged.find("0-31"), std::string::npos) << merged;
}

}  // namespace
}  // namespace strata
