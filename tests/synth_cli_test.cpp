// `strata synth` on the command line: presets and overrides, clear errors for impossible shapes,
// and never touching an existing file without --force.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gguf/reader.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

TEST(SynthCli, DemoCommandWritesAReadableModel) {
    test::TempDir tmp;
    const std::string out = tmp.file("demo.gguf");
    const auto r = test::run_strata("synth --preset tiny --force -o " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("21 tensors"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("GB/s"), std::string::npos) << r.out;
    auto f = read_gguf(out);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_GT(fs::file_size(out), 1000000u);
    EXPECT_LT(fs::file_size(out), 5000000u);
}

// The help names every preset on a line of its own with the whole of its description.
TEST(SynthCli, HelpListsEveryPresetWhole) {
    const auto r = test::run_strata("synth --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const auto& p : synth_presets()) {
        const std::string line = std::string(p.description) + "\n";
        EXPECT_NE(r.out.find(line), std::string::npos) << p.name << "\n" << r.out;
        const size_t at = r.out.find("  " + std::string(p.name) + " ");
        ASSERT_NE(at, std::string::npos) << p.name;
        EXPECT_EQ(r.out[at - 1], '\n') << p.name;
    }
}

TEST(SynthCli, OverridesChangeTheShape) {
    test::TempDir tmp;
    const std::string out = tmp.file("m.gguf");
    const auto r = test::run_strata(
        "synth --arch qwen3 --layers 3 --embd 128 --heads 4 --kv-heads 1 --head-dim 64 --ff 384 "
        "--ctx 1024 --type bf16 --seed 9 --threads 1 -o " +
        shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto f = read_gguf(out);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
    EXPECT_EQ(f->get_uint("qwen3.block_count"), 3u);
    EXPECT_EQ(f->get_uint("qwen3.embedding_length"), 128u);
    EXPECT_EQ(f->get_uint("qwen3.attention.head_count_kv"), 1u);
    EXPECT_EQ(f->get_uint("qwen3.attention.key_length"), 64u);
    EXPECT_EQ(f->get_uint("qwen3.feed_forward_length"), 384u);
    EXPECT_EQ(f->get_uint("qwen3.context_length"), 1024u);
    EXPECT_EQ(f->get_uint("general.file_type"), 32u);
    const TensorInfo* q = f->find_tensor("blk.2.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, TensorType::BF16);
    EXPECT_EQ(q->shape[1], 4u * 64u);
    EXPECT_NE(f->get_string("general.description")->find("seed 9"), std::string::npos);
}

TEST(SynthCli, ExpertsOverrideMakesAMoeModel) {
    test::TempDir tmp;
    const std::string out = tmp.file("m.gguf");
    const auto r =
        test::run_strata("synth --preset tiny --experts 4 --experts-used 2 -o " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto f = read_gguf(out);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->get_uint("llama.expert_count"), 4u);
    const TensorInfo* t = f->find_tensor("blk.0.ffn_down_exps.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->shape[2], 4u);
}

struct BadInvocation {
    const char* args;
    const char* message;  // part of the error a user should see
};

// Each of these must fail with a non-zero exit, say what is wrong, and write nothing.
TEST(SynthCli, ImpossibleRequestsFailClearlyAndWriteNothing) {
    const BadInvocation cases[] = {
        {"--preset nope", "unknown preset"},
        {"--arch gpt9", "unknown architecture"},
        {"--type Q9_9", "unknown tensor type"},
        {"--type IQ2_XXS", "cannot write this type"},
        {"--type Q4_K --embd 128", "is not a multiple of the Q4_K block size 256"},
        {"--heads 8 --kv-heads 3", "--kv-heads 3 does not divide --heads 8"},
        {"--heads 4 --kv-heads 8", "--kv-heads 8 does not divide --heads 4"},
        {"--embd 250", "--embd 250 is not divisible by --heads 8"},
        {"--embd 264 --heads 8 --kv-heads 2", "is odd"},
        {"--preset tiny-moe --experts-used 9", "--experts-used 9 exceeds --experts 8"},
        {"--experts-used 2", "--experts-used 2 exceeds --experts 0"},
        {"--layers 0", "--layers must be at least 1"},
        {"--embd 0", "--embd must be at least 1"},
        {"--ff 0", "--ff must be at least 1"},
        {"--preset tiny-moe --experts 8 --experts-used 0", "--experts-used must be at least 1"},
        {"--arch qwen2 --experts 4 --experts-used 2", "qwen2 has no experts"},
        {"--arch qwen3moe --experts 0", "mixture-of-experts architecture"},
        {"--ff-shexp 128", "has no shared expert"},
        {"--preset tiny-moe --ff-exp 128", "set it with --ff"},
        {"--vocab-from /nonexistent/vocab.gguf", "/nonexistent/vocab.gguf"},
        {"--layers -2", ""},
        {"--threads 5000", ""},
        {"--no-such-flag", ""},
    };
    test::TempDir tmp;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.args);
        const std::string out = tmp.file("m.gguf");
        const auto r = test::run_strata("synth " + std::string(c.args) + " -o " + shell_quote(out));
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out));
        EXPECT_FALSE(fs::exists(out + ".partial"));
    }
    // -o is required.
    const auto r = test::run_strata("synth --preset tiny");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--output"), std::string::npos) << r.err;
}

TEST(SynthCli, ExistingFileIsUntouchedWithoutForceAndReplacedWithIt) {
    test::TempDir tmp;
    const std::string out = tmp.file("precious.gguf");
    {
        std::ofstream f(out);
        f << "not a model, but mine";
    }
    auto r = test::run_strata("synth --preset tiny -o " + shell_quote(out));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
    EXPECT_EQ(test::read_text_file(out), "not a model, but mine");
    EXPECT_FALSE(fs::exists(out + ".partial"));

    // A failed write with --force (invalid shape) leaves the file alone too.
    r = test::run_strata("synth --preset tiny --layers 0 --force -o " + shell_quote(out));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(test::read_text_file(out), "not a model, but mine");

    r = test::run_strata("synth --preset tiny --force -o " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(read_gguf(out).ok());
}

TEST(SynthCli, HelpListsEveryPreset) {
    const auto r = test::run_strata("synth --help");
    EXPECT_EQ(r.exit_code, 0);
    for (const char* p : {"tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen2moe",
                          "tiny-qwen3moe", "1b", "8b", "70b", "mixtral-10g", "qwen3moe-30b-a3b",
                          "tiny-glm4moe", "glm-4.5", "glm-4.5-air"}) {
        EXPECT_NE(r.out.find(std::string("  ") + p + " "), std::string::npos) << p;
    }
}

}  // namespace
}  // namespace strata
