// `strata inspect` end to end: the JSON of every GGUF in the golden data agrees with
// manifest.json (written from llama.cpp's view of the same files), the human output reads as
// intended, and bad input gives the documented exit status and messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model_test_files.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json run_inspect_json(const std::string& path, const std::string& flags = "--json --tensors") {
    const test::CommandResult r =
        test::run_strata("inspect " + flags + " " + test::shell_quote(path));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    return json::parse(r.out);
}

// manifest hparams key -> hparams field in the JSON.
const std::map<std::string, std::string>& manifest_hparam_fields() {
    static const std::map<std::string, std::string> m = {
        {"context_length", "n_ctx_train"},
        {"embedding_length", "n_embd"},
        {"block_count", "n_layer"},
        {"feed_forward_length", "n_ff"},
        {"attention.head_count", "n_head"},
        {"attention.head_count_kv", "n_head_kv"},
        {"rope.dimension_count", "n_rot"},
        {"rope.freq_base", "rope_freq_base"},
        {"attention.layer_norm_rms_epsilon", "rms_eps"},
        {"expert_count", "n_expert"},
        {"expert_used_count", "n_expert_used"},
    };
    return m;
}

void expect_number_eq(const json& got, const json& want, const std::string& what) {
    ASSERT_TRUE(got.is_number()) << what << ": " << got.dump();
    const double g = got.get<double>(), w = want.get<double>();
    EXPECT_LE(std::fabs(g - w), 1e-6 * std::fabs(w)) << what << ": " << g << " vs " << w;
}

// Internal consistency of one description: groupings add up, slices tile their tensors.
void check_consistency(const json& j) {
    const json& tensors = j.at("tensors");
    uint64_t bytes = 0, params = 0;
    double per_token = 0;
    for (const json& t : tensors) {
        bytes += t.at("bytes").get<uint64_t>();
        params += t.at("params").get<uint64_t>();
        per_token += t.at("bytes").get<double>() * t.at("reads_per_token").get<double>();
        if (t.contains("expert_slices")) {
            uint64_t next = t.at("offset");
            for (const json& s : t.at("expert_slices")) {
                EXPECT_EQ(s.at("offset").get<uint64_t>(), next) << t.at("name");
                next += s.at("bytes").get<uint64_t>();
            }
            EXPECT_EQ(next, t.at("offset").get<uint64_t>() + t.at("bytes").get<uint64_t>());
            EXPECT_EQ(t.at("expert_slices").size(), t.at("shape").back().get<size_t>());
        }
        // Tensors lie inside the data section and the file.
        EXPECT_GE(t.at("offset").get<uint64_t>(), j.at("file").at("data_offset").get<uint64_t>());
        EXPECT_LE(t.at("offset").get<uint64_t>() + t.at("bytes").get<uint64_t>(),
                  j.at("file").at("size").get<uint64_t>());
    }
    EXPECT_EQ(j.at("totals").at("bytes").get<uint64_t>(), bytes);
    EXPECT_EQ(j.at("totals").at("params").get<uint64_t>(), params);
    EXPECT_NEAR(j.at("totals").at("bytes_per_token").get<double>(), per_token, 1e-6 * per_token);
    uint64_t by_role = 0, by_type = 0, by_layer = j.at("non_layer").at("bytes");
    for (const auto& [k, v] : j.at("by_role").items()) by_role += v.at("bytes").get<uint64_t>();
    for (const auto& [k, v] : j.at("tensor_types").items())
        by_type += v.at("bytes").get<uint64_t>();
    for (const json& l : j.at("by_layer")) by_layer += l.at("bytes").get<uint64_t>();
    EXPECT_EQ(by_role, bytes);
    EXPECT_EQ(by_type, bytes);
    EXPECT_EQ(by_layer, bytes);
}

