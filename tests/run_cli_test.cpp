// `strata run` and `strata perplexity` as a user calls them: the JSON and plain outputs, greedy
// ids and perplexity on the trained aidreams260K model against the reference engine's golden
// runs (skipped without ../shared/testdata), and clear one-line errors with exit status 1 for
// bad input.
//
// Bounds: greedy ids of a float file must match exactly (testdata README); ln(PPL) within 1% of
// the golden value, mean KL <= 1e-4 and top-1 >= 98% against the golden F32 logits, as
// engine_kld_golden_test.cpp requires of float files. A base file written and read back by strata
// itself differs only by the .kld format's 16-bit storage of log-probabilities: mean KL <= 1e-4,
// the same top token everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

using nlohmann::json;
using test::shell_quote;

// The tiny llama preset with its built-in vocabulary (Q8_0), shared by the tests of this file.
const std::string& synth_model() {
    return test::synth_test_model("tiny", TensorType::Q8_0);
}

test::CommandResult strata(const std::string& args) {
    return test::run_command("timeout 120 " + shell_quote(test::strata_binary()) + " " + args);
}

// The command failed with status 1 and a one-line "strata: ..." message mentioning `what` (after
// the line that says where a planned run computes, when it got that far).
void expect_error(const test::CommandResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    std::string err = r.err;
    if (err.rfind("strata: running on the CPU: ", 0) == 0) err = err.substr(err.find('\n') + 1);
    EXPECT_EQ(err.rfind("strata: ", 0), 0u) << r.err;
    EXPECT_NE(err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << r.err;
}

// --tune reaches the engine and the JSON object names every setting; a bad one fails.
TEST(RunCli, JsonNamesTheTuning) {
    const auto r = strata("run " + shell_quote(synth_model()) +
                          " --prompt 'Once upon a time' --greedy -n 4 --json -t 2 --tune "
                          "qkv_parts=false --tune cpu_path=best");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["tuning"]["qkv_parts"], "false");
    EXPECT_EQ(j["tuning"]["cuda_graphs"], "true");
    expect_error(strata("run " + shell_quote(synth_model()) + " --prompt hi --tune graphs=0"),
                 "unknown tuning key 'graphs'");
}

TEST(RunCli, JsonPrintsOneObjectWithIdsTextAndTimings) {
    const auto r = strata("run " + shell_quote(synth_model()) +
                          " --prompt 'Once upon a time' --greedy -n 8 --json -t 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line expected:\n" << r.out;
    const json j = json::parse(r.out);
    ASSERT_TRUE(j.is_object());
    EXPECT_FALSE(j["prompt_ids"].empty());
    EXPECT_LE(j["generated_ids"].size(), 8u);
    EXPECT_TRUE(j["text"].is_string());
    EXPECT_TRUE(j["done_reason"] == "length" || j["done_reason"] == "stop");
    const json& t = j["timings"];
    EXPECT_EQ(t["prompt_tokens"].get<size_t>(), j["prompt_ids"].size());
    EXPECT_EQ(t["generated_tokens"].get<size_t>(), j["generated_ids"].size());
    EXPECT_GE(t["prompt_seconds"].get<double>(), 0.0);
    EXPECT_TRUE(t.contains("generate_tokens_per_second"));

    // Greedy: the same command gives the same answer.
    const auto again = strata("run " + shell_quote(synth_model()) +
                              " --prompt 'Once upon a time' --greedy -n 8 --json -t 2");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(json::parse(again.out)["generated_ids"], j["generated_ids"]);
}

TEST(RunCli, PlainModeStreamsTextAndSummarisesOnStderr) {
    const std::string base =
        "run " + shell_quote(synth_model()) + " --prompt 'Once upon a time' --greedy -n 8 -t 2";
    const auto r = strata(base);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = strata(base + " --json");
    ASSERT_EQ(j.exit_code, 0) << j.err;
    EXPECT_EQ(r.out, json::parse(j.out)["text"].get<std::string>() + "\n");
    EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
    // The summary, after the line saying where the run computes when it is the CPU.
    const bool cpu_line = r.err.rfind("strata: running on the CPU: ", 0) == 0;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), cpu_line ? 2 : 1) << r.err;
}

// --prompt-ids runs the prompt's ids as given: the same answer as the text they come from.
// --logits-out writes one row of n_vocab float32 logits per prompt token; the last row's top
// token is the first greedy one, and each row is the last-token logits of the prompt cut there.
TEST(RunCli, PromptIdsAndLogitsOutGiveWhatTheTextGives) {
    const std::string m = shell_quote(synth_model());
    const auto by_text =
        strata("run " + m + " --prompt 'Once upon a time' --raw --greedy -n 8 --json -t 2");
    ASSERT_EQ(by_text.exit_code, 0) << by_text.err;
    const json t = json::parse(by_text.out);
    const auto ids = t["prompt_ids"].get<std::vector<int>>();
    ASSERT_GE(ids.size(), 3u);
    auto id_list = [&](size_t n) {
        std::string list;
        for (size_t i = 0; i < n; ++i) list += (i ? "," : "") + std::to_string(ids[i]);
        return list;
    };
    const test::TempDir dir;
    const std::string file = dir.file("logits.f32");
    const auto by_ids = strata("run " + m + " --prompt-ids " + id_list(ids.size()) +
                               " --logits-out " + shell_quote(file) + " --greedy -n 8 --json -t 2");
    ASSERT_EQ(by_ids.exit_code, 0) << by_ids.err;
    const json j = json::parse(by_ids.out);
    EXPECT_EQ(j["prompt_ids"], t["prompt_ids"]);
    EXPECT_EQ(j["generated_ids"], t["generated_ids"]);

    auto read_floats = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
        std::vector<float> v(bytes.size() / sizeof(float));
        std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
        return v;
    };
    const std::vector<float> all = read_floats(file);
    ASSERT_FALSE(all.empty());
    ASSERT_EQ(all.size() % ids.size(), 0u);
    const size_t n_vocab = all.size() / ids.size();
    const auto last = all.begin() + std::ptrdiff_t((ids.size() - 1) * n_vocab);
    EXPECT_EQ(std::max_element(last, all.end()) - last, t["generated_ids"][0].get<int>());

    // The prompt cut after its second token: -n 0 writes the logits and generates nothing.
    const std::string cut_file = dir.file("cut.f32");
    const auto cut = strata("run " + m + " --prompt-ids " + id_list(2) + " --logits-out " +
                            shell_quote(cut_file) + " -n 0 --json -t 2");
    ASSERT_EQ(cut.exit_code, 0) << cut.err;
    EXPECT_TRUE(json::parse(cut.out)["generated_ids"].empty());
    const std::vector<float> rows = read_floats(cut_file);
    ASSERT_EQ(rows.size(), 2 * n_vocab);
    for (size_t i = 0; i < 2 * n_vocab; ++i) ASSERT_NEAR(rows[i], all[i], 1e-3) << i;

    expect_error(strata("run " + m + " --prompt-ids 1,x"), "--prompt-ids: 'x' is not a token id");
    expect_error(strata("run " + m + " --prompt-ids 1,99999"), "'99999' is not a token id");
    expect_error(strata("run " + m + " --prompt-ids 1 --prompt hi"), "not both");
    expect_error(strata("run " + m + " --prompt hi --logits-out " + shell_quote(file)),
                 "--logits-out needs the prompt as --prompt-ids");
}

TEST(RunCli, GreedyIdsMatchTheGoldenRealModel) {
    STRATA_REQUIRE_TESTDATA();
    const auto dir = test::testdata_dir();
    const json golden = json::parse(std::ifstream(dir / "golden/greedy/aidreams260K-F32.json"));
    const json& p1 = golden["prompts"][0];
    ASSERT_EQ(p1["prompt_id"], "p1");
    const auto r = strata(
        "run " + shell_quote((dir / "models/real/aidreams260K-F32.gguf").string()) + " --prompt " +
        shell_quote(p1["prompt"].get<std::string>()) + " --greedy -n 8 --json -t 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["prompt_ids"], p1["prompt_ids"]);
    const auto want = p1["greedy_ids"].get<std::vector<int>>();
    EXPECT_EQ(j["generated_ids"].get<std::vector<int>>(),
              std::vector<int>(want.begin(), want.begin() + 8));
}

TEST(RunCli, BadInputsFailWithOneLine) {
    const std::string m = shell_quote(synth_model());
    expect_error(strata("run /nonexistent/model.gguf --prompt hi"), "/nonexistent/model.gguf");
    expect_error(strata("run " + m + " --prompt hi --kv-type bogus"), "--kv-type");
    expect_error(strata("run " + m + " --prompt hi --temperature -1"), "temperature");
    expect_error(strata("run " + m + " --prompt 'Once upon a time there was a king' --ctx 4"),
                 "context");
}

TEST(RunCli, PerplexityMatchesGoldenRun) {
    STRATA_REQUIRE_TESTDATA();
    const auto dir = test::testdata_dir();
    const std::string model = shell_quote((dir / "models/real/aidreams260K-F32.gguf").string());
    const json golden = json::parse(std::ifstream(dir / "golden/perplexity/aidreams260K-F32.json"));

    const auto ppl = strata("perplexity " + model + " --file " +
                            shell_quote((dir / "inputs/ppl_text.txt").string()) +
                            " --ctx 128 --chunks 4 --json -t 2");
    ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
    const json p = json::parse(ppl.out);
    const double want = std::log(golden["ppl_final"].get<double>());
    EXPECT_NEAR(std::log(p["ppl"].get<double>()), want, 0.01 * want);
    EXPECT_GT(p["ppl_err"].get<double>(), 0.0);
    EXPECT_EQ(p["chunks"], 4);

    const auto kl =
        strata("perplexity " + model + " --kl " +
               shell_quote((dir / "golden/logits/aidreams260K-F32.kld").string()) + " --json -t 2");
    ASSERT_EQ(kl.exit_code, 0) << kl.err;
    const json k = json::parse(kl.out);
    for (const char* key : {"ppl", "ppl_err", "kl_mean", "kl_p99", "top1"}) {
        ASSERT_TRUE(k.contains(key) && k[key].is_number()) << key << " in " << kl.out;
    }
    EXPECT_LE(std::abs(k["kl_mean"].get<double>()), 1e-4);
    EXPECT_LE(k["kl_p99"].get<double>(), 1e-3);
    EXPECT_GE(k["top1"].get<double>(), 0.98);
}

TEST(RunCli, PerplexityBaseFileRoundTrips) {
    STRATA_REQUIRE_TESTDATA();
    const auto dir = test::testdata_dir();
    const std::string model = shell_quote((dir / "models/real/aidreams260K-F32.gguf").string());
    test::TempDir tmp;
    const std::string base = tmp.file("base.kld");
    const auto save = strata(
        "perplexity " + model + " --file " + shell_quote((dir / "inputs/ppl_text.txt").string()) +
        " --ctx 128 --chunks 3 --kl-base " + shell_quote(base) + " --json -t 2");
    ASSERT_EQ(save.exit_code, 0) << save.err;
    const auto cmp = strata("perplexity " + model + " --kl " + shell_quote(base) + " --json -t 2");
    ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
    const json s = json::parse(save.out), k = json::parse(cmp.out);
    EXPECT_NEAR(k["ppl"].get<double>(), s["ppl"].get<double>(), 1e-3 * s["ppl"].get<double>());
    EXPECT_LE(std::abs(k["kl_mean"].get<double>()), 1e-4);
    EXPECT_DOUBLE_EQ(k["top1"].get<double>(), 1.0);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// A RAM budget below the model's size streams its FFN layers from disk (the plan's ffn-stream
// mode, asked for: 64K above the smallest budget leaves room for the resident part of the model,
// its KV cache, two slots and what the process needs besides) and changes nothing in the answer.
// The model's FFN layers (768 KiB each) are far larger than the run-to-run drift of the
// process's measured baseline, so a retried run never finds room to cache them all.
TEST(RunCli, SmallRamBudgetStreamsAndGivesTheSameTokens) {
    const std::string model =
        test::shell_quote(test::synth_test_model("tiny", TensorType::F16, 1, 4));
    const std::string args = " -p 'Once upon a time' -n 16 --greedy --raw --ctx 64 -t 2 --json";
    const auto resident = test::run_strata("run " + model + args);
    const test::CommandResult streamed =
        test::run_near_smallest_ram("run " + model + args + " --mode ffn-stream", 64 << 10).result;
    ASSERT_EQ(resident.exit_code, 0) << resident.err;
    ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
    const auto a = nlohmann::json::parse(resident.out);
    const auto b = nlohmann::json::parse(streamed.out);
    EXPECT_EQ(a["mode"], "resident");
    EXPECT_EQ(a["disk_bytes_read"], 0);
    EXPECT_EQ(b["mode"], "ffn-stream");
    EXPECT_GT(b["disk_bytes_read"].get<uint64_t>(), 0u);
    EXPECT_EQ(a["generated_ids"], b["generated_ids"]);

    const auto too_small = test::run_strata("run " + model + args + " --ram 100K");
    EXPECT_EQ(too_small.exit_code, 1);
    EXPECT_NE(too_small.err.find("too small"), std::string::npos) << too_small.err;
}

// A MoE model whose experts do not fit the budget streams them (expert-stream) and gives the same
// tokens; the routing statistics it learnt are kept in the cache directory for the next run.
TEST(RunCli, SmallRamBudgetStreamsExpertsAndGivesTheSameTokens) {
    STRATA_REQUIRE_TESTDATA();
    const std::string model =
        test::shell_quote((test::testdata_dir() / "models/synthetic/llama-moe-Q8_0.gguf").string());
    const std::string args = " -p 'Once upon a time' -n 16 --greedy --raw --ctx 64 -t 2 --json";
    const auto resident = test::run_strata("run " + model + args);
    const auto streamed = test::run_near_smallest_ram("run " + model + args, 256 << 10).result;
    const auto no_guess =
        test::run_near_smallest_ram("run " + model + args + " --no-prefetch --cache-policy lfu",
                                    256 << 10)
            .result;
    ASSERT_EQ(resident.exit_code, 0) << resident.err;
    ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
    ASSERT_EQ(no_guess.exit_code, 0) << no_guess.err;
    const auto a = nlohmann::json::parse(resident.out);
    const auto b = nlohmann::json::parse(streamed.out);
    const auto c = nlohmann::json::parse(no_guess.out);
    EXPECT_EQ(b["mode"], "expert-stream");
    EXPECT_GT(b["disk_bytes_read"].get<uint64_t>(), 0u);
    const auto& x = b["experts"];
    EXPECT_GT(x["requests"].get<uint64_t>(), 0u);
    EXPECT_EQ(x["hits"].get<uint64_t>() + x["misses"].get<uint64_t>(), x["requests"]);
    EXPECT_EQ(x["bytes_from_disk"], b["disk_bytes_read"]);
    EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
    EXPECT_EQ(a["generated_ids"], c["generated_ids"]);
    bool kept = false;
    for (const auto& f : std::filesystem::directory_iterator(test::test_cache_dir())) {
        kept |= f.path().filename().string().rfind("experts-", 0) == 0;
    }
    EXPECT_TRUE(kept) << "no expert statistics in the cache directory";
    const auto bad = test::run_strata("run " + model + args + " --ram 2M --cache-policy fifo");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("--cache-policy"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace strata
