// Vocabulary loading and the tokenizer's rules on small hand-made vocabularies, where each
// expected id follows from one rule: defaults and overrides of the tokenizer.ggml.* keys, errors
// for unsupported or inconsistent files, merge order (SPM by score, BPE by rank), byte
// fallback, special-token matching, end-of-generation tokens and detokenization.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/merge_encoders.h"
#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace strata {
namespace {

struct TokenSpec {
    std::string text;
    float score = 0.0f;
    TokenType type = TokenType::Normal;
};

// A GGUF file with only tokenizer metadata, as a vocabulary-only file has.
class VocabFile {
  public:
    VocabFile(std::string model, const std::vector<TokenSpec>& tokens) {
        set("tokenizer.ggml.model", Value(std::move(model)));
        std::vector<std::string> texts;
        std::vector<float> scores;
        std::vector<int32_t> types;
        for (const TokenSpec& t : tokens) {
            texts.push_back(t.text);
            scores.push_back(t.score);
            types.push_back(static_cast<int32_t>(t.type));
        }
        set("tokenizer.ggml.tokens", Value(make_string_array(texts)));
        set("tokenizer.ggml.scores", Value(make_f32_array(scores)));
        set("tokenizer.ggml.token_type", Value(make_i32_array(types)));
    }
    VocabFile& set(const std::string& key, Value value) {
        for (MetadataEntry& e : file_.metadata) {
            if (e.key == key) {
                e.value = std::move(value);
                return *this;
            }
        }
        file_.metadata.push_back({key, std::move(value)});
        return *this;
    }
    VocabFile& merges(const std::vector<std::string>& m) {
        return set("tokenizer.ggml.merges", Value(make_string_array(m)));
    }
    const GgufFile& file() {
        file_.reindex();
        return file_;
    }
    Tokenizer tokenizer() {
        auto t = Tokenizer::from_gguf(file());
        if (!t) throw std::runtime_error(t.error().message);
        return std::move(*t);
    }
    std::string error() {
        auto t = Tokenizer::from_gguf(file());
        return t ? std::string("(loaded)") : t.error().message;
    }

  private:
    GgufFile file_;
};

constexpr TokenType kNormal = TokenType::Normal;
constexpr TokenType kControl = TokenType::Control;
constexpr TokenType kUser = TokenType::UserDefined;
constexpr TokenType kByte = TokenType::Byte;
constexpr TokenType kUnknown = TokenType::Unknown;

// ids:                  0        1      2       3         4         5         6
std::vector<TokenSpec> spm_tokens(float ab_score = -2.0f) {
    return {{"<unk>", 0, kUnknown},
            {"<s>", 0, kControl},
            {"</s>", 0, kControl},
            {"<0x7A>", 0, kByte},
            {"<0xC3>", 0, kByte},
            {"<0xA9>", 0, kByte},
            {"▁", -5},         // 6 "▁"
            {"a", -1},         // 7
            {"b", -1},         // 8
            {"c", -1},         // 9
            {"ab", ab_score},  // 10
            {"bc", -1.5f},     // 11
            {"▁"
             "a",
             -3},                        // 12 "▁a"
            {"<a>", 0, kControl},        // 13
            {"<a><b>", 0, kControl},     // 14
            {"xyz", 0, kUser},           // 15
            {"q", -1},                   // 16
            {"<|user|>", 0, kControl}};  // 17
}

const TokenizeOptions kPlain{false, true};  // no BOS/EOS, special tokens parsed

TEST(TokenizerVocab, SentencePieceDefaults) {
    VocabFile f("llama", spm_tokens());
    const Tokenizer t = f.tokenizer();
    const Vocab& v = t.vocab();
    EXPECT_EQ(v.kind(), VocabKind::SentencePiece);
    EXPECT_EQ(v.special().bos, 1);
    EXPECT_EQ(v.special().eos, 2);
    EXPECT_EQ(v.special().unk, 0);
    EXPECT_TRUE(v.add_bos());
    EXPECT_FALSE(v.add_eos());
    EXPECT_TRUE(v.add_space_prefix());
    EXPECT_EQ(t.tokenize("q"), (std::vector<TokenId>{1, 6, 16}));

    f.set("tokenizer.ggml.add_bos_token", Value(false))
        .set("tokenizer.ggml.add_eos_token", Value(true))
        .set("tokenizer.ggml.add_space_prefix", Value(false));
    const Tokenizer t2 = f.tokenizer();
    EXPECT_EQ(t2.tokenize("q"), (std::vector<TokenId>{16, 2}));
}

TEST(TokenizerVocab, UnsupportedAndBrokenFilesAreClearErrors) {
    for (const char* model : {"bert", "t5", "rwkv"}) {
        const std::string e = VocabFile(model, spm_tokens()).error();
        EXPECT_NE(e.find(std::string("'") + model + "'"), std::string::npos) << e;
        EXPECT_NE(e.find("not supported yet"), std::string::npos) << e;
        EXPECT_NE(e.find("'gpt2'"), std::string::npos) << e;
    }
    EXPECT_NE(VocabFile("sentencepiece2", spm_tokens()).error().find("unknown tokenizer model"),
              std::string::npos);

    GgufFile empty;
    empty.reindex();
    auto none = Tokenizer::from_gguf(empty);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("tokenizer.ggml.model is missing"), std::string::npos);

    VocabFile short_scores("llama", spm_tokens());
    short_scores.set("tokenizer.ggml.scores", Value(make_f32_array({0.0f, 1.0f})));
    EXPECT_NE(short_scores.error().find("tokenizer.ggml.scores has 2 entries but "
                                        "tokenizer.ggml.tokens has 18"),
              std::string::npos)
        << short_scores.error();

    VocabFile no_merges("gpt2", {{"a"}, {"b"}});
    no_merges.set("tokenizer.ggml.pre", Value("gpt-2"));
    EXPECT_NE(no_merges.error().find("tokenizer.ggml.merges is missing"), std::string::npos);

    VocabFile bad_pre("gpt2", {{"a"}, {"b"}});
    bad_pre.merges({"a b"}).set("tokenizer.ggml.pre", Value("klingon"));
    EXPECT_NE(bad_pre.error().find("unknown pre-tokenizer 'klingon'"), std::string::npos);
}

TEST(TokenizerVocab, SpecialIdsFromMetadata) {
    VocabFile f("llama", spm_tokens());
    f.set("tokenizer.ggml.bos_token_id", Value(uint32_t{13}))
        .set("tokenizer.ggml.eos_token_id", Value(uint32_t{99}))
        .set("tokenizer.ggml.padding_token_id", Value(uint32_t{0xFFFFFFFF}))
        .set("tokenizer.ggml.seperator_token_id", Value(uint32_t{14}));
    const Tokenizer t = f.tokenizer();
    EXPECT_EQ(t.vocab().special().bos, 13);
    EXPECT_EQ(t.vocab().special().eos, 2);  // out of range: the default stays
    EXPECT_EQ(t.vocab().special().pad, kNoToken);
    EXPECT_EQ(t.vocab().special().sep, 14);
    ASSERT_EQ(t.vocab().warnings().size(), 1u);  // 0xFFFFFFFF means "none", no warning
    EXPECT_NE(t.vocab().warnings()[0].find("eos_token_id = 99"), std::string::npos);
}

// Highest score first; the merged pair "▁a" only forms once "bc" has taken the "b".
TEST(TokenizerSpm, MergesByScore) {
    const Tokenizer t = VocabFile("llama", spm_tokens()).tokenizer();
    EXPECT_EQ(t.tokenize("abc", kPlain), (std::vector<TokenId>{12, 11}));
    // With "ab" and "bc" equally good, the leftmost pair wins.
    const Tokenizer tie = VocabFile("llama", spm_tokens(-1.5f)).tokenizer();
    EXPECT_EQ(tie.tokenize("abc", kPlain), (std::vector<TokenId>{6, 10, 9}));
}

TEST(TokenizerSpm, ByteFallbackThenUnknown) {
    const Tokenizer t = VocabFile("llama", spm_tokens()).tokenizer();
    EXPECT_EQ(t.tokenize("z", kPlain), (std::vector<TokenId>{6, 3}));            // <0x7A>
    EXPECT_EQ(t.tokenize("\xC3\xA9", kPlain), (std::vector<TokenId>{6, 4, 5}));  // é as bytes
    EXPECT_EQ(t.tokenize("y", kPlain), (std::vector<TokenId>{6, 0}));            // no byte token
    EXPECT_EQ(t.detokenize(std::vector<TokenId>{6, 4, 5}), "\xC3\xA9");
}