TEST(InspectGolden, EveryTestdataFileMatchesTheManifest) {
    STRATA_REQUIRE_TESTDATA();
    const json manifest = json::parse(test::read_text_file(test::testdata_dir() / "manifest.json"));
    std::map<std::string, json> entries;
    for (const json& e : manifest.at("files")) entries[e.at("path")] = e;

    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(test::testdata_dir())) {
        if (e.is_regular_file() && e.path().extension() == ".gguf") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty());

    for (const fs::path& p : files) {
        const std::string rel = fs::relative(p, test::testdata_dir()).string();
        SCOPED_TRACE(rel);
        ASSERT_TRUE(entries.count(rel)) << "not in manifest.json";
        const json& want = entries.at(rel);
        const json j = run_inspect_json(p.string());

        EXPECT_EQ(j.at("file").at("size"), want.at("bytes"));
        EXPECT_EQ(j.at("file").at("tensor_count"), want.at("tensor_count"));
        EXPECT_EQ(j.at("tensors").size(), want.at("tensor_count").get<size_t>());
        EXPECT_EQ(j.at("architecture"), want.at("architecture"));
        if (want.at("general.file_type").is_null()) {
            EXPECT_TRUE(j.at("file_type").is_null());
        } else {
            EXPECT_EQ(j.at("file_type").at("id"), want.at("general.file_type"));
        }
        EXPECT_EQ(j.at("tokenizer").at("model"), want.at("tokenizer.ggml.model"));
        EXPECT_EQ(j.at("tokenizer").at("pre"), want.at("tokenizer.ggml.pre"));

        const json& hp = j.at("hparams");
        ASSERT_TRUE(hp.is_object()) << j.at("problems").dump();
        EXPECT_EQ(hp.at("n_vocab"), want.at("n_vocab"));
        EXPECT_EQ(hp.at("tied_output"), want.at("tied_output"));
        const std::string arch = want.at("architecture");
        for (const auto& [key, value] : want.at("hparams").items()) {
            SCOPED_TRACE(key);
            ASSERT_TRUE(manifest_hparam_fields().count(key)) << "unmapped manifest key";
            expect_number_eq(hp.at(manifest_hparam_fields().at(key)), value, key);
            // The raw metadata carries the same value.
            expect_number_eq(j.at("metadata").at(arch + "." + key).at("value"), value, key);
        }
        // Keys the file leaves out take llama.cpp's defaults.
        if (!want.at("hparams").contains("rope.dimension_count")) {
            EXPECT_EQ(hp.at("n_rot"),
                      hp.at("n_embd").get<uint32_t>() / hp.at("n_head").get<uint32_t>());
        }
        if (!want.at("hparams").contains("rope.freq_base")) {
            EXPECT_EQ(hp.at("rope_freq_base"), 10000.0);
        }
        EXPECT_EQ(hp.at("rope_style"), arch == "qwen2" ? "neox" : "normal");

        std::map<std::string, uint64_t> types;
        for (const auto& [type, t] : j.at("tensor_types").items()) types[type] = t.at("tensors");
        std::map<std::string, uint64_t> want_types;
        for (const auto& [type, n] : want.at("tensor_types").items()) want_types[type] = n;
        EXPECT_EQ(types, want_types);

        // Every model file is a consistent, runnable model; vocabulary files are not runnable.
        const bool vocab_only = want.at("tensor_count") == 0;
        EXPECT_EQ(j.at("runnable"), !vocab_only) << j.at("problems").dump();
        EXPECT_EQ(j.at("problems").size(), vocab_only ? 1u : 0u) << j.at("problems").dump();
        EXPECT_TRUE(j.at("warnings").empty()) << j.at("warnings").dump();
        check_consistency(j);
    }
}

TEST(InspectGolden, MoeFileExpertSlicesAndReads) {
    STRATA_REQUIRE_TESTDATA();
    const fs::path p = test::testdata_dir() / "models/synthetic/llama-moe-Q4_K_M.gguf";
    const json j = run_inspect_json(p.string());
    int experts = 0;
    for (const json& t : j.at("tensors")) {
        const std::string role = t.at("role");
        if (role.rfind("expert_", 0) == 0) {
            ++experts;
            EXPECT_EQ(t.at("reads_per_token"), 0.25);  // 2 of 8 experts
            ASSERT_EQ(t.at("expert_slices").size(), 8u);
            EXPECT_EQ(t.at("expert_slices")[0].at("bytes").get<uint64_t>() * 8,
                      t.at("bytes").get<uint64_t>());
        } else {
            EXPECT_FALSE(t.contains("expert_slices"));
            EXPECT_EQ(t.at("reads_per_token"), 1.0);  // tied: token_embd is the LM head
        }
    }
    EXPECT_EQ(experts, 6);
    EXPECT_GT(j.at("totals").at("expert_bytes").get<uint64_t>(), 0u);
    EXPECT_EQ(j.at("by_layer").size(), 2u);
}

TEST(InspectGolden, VocabularyArraysAbbreviatedUnlessAskedFor) {
    STRATA_REQUIRE_TESTDATA();
    const fs::path p = test::testdata_dir() / "vocab/ggml-vocab-qwen2.gguf";
    const json brief = run_inspect_json(p.string(), "--json");
    const json& tokens = brief.at("metadata").at("tokenizer.ggml.tokens");
    EXPECT_EQ(tokens.at("type"), "array");
    EXPECT_EQ(tokens.at("element_type"), "string");
    EXPECT_EQ(tokens.at("length"), 151646);
    EXPECT_FALSE(tokens.contains("value"));
    EXPECT_EQ(brief.at("metadata").at("qwen2.block_count").at("value"), 32);
    EXPECT_FALSE(brief.contains("tensors"));

    const json full = run_inspect_json(p.string(), "--json --full-metadata");
    const json& all = full.at("metadata").at("tokenizer.ggml.tokens").at("value");
    ASSERT_EQ(all.size(), 151646u);
    EXPECT_EQ(all[0], "!");
}

