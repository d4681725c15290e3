// Pre-tokenization for byte-level BPE: text is cut into pieces by a list of regular
// expressions before any merge happens, so no token ever spans two pieces. Which expressions
// depends on tokenizer.ggml.pre; each is applied to every piece left by the one before it, and
// both what it matches and the text between matches become pieces (llama.cpp's rule).
//
// The expressions are the reference's, run with PCRE2 in UTF mode with Unicode properties (JIT
// compiled when the library has it). Two translations keep the results identical to the
// reference: \s and \S become the Unicode White_Space set written out (the reference's
// definition of whitespace, which PCRE2's \s does not match exactly), and $ becomes \z (end of
// the piece, never "before a final newline").
//
// Invalid UTF-8 never stops tokenization: each byte that is not part of a well-formed sequence is
// seen by the expressions as one U+FFFD (a symbol), but the pieces keep the original bytes, so
// byte-level BPE still encodes the input without loss. (llama.cpp replaces such bytes by U+FFFD in
// the output too; for valid UTF-8 the two agree.)
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace strata {

// How one tokenizer.ggml.pre value tokenizes (from llama.cpp's table).
struct PreTokenizerRules {
    std::vector<std::string_view> names;     // the values of tokenizer.ggml.pre that select it
    std::vector<std::string_view> patterns;  // applied in order
    bool ignore_merges = false;              // a pre-token that is a token is kept whole
    bool add_bos = false;                    // default for add_bos_token when the file has none
    bool clear_bos = false;                  // the vocabulary has no BOS token (chatglm-bpe)
};

// The rules for a tokenizer.ggml.pre value, or nullptr when it is not known.
const PreTokenizerRules* find_pre_tokenizer_rules(std::string_view pre);
// Every accepted tokenizer.ggml.pre value, comma-separated, for error messages.
std::string supported_pre_tokenizers();

// A piece of the input: bytes [offset, offset + length).
struct TextSpan {
    size_t offset = 0;
    size_t length = 0;
};

class PreTokenizer {
  public:
    // Compiles the expressions for a tokenizer.ggml.pre value.
    static Result<PreTokenizer> create(std::string_view pre);

    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;
    ~PreTokenizer();

    // Replaces `pieces` with the pieces of `text`, in order; together they cover every byte of
    // the text exactly once, and none is empty. Safe to call from several threads at once.
    void split(std::string_view text, std::vector<TextSpan>& pieces) const;

    bool uses_jit() const;

  private:
    struct Compiled;
    explicit PreTokenizer(std::unique_ptr<Compiled> compiled);
    std::unique_ptr<Compiled> compiled_;
};

}  // namespace strata