TEST(TokenizerSpecialTokens, LongestFirstAndUserDefinedAlways) {
    const Tokenizer t = VocabFile("llama", spm_tokens()).tokenizer();
    // "<a><b>" wins over "<a>" at the same place; text after a special token gets "▁".
    EXPECT_EQ(t.tokenize("<a><b>q<a>xyz", kPlain), (std::vector<TokenId>{14, 6, 16, 13, 15}));
    // Without parse_special control tokens are text, user-defined ones still match.
    const auto plain = t.tokenize("<a><b>q<a>xyz", {false, false});
    ASSERT_FALSE(plain.empty());
    EXPECT_EQ(plain.back(), 15);
    for (TokenId id : plain) {
        EXPECT_NE(id, 13);
        EXPECT_NE(id, 14);
    }
}

// llama.cpp drops whitespace after special tokens of Phi-3 models (it knows them by name).
TEST(TokenizerSpecialTokens, RightStripForPhi3) {
    VocabFile f("llama", spm_tokens());
    EXPECT_EQ(f.tokenizer().tokenize("<|user|>  q", kPlain),
              (std::vector<TokenId>{17, 6, 6, 6, 16}));
    f.set("general.name", Value("Phi-3-mini-4k-instruct"));
    EXPECT_EQ(f.tokenizer().tokenize("<|user|>  q", kPlain), (std::vector<TokenId>{17, 6, 16}));
}

// Byte-level tokens: "Ġ" is the space.
std::vector<TokenSpec> bpe_tokens() {
    return {{"a"},
            {"b"},
            {"c"},
            {"ab"},
            {"bc"},
            {"abc"},
            {"\xC4\xA0"},  // 6 "Ġ"
            {"\xC4\xA0"
             "a"},                             // 7 "Ġa"
            {"<|im_end|>"},                    // 8, normal!
            {"<|im_start|>", 0, kControl},     // 9
            {"<|end_of_text|>", 0, kControl},  // 10
            {"<|endoftext|>", 0, kUser}};      // 11
}

std::vector<TokenId> bpe_ids(const std::vector<std::string>& merges, const char* pre,
                             std::string_view text) {
    VocabFile f("gpt2", bpe_tokens());
    f.merges(merges).set("tokenizer.ggml.pre", Value(pre));
    return f.tokenizer().tokenize(text, kPlain);
}

// GPT-2's byte map: printable Latin-1 stands for itself, the other 68 bytes for U+0100...U+0143.
TEST(TokenizerBpe, ByteToUnicodeMap) {
    EXPECT_EQ(byte_to_unicode('a'), "a");
    EXPECT_EQ(byte_to_unicode(0x00), "\xC4\x80");  // U+0100
    EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // U+0120 "Ġ"
    EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // U+010A "Ċ"
    EXPECT_EQ(byte_to_unicode(0xAD), "\xC5\x83");  // U+0143, the last one
    EXPECT_EQ(byte_to_unicode(0xE9), "\xC3\xA9");  // é itself
    for (int b = 0; b < 256; ++b) {
        const std::string_view s = byte_to_unicode(static_cast<uint8_t>(b));
        const utf8::Decoded d = utf8::decode(s, 0);
        ASSERT_TRUE(d.valid && d.len == s.size());
        EXPECT_EQ(unicode_to_byte(d.cp), b);
    }
    EXPECT_EQ(unicode_to_byte(0x144), -1);
    EXPECT_EQ(unicode_to_byte(' '), -1);  // the space is spelled U+0120
}

TEST(TokenizerBpe, MergesByRank) {
    EXPECT_EQ(bpe_ids({"b c", "a b"}, "gpt-2", "abc"), (std::vector<TokenId>{0, 4}));
    EXPECT_EQ(bpe_ids({"a b", "b c"}, "gpt-2", "abc"), (std::vector<TokenId>{3, 2}));
    EXPECT_EQ(bpe_ids({"b c", "a b", "a bc"}, "gpt-2", "abc"), (std::vector<TokenId>{5}));
    // Merges apply inside pre-tokens only: " a" is one piece, "b" another.
    EXPECT_EQ(bpe_ids({"\xC4\xA0 a", "a b"}, "gpt-2", " a,b"),
              (std::vector<TokenId>{7, /* "," is not a token */ 1}));
}