TEST(InspectCli, HumanOutputSummarisesTheModel) {
    STRATA_REQUIRE_TESTDATA();
    const fs::path p = test::testdata_dir() / "models/synthetic/llama-moe-Q8_0.gguf";
    const test::CommandResult r = test::run_strata("inspect --tensors " + test::shell_quote(p));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    for (const char* line : {
             "  architecture  llama, mixture of experts\n",
             "  file type     Q8_0; tensors Q8_0 ×15, F32 ×7\n",
             "  attention     8 heads, 2 KV heads (GQA 4:1), head size 32\n",
             "  experts       8, 2 used per token, 256 wide\n",
             "  rope          normal, 32 dims, base 1000000\n",
             "  vocabulary    512 tokens, tokenizer llama\n",
             "\ntensor types\n  type  tensors",
             "\nby role\n  role ",
             "\nby layer (identical neighbours merged, figures per layer)\n  layer ",
             "\n  0-1             10    1.74 M    1.77 MiB  1.59 MiB      588.00 KiB\n",
             "\ntensors\n  name ",
             "8 × 68.00 KiB",
         }) {
        EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\n" << r.out;
    }
    // Aligned and tidy: no line ends in a blank.
    EXPECT_EQ(r.out.find(" \n"), std::string::npos);
}

// A hybrid: which layers are delta nets, their heads and how the file stores their projections,
// and the rope (qwen3next's is plain NEOX over a quarter of each head; qwen35's has sections).
TEST(InspectCli, HybridModelsShowTheirLinearAttention) {
    test::TempDir tmp;
    for (const auto& [preset, lines] :
         std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"tiny-qwen3next",
              {"  linear attention  Gated DeltaNet in 3 of 4 layers: 2 key / 4 value heads of 64, "
               "conv 4; value heads grouped per key head, fused ssm_in and ssm_ba\n",
               "  rope              neox, 16 dims, base 10000000\n"}},
             {"tiny-qwen35",
              {"  linear attention  Gated DeltaNet in 3 of 4 layers: 2 key / 4 value heads of 64, "
               "conv 4\n",
               "  rope              neox, 16 dims, base 10000000, sections 3/3/2/0 "
               "(interleaved)\n"}},
         }) {
        const std::string path = tmp.file(preset + ".gguf");
        test::CommandResult r = test::run_strata(
            "synth --preset " + preset + " --type Q8_0 --threads 2 -o " + test::shell_quote(path));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        r = test::run_strata("inspect " + test::shell_quote(path));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        for (const std::string& line : lines) {
            EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\n" << r.out;
        }
    }
}

TEST(InspectCli, UnreadableFileIsAnError) {
    test::TempDir tmp;
    const std::string missing = tmp.file("missing.gguf");
    test::CommandResult r = test::run_strata("inspect " + test::shell_quote(missing));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(r.err.rfind("strata: " + missing + ": ", 0), 0u) << r.err;

    const std::string junk = tmp.file("junk.gguf");
    {
        std::FILE* f = std::fopen(junk.c_str(), "w");
        std::fputs("this is a text file, not a model, and long enough for a header", f);
        std::fclose(f);
    }
    r = test::run_strata("inspect --json " + test::shell_quote(junk));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(r.err.rfind("strata: " + junk + ": ", 0), 0u) << r.err;
}

TEST(InspectCli, UnsupportedArchitectureIsShownWithAWarning) {
    test::TempDir tmp;
    test::TinyModel m = test::tiny_model(test::llama_spec());
    m.set("general.architecture", "mamba");
    const std::string path = tmp.file("mamba.gguf");
    m.write(path);

    test::CommandResult r = test::run_strata("inspect " + test::shell_quote(path));
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("architecture  mamba (not runnable, see the warnings)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("\nmetadata\n"), std::string::npos);  // raw metadata shown
    EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
    EXPECT_NE(r.out.find("\nby layer"), std::string::npos);
    EXPECT_NE(r.err.find("warning: " + path + ": architecture 'mamba' is not supported"),
              std::string::npos)
        << r.err;

    const json j = run_inspect_json(path);
    EXPECT_FALSE(j.at("runnable"));
    EXPECT_TRUE(j.at("hparams").is_null());
    EXPECT_EQ(j.at("architecture"), "mamba");
    EXPECT_EQ(j.at("tensors").size(), m.tensors.size());
    ASSERT_EQ(j.at("problems").size(), 1u);
}

TEST(InspectCli, InvalidModelListsItsProblems) {
    test::TempDir tmp;
    test::TinyModel m = test::tiny_model(test::llama_spec());
    for (int il = 0; il < 2; ++il) m.tensor(test::blk(il, "ffn_up"))->shape = {64, 95};
    const std::string path = tmp.file("bad.gguf");
    m.write(path);
    const test::CommandResult r = test::run_strata("inspect " + test::shell_quote(path));
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.err.find("blk.0.ffn_up.weight has shape [64, 95]"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("blk.1.ffn_up.weight has shape [64, 95]"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata
