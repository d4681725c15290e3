// Regex pre-tokenization for byte-level BPE: the splits of each pre-tokenizer on strings that
// exercise its distinctive rules (expected values from the reference expressions run by an
// independent regex engine), exact coverage of arbitrary bytes, and long pathological runs.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/pretokenize.h"

namespace strata {
namespace {

std::vector<std::string> split(std::string_view pre, std::string_view text) {
    auto p = PreTokenizer::create(pre);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    if (!p) return {};
    std::vector<TextSpan> spans;
    p->split(text, spans);
    std::vector<std::string> pieces;
    for (const TextSpan& s : spans) pieces.emplace_back(text.substr(s.offset, s.length));
    return pieces;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenize, Llama3) {
    EXPECT_EQ(split("llama-bpe", "Hello world 12345 don't"),
              (Pieces{"Hello", " world", " ", "123", "45", " don", "'t"}));
    EXPECT_EQ(split("llama-bpe", "  leading\n\n  spaces   "),
              (Pieces{" ", " leading", "\n\n", " ", " spaces", "   "}));
    EXPECT_EQ(split("llama-bpe", "I'M here... ok!!\n"),
              (Pieces{"I", "'M", " here", "...", " ok", "!!\n"}));
    EXPECT_EQ(split("llama-bpe", "你好，世界"), (Pieces{"你好", "，世界"}));
    // Aliases select the same rules.
    EXPECT_EQ(split("llama3", "x  y"), split("llama-bpe", "x  y"));
}

TEST(PreTokenize, Qwen2SingleDigits) {
    EXPECT_EQ(split("qwen2", "Hello world 12345 don't"),
              (Pieces{"Hello", " world", " ", "1", "2", "3", "4", "5", " don", "'t"}));
    EXPECT_EQ(split("qwen2", "x  \ty"), (Pieces{"x", "  ", "\ty"}));
}

// Qwen3.5 keeps combining marks in words; Qwen2 cuts a word at each of them.
TEST(PreTokenize, Qwen35KeepsCombiningMarks) {
    const std::string hindi =
        "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4"
        "\xE0\xA5\x87";  // नमस्ते: the virama and the vowel sign are marks
    EXPECT_EQ(split("qwen35", hindi + " " + hindi), (Pieces{hindi, " " + hindi}));
    EXPECT_GT(split("qwen2", hindi).size(), 1u);
    const std::string cafe = "cafe\xCC\x81";  // e + U+0301 COMBINING ACUTE ACCENT
    EXPECT_EQ(split("qwen35", cafe + "!"), (Pieces{cafe, "!"}));
    EXPECT_EQ(split("qwen2", cafe + "!"), (Pieces{"cafe", "\xCC\x81!"}));
    // Otherwise as Qwen2: single digits, contractions, whitespace.
    EXPECT_EQ(split("qwen35", "Hello world 12345 don't"),
              split("qwen2", "Hello world 12345 don't"));
    EXPECT_EQ(split("qwen35", "x  \ty\n\n z"), split("qwen2", "x  \ty\n\n z"));
}

TEST(PreTokenize, Gpt2) {
    EXPECT_EQ(split("gpt-2", "Hello world 12345 don't"),
              (Pieces{"Hello", " world", " 12345", " don", "'t"}));
    EXPECT_EQ(split("gpt-2", "a  b\t c"), (Pieces{"a", " ", " b", "\t", " c"}));
}

TEST(PreTokenize, DeepSeek) {
    EXPECT_EQ(split("deepseek-llm", "Hello 你好 123 world!! "),
              (Pieces{"Hello", " ", "你好", " ", "123", " world", "!!", " "}));
    EXPECT_EQ(split("deepseek-llm", "Привет мир"), (Pieces{"Привет", " мир"}));
    EXPECT_EQ(split("deepseek-coder", "def f(x):\n  return 42"),
              (Pieces{"def", " f", "(", "x", "):", "\n", " ", " return", " ", "4", "2"}));
    EXPECT_EQ(split("deepseek-coder", "中文abc"), (Pieces{"中文", "abc"}));
    EXPECT_EQ(split("deepseek-v3", "x=12345 日本語テスト"),
              (Pieces{"x", "=", "123", "45", " ", "日本語テスト"}));
    EXPECT_EQ(split("deepseek-v3", "#define X"), (Pieces{"#define", " X"}));
}

TEST(PreTokenize, MultiStepRules) {
    EXPECT_EQ(split("default", "x=1234567; y"), (Pieces{"x", "=", "123", "456", "7", ";", " y"}));
    EXPECT_EQ(split("default", "a.b,c"), (Pieces{"a", ".", "b", ",", "c"}));
    EXPECT_EQ(split("falcon", "x=1234567; y"), (Pieces{"x", "=", "123", "456", "7", ";", " y"}));
    EXPECT_EQ(split("starcoder", "abc 2024 x"), (Pieces{"abc", " ", "2", "0", "2", "4", " x"}));
    EXPECT_EQ(split("bloom", "hello, world. ok?"),
              (Pieces{"hello", ",", " world", ".", " ok", "?"}));
    EXPECT_EQ(split("chameleon", "<sentinel:12> a  b 42!"),
              (Pieces{"<", "sentinel", ":", "1", "2", ">", " a", "  ", "b", " ", "4", "2", "!"}));
}

TEST(PreTokenize, CaseAwareWords) {
    EXPECT_EQ(split("gpt-4o", "HelloWorld don't ABCdef 12345"),
              (Pieces{"Hello", "World", " don't", " ABCdef", " ", "123", "45"}));
    EXPECT_EQ(split("gpt-4o", "a/b\n/"), (Pieces{"a", "/b", "\n", "/"}));
    // Combining marks stay in the word, and case is Unicode's (o200k as the model has it).
    const std::string hindi =
        "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4"
        "\xE0\xA5\x87";  // नमस्ते
    EXPECT_EQ(split("gpt-4o", hindi + " " + hindi), (Pieces{hindi, " " + hindi}));
    EXPECT_EQ(split("gpt-4o", "a\xC3\x89t\xC3\xA9"), (Pieces{"a", "\xC3\x89t\xC3\xA9"}));  // aÉté
    EXPECT_EQ(split("tekken", "HelloWorld ABCdef 12345"),
              (Pieces{"Hello", "World", " ABCdef", " ", "1", "2", "3", "4", "5"}));
}

// Kimi K2: o200k's words, except that a run of Han ideographs is always a piece of its own.
TEST(PreTokenize, KimiK2SeparatesHan) {
    EXPECT_EQ(split("kimi-k2", "HelloWorld don't ABCdef 12345"),
              split("gpt-4o", "HelloWorld don't ABCdef 12345"));
    // o200k keeps "在apple工作" whole (Han is a letter); Kimi cuts at each script change, and a
    // space before Han stays apart.
    EXPECT_EQ(split("gpt-4o", "我想在apple工作"), (Pieces{"我想在apple工作"}));
    EXPECT_EQ(split("kimi-k2", "我想在apple工作 你好"),
              (Pieces{"我想在", "apple", "工作", " ", "你好"}));
    // Han is the script, not the characters that Han text shares with kana (CJK punctuation).
    EXPECT_EQ(split("kimi-k2", "中文。\r\n>"), (Pieces{"中文", "。\r\n", ">"}));
    // Kana and Hangul are words as in o200k.
    EXPECT_EQ(split("kimi-k2", "日本語のテキスト"), (Pieces{"日本語", "のテキスト"}));
    EXPECT_EQ(split("kimi-k2", " 한국어"), (Pieces{" 한국어"}));
    // Marks stay in words; digits by three; punctuation runs take newlines after them.
    const std::string cafe = "cafe\xCC\x81";
    EXPECT_EQ(split("kimi-k2", cafe + " 1234!!\n\nx"),
              (Pieces{cafe, " ", "123", "4", "!!\n\n", "x"}));
}

// GLM-4.5 names Llama 3's expression "glm4", and its vocabulary has no BOS.
TEST(PreTokenize, Glm4IsLlama3) {
    EXPECT_EQ(split("glm4", "Hello world 12345 don't\n\n  x"),
              split("llama-bpe", "Hello world 12345 don't\n\n  x"));
    const PreTokenizerRules* rules = find_pre_tokenizer_rules("glm4");
    ASSERT_NE(rules, nullptr);
    EXPECT_TRUE(rules->clear_bos);
}

// \s is Unicode White_Space and $ is the end of the piece, as in the reference.
TEST(PreTokenize, WhitespaceAndEndAnchor) {
    // U+3000 IDEOGRAPHIC SPACE and U+00A0 are whitespace; U+200B ZERO WIDTH SPACE is not.
    EXPECT_EQ(split("llama-bpe",
                    "a\xE3\x80\x80\xE3\x80\x80"
                    "b"),
              (Pieces{"a", "\xE3\x80\x80",
                      "\xE3\x80\x80"
                      "b"}));
    EXPECT_EQ(split("llama-bpe",
                    "a\xE2\x80\x8B"
                    "b"),
              (Pieces{"a",
                      "\xE2\x80\x8B"
                      "b"}));
    // deepseek-llm's "\s+$" takes trailing whitespace only at the very end.
    EXPECT_EQ(split("deepseek-llm", "ab  \ncd  "), (Pieces{"ab", "  ", "\n", "cd", "  "}));
}

// Invalid bytes split like U+FFFD (a symbol) but keep their own bytes.
TEST(PreTokenize, InvalidUtf8KeepsBytes) {
    EXPECT_EQ(split("gpt-2",
                    "a\xFF"
                    "b"),
              (Pieces{"a", "\xFF", "b"}));
    EXPECT_EQ(split("llama-bpe", "ok \xC3\x28 x\xE4\xB8"),
              (Pieces{"ok", " \xC3(", " x", "\xE4\xB8"}));
}

TEST(PreTokenize, UnknownNameIsAnError) {
    auto p = PreTokenizer::create("klingon");
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("unknown pre-tokenizer 'klingon'"), std::string::npos);
    EXPECT_NE(p.error().message.find("qwen2"), std::string::npos);
}

std::vector<std::string> every_name() {
    std::vector<std::string> names;
    const std::string list = supported_pre_tokenizers();
    for (size_t pos = 0; pos < list.size();) {
        const size_t comma = list.find(", ", pos);
        names.push_back(list.substr(pos, comma - pos));
        if (comma == std::string::npos) break;
        pos = comma + 2;
    }
    return names;
}

// Pieces are non-empty, in order and cover every byte, whatever the input.
TEST(PreTokenize, PiecesCoverArbitraryBytes) {
    const std::vector<std::string> names = every_name();
    ASSERT_GE(names.size(), 40u);
    std::mt19937 rng(11);
    for (const std::string& name : names) {
        auto p = PreTokenizer::create(name);
        ASSERT_TRUE(p.ok()) << name;
        std::vector<TextSpan> spans;
        for (int round = 0; round < 50; ++round) {
            std::string text(rng() % 80, '\0');
            for (char& c : text) c = static_cast<char>(rng() % 3 == 0 ? rng() % 256 : rng() % 128);
            p->split(text, spans);
            size_t next = 0;
            for (const TextSpan& s : spans) {
                ASSERT_EQ(s.offset, next) << name;
                ASSERT_GT(s.length, 0u) << name;
                next += s.length;
            }
            ASSERT_EQ(next, text.size()) << name;
        }
    }
}

// Long runs that make backtracking engines struggle finish quickly and stay exact.
TEST(PreTokenize, LongRunsFinish) {
    const std::vector<std::string> runs = {std::string(200000, ' '), std::string(200000, 'a'),
                                           std::string(200000, '7'), std::string(200000, '!')};
    for (const char* name :
         {"llama-bpe", "qwen2", "qwen35", "gpt-2", "gpt-4o", "tekken", "deepseek-llm", "default"}) {
        auto p = PreTokenizer::create(name);
        ASSERT_TRUE(p.ok());
        std::vector<TextSpan> spans;
        for (const std::string& run : runs) {
            const auto start = std::chrono::steady_clock::now();
            p->split(run, spans);
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            size_t total = 0;
            for (const TextSpan& sp : spans) total += sp.length;
            EXPECT_EQ(total, run.size()) << name;
            EXPECT_LT(s, 5.0) << name << " on a run of '" << run[0] << "'";
        }
    }
}

}  // namespace
}  // namespace strata
