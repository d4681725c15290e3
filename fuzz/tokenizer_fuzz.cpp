// libFuzzer target for the tokenizers. The first input byte picks a vocabulary and the options;
// the rest is the text (prompts are untrusted input: any bytes, any length). Tokenizing must never
// crash, hang or produce an id outside the vocabulary; plain-text tokens must decode back to
// exactly the input bytes (both built-in vocabularies can spell every byte); and the streaming
// decoder must only ever return valid UTF-8, equal to the whole decoded text when that is valid.
//
// One vocabulary choice instead reads the text as a GGUF file and loads its tokenizer: a
// malformed vocabulary must give an error or a tokenizer that still keeps those promises.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/merge_encoders.h"
#include "tokenizer/stream_decoder.h"
#include "util/file.h"
#include "util/utf8.h"

namespace {

using namespace strata;

#define FUZZ_CHECK(cond)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            std::fprintf(stderr, "tokenizer_fuzz: check failed at line %d: %s\n", __LINE__, \
                         #cond);                                                            \
            std::abort();                                                                   \
        }                                                                                   \
    } while (0)

GgufFile vocab_file(const std::string& model, const std::vector<std::string>& tokens,
                    const std::vector<int32_t>& types, const std::vector<float>& scores) {
    GgufFile f;
    f.metadata.push_back({"tokenizer.ggml.model", Value(model)});
    f.metadata.push_back({"tokenizer.ggml.tokens", Value(make_string_array(tokens))});
    f.metadata.push_back({"tokenizer.ggml.token_type", Value(make_i32_array(types))});
    f.metadata.push_back({"tokenizer.ggml.scores", Value(make_f32_array(scores))});
    return f;
}

// SentencePiece: byte fallback for every byte, a few pieces and control tokens.
Tokenizer make_spm() {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"};
    std::vector<int32_t> types = {2, 3, 3, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.push_back(name);
        types.push_back(6);
    }
    for (const char* piece : {"\xE2\x96\x81", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "a", "e",
                              "t", "h", "\xE4\xBD\xA0", "\xE2\x96\x81\xE2\x96\x81"}) {
        tokens.push_back(piece);
        types.push_back(1);
    }
    std::vector<float> scores(tokens.size());
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i % 7);
    GgufFile f = vocab_file("llama", tokens, types, scores);
    f.reindex();
    auto t = Tokenizer::from_gguf(f);
    FUZZ_CHECK(t.ok());
    return std::move(*t);
}

// Byte-level BPE: every byte's character is a token, plus merges and special tokens.
Tokenizer make_bpe(const char* pre) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
        tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
        types.push_back(1);
    }
    const std::string space(byte_to_unicode(' '));
    const std::vector<std::string> merges = {space + " t", "h e", space + "t he", "a b",
                                             space + " " + space};
    for (const std::string& m : merges) {
        const size_t cut = m.find(' ', 1);
        tokens.push_back(m.substr(0, cut) + m.substr(cut + 1));
        types.push_back(1);
    }
    for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
        tokens.push_back(special);
        types.push_back(3);
    }
    tokens.push_back("<tool>");
    types.push_back(4);
    GgufFile f = vocab_file("gpt2", tokens, types, std::vector<float>(tokens.size(), 0.0f));
    f.metadata.push_back({"tokenizer.ggml.merges", Value(make_string_array(merges))});
    f.metadata.push_back({"tokenizer.ggml.pre", Value(pre)});
    f.reindex();
    auto t = Tokenizer::from_gguf(f);
    FUZZ_CHECK(t.ok());
    return std::move(*t);
}

const std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
    static const auto list = [] {
        std::vector<std::unique_ptr<Tokenizer>> v;
        v.push_back(std::make_unique<Tokenizer>(make_spm()));
        for (const char* pre : {"llama-bpe", "qwen2", "gpt-2", "default", "deepseek-llm",
                                "deepseek-coder", "gpt-4o", "tekken", "chameleon", "bloom"}) {
            v.push_back(std::make_unique<Tokenizer>(make_bpe(pre)));
        }
        return v;
    }();
    return list;
}

void check(const Tokenizer& tok, std::string_view text, uint8_t flags, bool lossless) {
    const TokenizeOptions options{(flags & 1) != 0, (flags & 2) != 0};
    const std::vector<TokenId> ids = tok.tokenize(text, options);
    for (TokenId id : ids) FUZZ_CHECK(tok.vocab().contains(id));

    const std::vector<TokenId> plain = tok.tokenize(text, {false, false});
    const std::string decoded = tok.detokenize(plain);
    if (lossless) FUZZ_CHECK(decoded == text);

    StreamDecoder stream(tok, {.render_special = true, .strip_leading_space = true});
    std::string streamed;
    for (TokenId id : plain) {
        const std::string part = stream.push(id);
        FUZZ_CHECK(utf8::is_valid(part));
        streamed += part;
    }
    const std::string rest = stream.finish();
    FUZZ_CHECK(utf8::is_valid(rest));
    streamed += rest;
    if (utf8::is_valid(decoded)) FUZZ_CHECK(streamed == decoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t flags = data[0] >> 4;
    const size_t choice = data[0] & 0x0F;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto& list = tokenizers();
    if (choice < list.size()) {
        // SentencePiece reads an input "▁" as a space, the one thing it cannot give back.
        const bool lossless = choice != 0 || text.find("\xE2\x96\x81") == std::string_view::npos;
        check(*list[choice], text, flags, lossless);
        return 0;
    }
    // Otherwise the text is a GGUF file whose vocabulary is loaded.
    const MemorySource source(text.data(), text.size(), "fuzz.gguf");
    auto file = read_gguf(source);
    if (!file) return 0;
    auto tok = Tokenizer::from_gguf(*file);
    if (!tok) return 0;
    check(*tok, "Hello <s> world \xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xFF 12345", flags, false);
    return 0;
}
