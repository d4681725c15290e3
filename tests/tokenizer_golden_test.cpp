// Tokenization against llama.cpp's outputs in the golden data: every string of
// golden/tokenizer/*.json in all three llama-tokenize modes, and the upstream test vectors
// vocab/*.gguf.inp/.out that llama.cpp's own tokenizer test uses. Decoding is checked to give
// the text back wherever the reference's would.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Loading the big vocabularies takes a moment; each file is loaded once for the whole suite.
const Tokenizer& tokenizer_for(const fs::path& path) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& slot = cache[path.string()];
    if (!slot) {
        auto loaded = Tokenizer::load(path.string());
        if (!loaded) throw std::runtime_error(loaded.error().message);
        slot = std::make_unique<Tokenizer>(std::move(*loaded));
    }
    return *slot;
}

std::vector<TokenId> ids_of(const json& j) {
    return j.get<std::vector<TokenId>>();
}

std::string show(const std::vector<TokenId>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
    return s + "]";
}

bool has_special(const Tokenizer& tok, const std::vector<TokenId>& ids) {
    for (TokenId id : ids) {
        if (tok.vocab().token(id).type == TokenType::Control) return true;
    }
    return false;
}

// Checks one golden file against one model file; returns the number of strings checked.
size_t check_golden(const fs::path& golden_path, const fs::path& model_path) {
    const Tokenizer& tok = tokenizer_for(model_path);
    const json golden = json::parse(test::read_text_file(golden_path));
    size_t checked = 0;
    for (const json& t : golden.at("tests")) {
        const std::string text = t.at("text");
        const std::string what =
            model_path.filename().string() + " " + t.at("id").get<std::string>();

        const auto by_default = tok.tokenize(text, {true, true});
        const auto no_bos = tok.tokenize(text, {false, true});
        const auto no_parse = tok.tokenize(text, {true, false});
        EXPECT_EQ(show(by_default), show(ids_of(t.at("ids_default")))) << what;
        EXPECT_EQ(show(no_bos), show(ids_of(t.at("ids_no_bos")))) << what;
        EXPECT_EQ(show(no_parse), show(ids_of(t.at("ids_no_parse_special")))) << what;

        // Plain-text tokens always decode to the text (SPM: minus the added prefix space).
        const auto plain = tok.tokenize(text, {false, false});
        EXPECT_EQ(tok.detokenize(plain), text) << what << " (plain text)";
        // With special tokens parsed the text comes back too, except that SentencePiece puts a
        // space after every special token (and keeps the first space after a BOS), as the
        // reference does.
        if (tok.vocab().kind() == VocabKind::BytePair || !has_special(tok, no_bos)) {
            EXPECT_EQ(tok.detokenize(no_bos), text) << what << " (special tokens parsed)";
        }
        ++checked;
    }
    return checked;
}

class GoldenTokenizer : public ::testing::Test {
  protected:
    void SetUp() override { STRATA_REQUIRE_TESTDATA(); }
    fs::path data(const std::string& rel) const { return test::testdata_dir() / rel; }
};

TEST_F(GoldenTokenizer, VocabLlamaSpm) {
    EXPECT_EQ(check_golden(data("golden/tokenizer/vocab-llama-spm.json"),
                           data("vocab/ggml-vocab-llama-spm.gguf")),
              27u);
}

TEST_F(GoldenTokenizer, VocabLlamaBpe) {
    EXPECT_EQ(check_golden(data("golden/tokenizer/vocab-llama-bpe.json"),
                           data("vocab/ggml-vocab-llama-bpe.gguf")),
              27u);
}

TEST_F(GoldenTokenizer, VocabQwen2) {
    EXPECT_EQ(check_golden(data("golden/tokenizer/vocab-qwen2.json"),
                           data("vocab/ggml-vocab-qwen2.gguf")),
              27u);
}

TEST_F(GoldenTokenizer, RealModelAidreams) {
    const json golden =
        json::parse(test::read_text_file(data("golden/tokenizer/model-aidreams260K.json")));
    EXPECT_EQ(check_golden(data("golden/tokenizer/model-aidreams260K.json"),
                           data(golden.at("file").get<std::string>())),
              27u);
}

// Every synthetic model carries the same 512-token vocabulary; the golden file lists them all.
TEST_F(GoldenTokenizer, SyntheticModels) {
    const fs::path golden_path = data("golden/tokenizer/model-synthetic-sp512.json");
    const json golden = json::parse(test::read_text_file(golden_path));
    ASSERT_FALSE(golden.at("files_checked").empty());
    for (const json& file : golden.at("files_checked")) {
        EXPECT_EQ(check_golden(golden_path, data(file.get<std::string>())), 27u) << file;
    }
}

// llama.cpp's test-tokenizer-0 vectors: strings separated by a marker line, one line of
// space-separated ids per string, made with add_special = false and parse_special = false.
struct UpstreamVectors {
    std::vector<std::string> inputs;
    std::vector<std::vector<TokenId>> outputs;
};

UpstreamVectors read_vectors(const fs::path& vocab) {
    UpstreamVectors v;
    const std::string inp = test::read_text_file(vocab.string() + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp.size();) {
        const size_t next = inp.find(sep, pos);
        if (next == std::string::npos) {
            v.inputs.push_back(inp.substr(pos));
            break;
        }
        v.inputs.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::istringstream out(test::read_text_file(vocab.string() + ".out"));
    for (std::string line; std::getline(out, line);) {
        std::istringstream ids(line);
        std::vector<TokenId> row;
        for (TokenId id; ids >> id;) row.push_back(id);
        v.outputs.push_back(row);
    }
    return v;
}

void check_upstream(const fs::path& vocab) {
    const UpstreamVectors v = read_vectors(vocab);
    ASSERT_GT(v.inputs.size(), 30u);
    ASSERT_EQ(v.inputs.size(), v.outputs.size());
    const Tokenizer& tok = tokenizer_for(vocab);
    const TokenId bos = tok.vocab().special().bos;
    size_t with_bos_first = 0;
    for (size_t i = 0; i < v.inputs.size(); ++i) {
        const auto ids = tok.tokenize(v.inputs[i], {false, false});
        EXPECT_EQ(show(ids), show(v.outputs[i]))
            << vocab.filename() << " #" << i << " '" << v.inputs[i] << "'";
        EXPECT_EQ(tok.detokenize(ids), v.inputs[i]) << vocab.filename() << " #" << i;
        if (!v.outputs[i].empty() && v.outputs[i][0] == bos) ++with_bos_first;
    }
    // The vectors were made without BOS although these vocabularies add one by default.
    EXPECT_EQ(with_bos_first, 0u);
}

TEST_F(GoldenTokenizer, UpstreamVectorsLlamaSpm) {
    check_upstream(data("vocab/ggml-vocab-llama-spm.gguf"));
}
TEST_F(GoldenTokenizer, UpstreamVectorsLlamaBpe) {
    check_upstream(data("vocab/ggml-vocab-llama-bpe.gguf"));
}
TEST_F(GoldenTokenizer, UpstreamVectorsQwen2) {
    check_upstream(data("vocab/ggml-vocab-qwen2.gguf"));
}

// Arbitrary bytes, mostly invalid UTF-8: tokenizing never fails and loses nothing, because
// SentencePiece falls back to byte tokens and byte-level BPE covers every byte.
TEST_F(GoldenTokenizer, ArbitraryBytesRoundTrip) {
    std::mt19937 rng(7);
    for (const char* rel : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-llama-bpe.gguf",
                            "vocab/ggml-vocab-qwen2.gguf", "models/real/aidreams260K-F32.gguf"}) {
        const Tokenizer& tok = tokenizer_for(data(rel));
        for (int round = 0; round < 200; ++round) {
            std::string bytes(rng() % 64, '\0');
            for (char& c : bytes) {
                // Bias towards UTF-8 lead and continuation bytes so that broken sequences of
                // every kind appear, mixed with ASCII and spaces.
                const uint32_t r = rng() % 4;
                c = static_cast<char>(r == 0   ? 0x80 + rng() % 0x80
                                      : r == 1 ? 0xC0 + rng() % 0x40
                                      : r == 2 ? ' '
                                               : rng() % 0x80);
            }
            const auto ids = tok.tokenize(bytes, {false, false});
            ASSERT_EQ(tok.detokenize(ids), bytes) << rel << " round " << round;
            for (TokenId id : ids) ASSERT_TRUE(tok.vocab().contains(id));
        }
    }
}

}  // namespace
}  // namespace strata
