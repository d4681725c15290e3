// `strata bench` as a user calls it: a table on stdout and one JSON line appended per
// invocation, with speeds as median/min/max, bytes per token, the plan's limit and peak RSS; the
// memory-mapped baseline beside strata's run; and the baseline refused, saying why, for a file
// larger than the machine's RAM minus 4 GiB.
#include <gtest/gtest.h>

#include <map>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

using nlohmann::json;
using test::shell_quote;

std::vector<json> json_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<json> out;
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
}

struct BenchRun {
    test::CommandResult result;
    std::vector<json> lines;  // what it appended to its results file
};

// `strata bench MODEL FLAGS --json FILE` with FILE in a fresh temporary directory.
BenchRun bench(const std::string& model, const std::string& flags) {
    test::TempDir dir;
    const std::string results = dir.file("results.jsonl");
    BenchRun run;
    run.result = test::run_strata("bench " + shell_quote(model) + " " + flags + " --json " +
                                  shell_quote(results));
    run.lines = json_lines(results);
    return run;
}

void expect_spread(const json& s) {
    EXPECT_GT(s["median"].get<double>(), 0) << s.dump();
    EXPECT_LE(s["min"].get<double>(), s["median"].get<double>());
    EXPECT_LE(s["median"].get<double>(), s["max"].get<double>());
}

TEST(BenchCli, PrintsATableAndAppendsOneJsonLinePerInvocation) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    test::TempDir dir;
    const std::string results = dir.file("results.jsonl");
    const std::string args = "bench " + shell_quote(model) +
                             " --prompt-tokens 16 --gen-tokens 8 --reps 3 -t 2 --json " +
                             shell_quote(results);
    const auto first = test::run_strata(args);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_NE(first.out.find("gen tok/s"), std::string::npos) << first.out;
    EXPECT_NE(first.out.find("strata (resident)"), std::string::npos) << first.out;
    EXPECT_NE(first.err.find("results appended to"), std::string::npos) << first.err;
    ASSERT_EQ(test::run_strata(args).exit_code, 0);

    const auto lines = json_lines(results);
    ASSERT_EQ(lines.size(), 2u);
    for (const json& j : lines) {
        EXPECT_EQ(j["prompt_tokens"], 16);
        EXPECT_EQ(j["gen_tokens"], 8);
        EXPECT_EQ(j["reps"], 3);
        EXPECT_EQ(j["threads"], 2);
        ASSERT_EQ(j["runs"].size(), 1u);
        const json& run = j["runs"][0];
        EXPECT_EQ(run["mode"], "resident");
        EXPECT_EQ(run["plan"]["mode"], "resident");
        EXPECT_GT(run["plan"]["tokens_per_second_limit"].get<double>(), 0);
        expect_spread(run["prompt_tokens_per_second"]);
        expect_spread(run["gen_tokens_per_second"]);
        expect_spread(run["first_token_seconds"]);
        EXPECT_EQ(run["reps"].size(), 3u);
        EXPECT_GT(run["bytes_per_token"]["weights"].get<double>(), 0);
        EXPECT_EQ(run["bytes_per_token"]["disk_store"].get<double>(), 0);
        EXPECT_GT(run["fraction_of_limit"].get<double>(), 0);
        EXPECT_GT(run["peak_rss_bytes"].get<uint64_t>(), 0u);
        // Per operator: the projections and the FFN read their weights once per generated
        // token (3 reps of 8 tokens) and do 2 flops per weight per token.
        std::map<std::string, json> ops;
        for (const json& o : run["operators"]) ops[o["operator"]] = o;
        for (const char* op : {"attention projections", "dense FFN", "attention", "LM head"}) {
            ASSERT_TRUE(ops.count(op)) << op;
            EXPECT_GT(ops[op]["prompt"]["seconds"].get<double>(), 0) << op;
            EXPECT_GT(ops[op]["generation"]["seconds"].get<double>(), 0) << op;
            EXPECT_GT(ops[op]["generation"]["bytes"].get<double>(), 0) << op;
        }
        const json& ffn = ops["dense FFN"]["generation"];
        EXPECT_NEAR(ffn["flops"].get<double>() / ffn["bytes"].get<double>(),
                    2.0 * 32 / 34,  // Q8_0: 34 bytes a block of 32 weights
                    1e-9);
        EXPECT_EQ(ops["experts"]["generation"]["bytes"].get<double>(), 0);
    }
    EXPECT_NE(first.out.find("gen us/token"), std::string::npos) << first.out;
    EXPECT_NE(first.out.find("dense FFN"), std::string::npos) << first.out;
}

// --depth: the repetitions start after a context evaluated once, so attention reads and
// multiplies over it: more attention flops per generated token than from an empty context.
TEST(BenchCli, DepthMeasuresAfterAContext) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    auto attention_gen_flops = [](const json& line) {
        for (const json& o : line["runs"][0]["operators"]) {
            if (o["operator"] == "attention") return o["generation"]["flops"].get<double>();
        }
        return 0.0;
    };
    const std::string flags = "--prompt-tokens 8 --gen-tokens 4 --reps 2 -t 2";
    const BenchRun plain = bench(model, flags);
    const BenchRun deep = bench(model, flags + " --depth 100");
    ASSERT_EQ(plain.result.exit_code, 0) << plain.result.err;
    ASSERT_EQ(deep.result.exit_code, 0) << deep.result.err;
    EXPECT_NE(deep.result.out.find("after 100 tokens of context"), std::string::npos)
        << deep.result.out;
    ASSERT_EQ(deep.lines.size(), 1u);
    EXPECT_EQ(deep.lines[0]["depth"], 100);
    EXPECT_EQ(plain.lines[0]["depth"], 0);
    // Each generated token sees about 100 more positions: (100 + ~10) / ~10 times the work,
    // and the KV reads, which the limit the run is held to counts beside the weights.
    EXPECT_GT(attention_gen_flops(deep.lines[0]), 5 * attention_gen_flops(plain.lines[0]));
    expect_spread(deep.lines[0]["runs"][0]["gen_tokens_per_second"]);
    const json& run = deep.lines[0]["runs"][0];
    const double kv = run["bytes_per_token"]["kv_cache"].get<double>();
    EXPECT_GT(kv, 5 * plain.lines[0]["runs"][0]["bytes_per_token"]["kv_cache"].get<double>());
    const double plan_limit = run["plan"]["tokens_per_second_limit"].get<double>();
    const double limit = run["tokens_per_second_limit_at_context"].get<double>();
    EXPECT_LT(limit, plan_limit);
    EXPECT_NEAR(run["fraction_of_limit"].get<double>(),
                run["gen_tokens_per_second"]["median"].get<double>() / limit, 1e-9);
    EXPECT_NE(deep.result.out.find("KV/token"), std::string::npos) << deep.result.out;
}

// --streams: N sequences decoded together share each weight read, so the weight bytes per
// generated token halve from one stream to two.
TEST(BenchCli, StreamsShareTheWeightReads) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    const auto r = test::run_strata("bench " + shell_quote(model) +
                                    " --streams 1,2 --prompt-tokens 8 --gen-tokens 8 -t 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("aggregate tok/s"), std::string::npos) << r.out;
    // Rows: "  1  <agg>  <per stream>  1.00x  <weights>  0 B".
    std::istringstream in(r.out);
    std::map<int, std::vector<std::string>> rows;
    for (std::string line; std::getline(in, line);) {
        std::istringstream cells(line);
        std::vector<std::string> c;
        for (std::string w; cells >> w;) c.push_back(w);
        if (c.size() >= 6 && (c[0] == "1" || c[0] == "2")) rows[std::stoi(c[0])] = c;
    }
    ASSERT_EQ(rows.size(), 2u) << r.out;
    EXPECT_EQ(rows[1][3], "1.00x");
    const auto bytes = [](const std::vector<std::string>& row) {
        const std::map<std::string, double> unit = {
            {"B", 1}, {"KiB", 1024}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024}};
        return std::stod(row[4]) * unit.at(row[5]);
    };
    EXPECT_NEAR(bytes(rows[2]) / bytes(rows[1]), 0.5, 0.01) << r.out;
    // No streams at all is refused.
    EXPECT_NE(test::run_strata("bench " + shell_quote(model) + " --streams 0").exit_code, 0);
}

TEST(BenchCli, BaselineRunsTheMappedFileBesideThePlan) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    const auto [r, lines] =
        bench(model, "--prompt-tokens 8 --gen-tokens 4 --reps 1 -t 2 --baseline");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("baseline (mmap)"), std::string::npos) << r.out;
    ASSERT_EQ(lines.size(), 1u);
    const json& runs = lines[0]["runs"];
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[1]["label"], "baseline");
    EXPECT_EQ(runs[1]["mode"], "mmap");
    EXPECT_FALSE(runs[1].contains("plan"));
    EXPECT_FALSE(runs[1].contains("fraction_of_limit"));
    expect_spread(runs[1]["gen_tokens_per_second"]);
    // Same weights, same forward pass: the same bytes per token.
    EXPECT_EQ(runs[1]["bytes_per_token"]["weights"], runs[0]["bytes_per_token"]["weights"]);
}

TEST(BenchCli, BaselineIsRefusedForAFileLargerThanRamUnlessForced) {
    test::TempDir dir;
    const std::string huge = dir.file("huge.gguf");
    std::ofstream(huge).put('G');
    std::error_code ec;
    std::filesystem::resize_file(huge, 1ull << 40, ec);  // sparse: 1 TiB, no blocks
    if (ec) GTEST_SKIP() << "no sparse 1 TiB file here: " << ec.message();
    const auto r = test::run_strata("bench " + shell_quote(huge) + " --baseline");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("minus 4 GiB"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
    // Forced, it gets past the check and fails on the file itself, which is no model.
    const auto forced = test::run_strata("bench " + shell_quote(huge) + " --baseline --force");
    EXPECT_EQ(forced.exit_code, 1);
    EXPECT_EQ(forced.err.find("minus 4 GiB"), std::string::npos) << forced.err;
}

TEST(BenchCli, BadFlagsFailWithOneLine) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    for (const std::string flags : {"--reps 0", "--prompt-tokens 0", "--ram 1K"}) {
        const auto r = test::run_strata("bench " + shell_quote(model) + " " + flags);
        EXPECT_EQ(r.exit_code, 1) << flags;
        EXPECT_EQ(r.err.rfind("strata: ", 0), 0u) << flags << ": " << r.err;
    }
}

// --tune: the settings are on a line of the header and in the JSON line, every key with its
// value as --tune takes it (--gpu-expert-prefetch sets its key too).
TEST(BenchCli, TuneSettingsAreShownAndRecorded) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    const auto [r, lines] = bench(model,
                                  "--prompt-tokens 8 --gen-tokens 4 --reps 1 -t 2 --tune "
                                  "cuda_graphs=false --tune attention_by_positions=false "
                                  "--gpu-expert-prefetch 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\ntuning: cuda_graphs=false "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" attention_by_positions=false "), std::string::npos) << r.out;
    ASSERT_EQ(lines.size(), 1u);
    const json& t = lines[0]["tuning"];
    EXPECT_EQ(t.size(), 9u) << t.dump();
    EXPECT_EQ(t["cuda_graphs"], "false");
    EXPECT_EQ(t["attention_by_positions"], "false");
    EXPECT_EQ(t["gpu_expert_prefetch"], "2");
    EXPECT_EQ(t["pdl"], "at_end");
    EXPECT_EQ(t["cpu_path"], "best");
    // The CPU kernels: the test profile's table has no choices, so none was forced and the
    // table recorded is empty.
    EXPECT_NE(r.out.find("\ncpu kernels: "), std::string::npos) << r.out;
    const json& k = lines[0]["cpu_kernels"];
    EXPECT_TRUE(k["forced"].is_null()) << k.dump();
    EXPECT_TRUE(k["table"]["choices"].empty()) << k.dump();
}

// A forced path is shown and recorded as the kernels every product took.
TEST(BenchCli, AForcedCpuPathIsShownAsTheKernelsOfEveryProduct) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    const auto [r, lines] = bench(model,
                                  "--prompt-tokens 8 --gen-tokens 4 --reps 1 -t 2 --tune "
                                  "cpu_path=scalar");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\ncpu kernels: scalar for every product (--tune cpu_path=scalar)"),
              std::string::npos)
        << r.out;
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0]["cpu_kernels"]["forced"], "scalar");
}

// A key --tune does not know, a value its key does not take, or no value: one line that names
// the keys or the values taken.
TEST(BenchCli, BadTuneSettingsFailWithOneLine) {
    const std::string model = test::synth_test_model("tiny", TensorType::Q8_0);
    const std::pair<std::string, std::string> cases[] = {
        {"--tune nonsense=1", "unknown tuning key 'nonsense' (the keys: cuda_graphs, "},
        {"--tune cuda_graphs=maybe", "cuda_graphs=maybe: the value must be true or false"},
        {"--tune pdl=2", "one of off, at_end, at_start"},
        {"--tune cuda_graphs", "is not key=value"},
    };
    for (const auto& [flags, what] : cases) {
        const auto r = test::run_strata("bench " + shell_quote(model) + " " + flags);
        EXPECT_EQ(r.exit_code, 1) << flags;
        EXPECT_EQ(r.err.rfind("strata: --tune: ", 0), 0u) << flags << ": " << r.err;
        EXPECT_NE(r.err.find(what), std::string::npos) << flags << ": " << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << flags << ": " << r.err;
    }
}

// In expert-stream mode the record has the expert cache's figures, and they add up.
TEST(BenchCli, ExpertStreamReportsTheExpertCache) {
    STRATA_REQUIRE_TESTDATA();
    const std::string model =
        (test::testdata_dir() / "models/synthetic/llama-moe-Q8_0.gguf").string();
    const std::string flags = "--prompt-tokens 8 --gen-tokens 8 --reps 2 -t 2";
    // The run at the smallest budget is the one measured (a second run could find the
    // process's measured baseline moved and the budget too small).
    test::TempDir dir;
    const std::string results = dir.file("results.jsonl");
    const auto r = test::run_near_smallest_ram("bench " + shell_quote(model) + " " + flags +
                                                   " --json " + shell_quote(results),
                                               256 << 10)
                       .result;
    const auto lines = json_lines(results);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("hit rate"), std::string::npos) << r.out;
    ASSERT_EQ(lines.size(), 1u);
    const json run = lines[0]["runs"][0];
    EXPECT_EQ(run["mode"], "expert-stream");
    const json& x = run["experts"];
    EXPECT_EQ(x["hits"].get<uint64_t>() + x["misses"].get<uint64_t>(), x["requests"]);
    EXPECT_GE(x["hit_rate"].get<double>(), 0.0);
    EXPECT_LE(x["hit_rate"].get<double>(), 1.0);
    EXPECT_LE(x["prefetch_used"].get<uint64_t>(), x["prefetches"].get<uint64_t>());
    EXPECT_GT(x["selected_bytes_per_token"].get<double>(), 0);
    EXPECT_GT(x["predicted_disk_bytes_per_token"].get<double>(), 0);
    EXPECT_NEAR(x["disk_bytes_per_token"].get<double>(),
                run["bytes_per_token"]["disk_store"].get<double>(), 1.0);
}

}  // namespace
}  // namespace strata
