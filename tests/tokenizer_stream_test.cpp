// Streaming detokenization: characters split across pushes are held back until complete,
// invalid bytes become U+FFFD the same way however the bytes are split, nothing invalid is ever
// returned, and token-by-token decoding of real vocabularies gives the whole-sequence text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/stream_decoder.h"
#include "util/utf8.h"

namespace strata {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokenizerStream, SplitCharactersAreHeldBack) {
    Utf8Assembler a;
    EXPECT_EQ(a.push("x\xC3"), "x");
    EXPECT_EQ(a.pending_bytes(), 1u);
    EXPECT_EQ(a.push("\xA9"), "\xC3\xA9");  // é
    // A four-byte emoji one byte at a time.
    EXPECT_EQ(a.push("\xF0"), "");
    EXPECT_EQ(a.push("\x9F"), "");
    EXPECT_EQ(a.push("\xA6"), "");
    EXPECT_EQ(a.push("\x99!"), "\xF0\x9F\xA6\x99!");  // 🦙
    EXPECT_EQ(a.pending_bytes(), 0u);
    EXPECT_EQ(a.finish(), "");
}

TEST(TokenizerStream, InvalidBytesBecomeReplacementCharacters) {
    Utf8Assembler a;
    EXPECT_EQ(a.push("\xFF"), kFffd);
    // An unfinished sequence interrupted by ASCII: one U+FFFD for its maximal subpart.
    EXPECT_EQ(a.push("\xE4\xB8"), "");
    EXPECT_EQ(a.push("A"), kFffd + "A");
    // Overlong form and surrogate: each byte is its own invalid subpart.
    EXPECT_EQ(a.push("\xC0\xAF"), kFffd + kFffd);
    EXPECT_EQ(a.push("\xED\xA0\x80"), kFffd + kFffd + kFffd);
    EXPECT_EQ(a.push("\xF0\x80\x80"
                     "A"),
              kFffd + kFffd + kFffd + "A");
    // Still unfinished at the end of the stream.
    EXPECT_EQ(a.push("\xF0\x9F\x98"), "");
    EXPECT_EQ(a.finish(), kFffd);
    EXPECT_EQ(a.pending_bytes(), 0u);
}

std::string assemble(const std::vector<std::string>& parts, bool check_each) {
    Utf8Assembler a;
    std::string out;
    for (const std::string& p : parts) {
        const std::string text = a.push(p);
        if (check_each) {
            EXPECT_TRUE(utf8::is_valid(text));
        }
        out += text;
    }
    return out + a.finish();
}

// The output depends on the bytes only, never on where the stream was cut, and is valid.
TEST(TokenizerStream, OutputIndependentOfSplitPoints) {
    std::mt19937 rng(3);
    std::vector<std::string> samples = {
        "plain ascii",
        "\xC3\xA9t\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
        "bad \xFF\xFE mid \xE4\xB8 end \xF0\x9F",
        "\xED\xA0\x80\xC0\x80\xF4\x90\x80\x80\xE0\x9F\xBF"};
    for (int i = 0; i < 300; ++i) {
        std::string s(rng() % 24, '\0');
        for (char& c : s) c = static_cast<char>(rng() % 2 ? 0x80 + rng() % 0x80 : rng() % 0x80);
        samples.push_back(s);
    }
    for (const std::string& s : samples) {
        const std::string whole = assemble({s}, true);
        EXPECT_TRUE(utf8::is_valid(whole));
        if (utf8::is_valid(s)) {
            EXPECT_EQ(whole, s);
        }
        std::vector<std::string> bytes;
        for (char c : s) bytes.emplace_back(1, c);
        EXPECT_EQ(assemble(bytes, true), whole);
        for (size_t cut = 0; cut <= s.size(); ++cut) {
            ASSERT_EQ(assemble({s.substr(0, cut), s.substr(cut)}, true), whole) << cut;
        }
    }
}

// Real vocabularies, token by token: the 512-token SentencePiece vocabulary spells CJK and
// emoji with byte tokens, byte-level BPE splits them across tokens.
TEST(TokenizerStream, TokenByTokenMatchesWholeText) {
    STRATA_REQUIRE_TESTDATA();
    const auto dir = test::testdata_dir();
    const auto strings = nlohmann::json::parse(
        test::read_text_file(dir / "inputs" / "tokenizer_strings_shared.json"));
    for (const char* rel : {"models/real/aidreams260K-F32.gguf", "vocab/ggml-vocab-llama-bpe.gguf",
                            "vocab/ggml-vocab-qwen2.gguf", "vocab/ggml-vocab-llama-spm.gguf"}) {
        auto tok = Tokenizer::load((dir / rel).string());
        ASSERT_TRUE(tok.ok()) << tok.error().message;
        size_t held_back = 0;
        for (const auto& entry : strings) {
            const std::string text = entry.at("text");
            const auto ids = tok->tokenize(text, {false, false});
            StreamDecoder d(*tok, {.render_special = true, .strip_leading_space = true});
            std::string streamed;
            for (TokenId id : ids) {
                const std::string part = d.push(id);
                ASSERT_TRUE(utf8::is_valid(part)) << rel;
                if (part.empty() && d.pending_bytes() > 0) ++held_back;
                streamed += part;
            }
            streamed += d.finish();
            EXPECT_EQ(streamed, text) << rel << " " << entry.at("id");
        }
        if (std::string(rel).find("aidreams") != std::string::npos) {
            EXPECT_GT(held_back, 20u) << "byte tokens should have split characters";
        }
    }
}

// Control tokens are left out of generated text unless asked for.
TEST(TokenizerStream, ControlTokensHiddenByDefault) {
    STRATA_REQUIRE_TESTDATA();
    auto tok = Tokenizer::load((test::testdata_dir() / "vocab/ggml-vocab-qwen2.gguf").string());
    ASSERT_TRUE(tok.ok());
    const auto ids = tok->tokenize("<|im_start|>user\nhi<|im_end|>");
    ASSERT_EQ(ids.front(), tok->vocab().find("<|im_start|>"));
    std::string hidden, shown;
    StreamDecoder plain(*tok);
    StreamDecoder special(*tok, {.render_special = true});
    for (TokenId id : ids) {
        hidden += plain.push(id);
        shown += special.push(id);
    }
    EXPECT_EQ(hidden + plain.finish(), "user\nhi");
    EXPECT_EQ(shown + special.finish(), "<|im_start|>user\nhi<|im_end|>");
    EXPECT_TRUE(tok->is_end_of_generation(ids.back()));
}

}  // namespace
}  // namespace strata