TEST(TokenizerBpe, IgnoreMergesKeepsWholeTokens) {
    // No merge builds "abc", but Llama 3's rules take a pre-token that is a token as it is.
    EXPECT_EQ(bpe_ids({}, "llama-bpe", "abc"), (std::vector<TokenId>{5}));
    EXPECT_EQ(bpe_ids({}, "gpt-2", "abc"), (std::vector<TokenId>{0, 1, 2}));
}

TEST(TokenizerBpe, DefaultsFollowThePreTokenizer) {
    auto with_pre = [](const char* pre) {
        VocabFile f("gpt2", bpe_tokens());
        f.merges({"a b"}).set("tokenizer.ggml.pre", Value(pre));
        return f.tokenizer();
    };
    EXPECT_TRUE(with_pre("llama-bpe").vocab().add_bos());
    EXPECT_TRUE(with_pre("llama-bpe").vocab().ignore_merges());
    EXPECT_TRUE(with_pre("gpt-4o").vocab().ignore_merges());  // as tiktoken (o200k) does
    EXPECT_FALSE(with_pre("gpt-4o").vocab().add_bos());
    EXPECT_FALSE(with_pre("qwen2").vocab().add_bos());
    EXPECT_EQ(with_pre("qwen2").vocab().special().bos, 11);  // llama.cpp's BPE default
    EXPECT_EQ(with_pre("chatglm-bpe").vocab().special().bos, kNoToken);
    // A file without tokenizer.ggml.pre gets the default rules, with a warning.
    VocabFile f("gpt2", bpe_tokens());
    f.merges({"a b"});
    const Tokenizer t = f.tokenizer();
    EXPECT_EQ(t.vocab().pre_tokenizer(), "default");
    EXPECT_EQ(t.vocab().warnings().size(), 1u);
}

TEST(TokenizerEndOfGeneration, ByIdsAndKnownTexts) {
    VocabFile f("gpt2", bpe_tokens());
    f.merges({"a b"})
        .set("tokenizer.ggml.pre", Value("qwen2"))
        .set("tokenizer.ggml.eos_token_id", Value(uint32_t{10}));
    const Tokenizer t = f.tokenizer();
    const Vocab& v = t.vocab();
    // <|im_end|> (first known end-of-turn text by id) becomes the EOT token and a control
    // token, so plain text can no longer produce it.
    EXPECT_EQ(v.special().eot, 8);
    EXPECT_EQ(v.token(8).type, TokenType::Control);
    EXPECT_EQ(v.end_of_generation(), (std::vector<TokenId>{8, 10, 11}));
    EXPECT_TRUE(t.is_end_of_generation(11));
    EXPECT_FALSE(t.is_end_of_generation(9));
    EXPECT_EQ(t.tokenize("a<|im_end|>", kPlain), (std::vector<TokenId>{0, 8}));
    EXPECT_NE(t.tokenize("a<|im_end|>", {false, false}), (std::vector<TokenId>{0, 8}));
}

// gpt-oss (Harmony): a reply is several messages each closed by <|end|>; only <|return|> and
// <|call|> end the turn, and the framing tokens come out as text for the reply parser.
TEST(TokenizerEndOfGeneration, HarmonyTurnEnds) {
    auto harmony = [](bool with_call) {
        std::vector<TokenSpec> tokens = {{"a"},
                                         {"<|start|>", 0, kControl},
                                         {"<|channel|>", 0, kControl},
                                         {"<|message|>", 0, kControl},
                                         {"<|end|>", 0, kControl},
                                         {"<|return|>", 0, kControl},
                                         {"<|constrain|>", 0, kControl}};
        if (with_call) tokens.push_back({"<|call|>", 0, kControl});
        VocabFile f("gpt2", tokens);
        f.merges({}).set("tokenizer.ggml.pre", Value("gpt-4o"));
        return f.tokenizer();
    };
    const Tokenizer t = harmony(true);
    EXPECT_EQ(t.vocab().end_of_generation(), (std::vector<TokenId>{5, 7}));
    for (TokenId id : {1, 2, 3, 4, 6}) {
        EXPECT_EQ(t.vocab().token(id).type, TokenType::UserDefined) << id;
        EXPECT_FALSE(t.is_hidden(id)) << id;
    }
    EXPECT_TRUE(t.is_hidden(5));
    // Without <|call|> it is not Harmony, and <|end|> keeps ending generation (Phi-3).
    EXPECT_EQ(harmony(false).vocab().end_of_generation(), (std::vector<TokenId>{4, 5}));
}

// Kimi K2 and DeepSeek V3 type their tool-call framing (and Kimi its <think> tags) as control
// tokens; they come out as text for the reply parser. [EOT] and [EOS] end generation (Kimi).
TEST(TokenizerEndOfGeneration, ToolCallMarkupIsText) {
    const std::string deepseek_calls = "<｜tool▁calls▁begin｜>";
    VocabFile f("gpt2", {{"a"},
                         {"<|tool_calls_section_begin|>", 0, kControl},
                         {"<|tool_call_argument_begin|>", 0, kControl},
                         {"<think>", 0, kControl},
                         {deepseek_calls, 0, kControl},
                         {"<|im_end|>", 0, kControl},
                         {"[EOS]", 0, kControl},
                         {"[EOT]", 0, kControl}});
    f.merges({}).set("tokenizer.ggml.pre", Value("kimi-k2"));
    const Tokenizer t = f.tokenizer();
    for (TokenId id : {1, 2, 3, 4}) {
        EXPECT_EQ(t.vocab().token(id).type, TokenType::UserDefined) << id;
        EXPECT_FALSE(t.is_hidden(id)) << id;
    }
    EXPECT_EQ(t.vocab().end_of_generation(), (std::vector<TokenId>{5, 6, 7}));
}

// GLM-4.5 names its fill-in-the-middle tokens <|code_prefix|>, <|code_suffix|>, <|code_middle|>.
TEST(TokenizerSpecialTokens, GlmFillInTheMiddle) {
    VocabFile f("gpt2", {{"a"},
                         {"<|code_prefix|>", 0, kControl},
                         {"<|code_suffix|>", 0, kControl},
                         {"<|code_middle|>", 0, kControl}});
    f.merges({}).set("tokenizer.ggml.pre", Value("glm4"));
    const Tokenizer t = f.tokenizer();
    EXPECT_EQ(t.vocab().special().fim_pre, 1);
    EXPECT_EQ(t.vocab().special().fim_suf, 2);
    EXPECT_EQ(t.vocab().special().fim_mid, 3);
}

TEST(TokenizerDetokenize, PiecesAndLeadingSpace) {
    const Tokenizer t = VocabFile("llama", spm_tokens()).tokenizer();
    const std::vector<TokenId> ids = {1, 12, 11};  // <s> ▁a bc
    EXPECT_EQ(t.detokenize(std::vector<TokenId>{12, 11}), "abc");
    EXPECT_EQ(t.detokenize(ids), "<s> abc");
    // The reference keeps the space when it removes the BOS; kept for identical round trips.
    EXPECT_EQ(t.detokenize(ids, {.remove_special = true, .render_special = true}), " abc");
    EXPECT_EQ(t.detokenize(ids, {.remove_special = false, .render_special = false}), " abc");
    // Control and unknown tokens are hidden on request; user-defined ones are text.
    EXPECT_EQ(t.piece(0, false), "");
    EXPECT_EQ(t.piece(15, false), "xyz");
    EXPECT_EQ(t.piece(3), "z");
    EXPECT_EQ(t.detokenize(std::vector<TokenId>{7, 9999, 9}), "ac");  // unknown ids: nothing

    VocabFile b("gpt2", bpe_tokens());
    b.merges({"a b"}).set("tokenizer.ggml.pre", Value("gpt-2"));
    const Tokenizer bt = b.tokenizer();
    EXPECT_EQ(bt.piece(7), " a");
    EXPECT_EQ(bt.detokenize(std::vector<TokenId>{7, 3}), " aab");  // no space stripping
}

TEST(TokenizerVocab, DuplicateAndEmptyTexts) {
    const Tokenizer t = VocabFile("llama", {{"<unk>", 0, kUnknown},
                                            {"<s>", 0, kControl},
                                            {"</s>", 0, kControl},
                                            {"a", -1},
                                            {"a", -2},
                                            {""}})
                            .tokenizer();
    EXPECT_EQ(t.vocab().find("a"), 4);
    EXPECT_EQ(t.vocab().token(5).text, "[EMPTY_5]");
    EXPECT_EQ(t.vocab().warnings().size(), 2u);
}

}  // namespace
}  // namespace strata
