// `strata tokenize` end to end: llama-tokenize's output formats, text from an argument, a file
// or standard input, the --no-bos and --no-parse-special modes against the golden ids, and
// errors for bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

class TokenizeCli : public ::testing::Test {
  protected:
    void SetUp() override { STRATA_REQUIRE_TESTDATA(); }
    static std::string model(const std::string& rel) {
        return test::shell_quote((test::testdata_dir() / rel).string());
    }
    static std::string ids_line(const nlohmann::json& ids) {
        std::string s = "[";
        for (size_t i = 0; i < ids.size(); ++i) {
            s += (i ? ", " : "") + std::to_string(ids[i].get<int>());
        }
        return s + "]\n";
    }
    static nlohmann::json golden_case(const std::string& golden, const std::string& id) {
        const auto j = nlohmann::json::parse(
            test::read_text_file(test::testdata_dir() / "golden" / "tokenizer" / golden));
        for (const auto& t : j.at("tests")) {
            if (t.at("id") == id) return t;
        }
        throw std::runtime_error("no test " + id);
    }
};

TEST_F(TokenizeCli, IdsAndPieces) {
    const std::string spm = model("vocab/ggml-vocab-llama-spm.gguf");
    auto r = test::run_strata("tokenize --ids " + spm + " 'Hello world'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[1, 15043, 3186]\n");
    EXPECT_EQ(r.err, "");
    r = test::run_strata("tokenize --ids --no-bos " + spm + " 'Hello world'");
    EXPECT_EQ(r.out, "[15043, 3186]\n");
    r = test::run_strata("tokenize " + spm + " 'Hello world'");
    EXPECT_EQ(r.out, "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n");
    r = test::run_strata("tokenize --show-count " + spm + " ''");
    EXPECT_EQ(r.out, "     1 -> '<s>'\nTotal number of tokens: 1\n");
}

// --json-lines: one JSON string per input line, one id array per output line, each tokenized
// as it would be alone; a line that is not a JSON string is an error naming it.
TEST_F(TokenizeCli, JsonLines) {
    test::TempDir tmp;
    {
        std::ofstream(tmp.file("in.jsonl"), std::ios::binary)
            << "\"Hello world\"\n\"\"\n\"a\\nb\"\n";
    }
    const std::string spm = model("vocab/ggml-vocab-llama-spm.gguf");
    auto r = test::run_strata("tokenize --json-lines --no-bos " + spm + " --file " +
                              test::shell_quote(tmp.file("in.jsonl")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto alone = [&](const std::string& text) {
        return test::run_strata("tokenize --ids --no-bos " + spm + " " + test::shell_quote(text))
            .out;
    };
    std::string want;
    for (const std::string text : {"Hello world", "", "a\nb"}) {
        std::string line = alone(text);  // "[1, 2]\n" -> "[1,2]\n"
        std::erase(line, ' ');
        want += line;
    }
    EXPECT_EQ(r.out, want);
    { std::ofstream(tmp.file("bad.jsonl"), std::ios::binary) << "\"ok\"\nnot json\n"; }
    r = test::run_strata("tokenize --json-lines " + spm + " --file " +
                         test::shell_quote(tmp.file("bad.jsonl")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("line 2 is not a JSON string"), std::string::npos) << r.err;
}

// Text from a file keeps every byte (no escapes, the trailing newline stays); both special
// modes agree with llama-tokenize.
TEST_F(TokenizeCli, FileModesMatchGolden) {
    test::TempDir tmp;
    const auto t = golden_case("vocab-llama-bpe.json", "s24");
    { std::ofstream(tmp.file("s24.txt"), std::ios::binary) << t.at("text").get<std::string>(); }
    const std::string bpe = model("vocab/ggml-vocab-llama-bpe.gguf");
    const std::string file = test::shell_quote(tmp.file("s24.txt"));
    auto r = test::run_strata("tokenize --ids " + bpe + " --file " + file);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, ids_line(t.at("ids_default")));
    r = test::run_strata("tokenize --ids --no-parse-special " + bpe + " -f " + file);
    EXPECT_EQ(r.out, ids_line(t.at("ids_no_parse_special")));
    r = test::run_strata("tokenize --ids --no-bos " + bpe + " -f " + file);
    EXPECT_EQ(r.out, ids_line(t.at("ids_no_bos")));
}

TEST_F(TokenizeCli, StandardInput) {
    test::TempDir tmp;
    const auto t = golden_case("vocab-qwen2.json", "s20");  // code with newlines
    { std::ofstream(tmp.file("in.txt"), std::ios::binary) << t.at("text").get<std::string>(); }
    const std::string pipe = "cat " + test::shell_quote(tmp.file("in.txt")) + " | " +
                             test::shell_quote(test::strata_binary()) + " tokenize --ids " +
                             model("vocab/ggml-vocab-qwen2.gguf");
    auto r = test::run_command("sh -c " + test::shell_quote(pipe + " -"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, ids_line(t.at("ids_default")));
    r = test::run_command("sh -c " + test::shell_quote(pipe + " --file -"));
    EXPECT_EQ(r.out, ids_line(t.at("ids_default")));
}

// Byte tokens that are half a character, control bytes and invalid input are escaped.
TEST_F(TokenizeCli, PiecesAreEscaped) {
    auto r = test::run_strata("tokenize --no-bos " + model("models/real/aidreams260K-F32.gguf") +
                              " \"$(printf 'a\\t\\377\\344\\275\\240')\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("'\\t'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("'\\xFF'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("'\\xE4'"), std::string::npos) << r.out;
}

TEST_F(TokenizeCli, Errors) {
    auto r = test::run_strata("tokenize /nonexistent/model.gguf hi");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("strata: "), std::string::npos);
    EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;

    const std::string spm = model("vocab/ggml-vocab-llama-spm.gguf");
    r = test::run_strata("tokenize " + spm);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--file"), std::string::npos) << r.err;

    r = test::run_strata("tokenize " + spm + " hi --file /nonexistent.txt");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.out, "");

    r = test::run_strata("tokenize " + spm + " --file /nonexistent.txt");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("cannot open /nonexistent.txt"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata
