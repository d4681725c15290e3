// Text <-> token ids for a GGUF model, matching llama.cpp's llama_tokenize / llama_detokenize.
//
// Tokenizing runs in three stages:
//   1. special tokens: control, user-defined and unknown tokens written in the text are found,
//      longest first, and cut out as whole tokens (control and unknown ones only when
//      parse_special is set; user-defined ones always, as in the reference);
//   2. each remaining stretch of text is encoded by the vocabulary's algorithm: SentencePiece
//      merging of "▁"-escaped text (with a space put in front of a stretch that starts the
//      input or follows a special token), or byte-level BPE after regex pre-tokenization;
//   3. BOS and EOS are added when add_special is set and the vocabulary asks for them.
//
// A Tokenizer is immutable once loaded and may be used from several threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"
#include "util/result.h"

namespace strata {

class SpmEncoder;
class BpeEncoder;
class PreTokenizer;

struct TokenizeOptions {
    // Add BOS/EOS where the vocabulary asks for them (tokenizer.ggml.add_bos_token, ...).
    bool add_special = true;
    // Turn control-token text such as "<|im_start|>" into that token. Off for untrusted text,
    // which must not be able to forge turns.
    bool parse_special = true;
};

struct DetokenizeOptions {
    // Drop a leading BOS and a trailing EOS when the vocabulary adds them.
    bool remove_special = false;
    // Write control and unknown tokens as their text; otherwise they produce nothing.
    bool render_special = true;
};

class Tokenizer {
  public:
    static Result<Tokenizer> from_gguf(const GgufFile& file);
    // Reads only the file's metadata: no tensor data is touched, so vocabulary-only files work.
    static Result<Tokenizer> load(const std::string& path);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    const Vocab& vocab() const { return vocab_; }

    // Any bytes are accepted; invalid UTF-8 is encoded without loss (see pretokenize.h and
    // SpmEncoder for how).
    std::vector<TokenId> tokenize(std::string_view text, const TokenizeOptions& options = {}) const;

    // The bytes a token stands for, with control and unknown tokens written as their text.
    // Byte tokens give one byte, which may be part of a multi-byte character: a piece on its
    // own need not be valid UTF-8 (StreamDecoder assembles pieces into valid text).
    const std::string& piece(TokenId id) const;
    // True for control and unknown tokens, whose piece is only written on request.
    bool is_hidden(TokenId id) const;
    // piece(), or nothing for a hidden token unless render_special.
    std::string_view piece(TokenId id, bool render_special) const;

    // The text of a token sequence (raw bytes, not necessarily valid UTF-8). As in the
    // reference, a SentencePiece vocabulary's added prefix space is removed from the first
    // token, unless remove_special dropped a BOS there (the reference's quirk is kept so that
    // round trips agree with it). Out-of-range ids produce nothing.
    std::string detokenize(std::span<const TokenId> tokens,
                           const DetokenizeOptions& options = {}) const;

    bool is_end_of_generation(TokenId id) const { return vocab_.is_end_of_generation(id); }

  private:
    struct Fragment {
        TokenId token;  // kNoToken for text
        size_t offset, length;
    };

    Tokenizer();
    void partition_special(std::string_view text, bool parse_special,
                           std::vector<Fragment>& out) const;
    void build_special_trie();
    void build_pieces();

    Vocab vocab_;
    std::unique_ptr<SpmEncoder> spm_;
    std::unique_ptr<BpeEncoder> bpe_;
    std::unique_ptr<PreTokenizer> pre_;
    std::vector<std::string> pieces_;
    // Trie over the texts of vocab_.special_match_order(), to find them in one pass.
    struct TrieNode {
        std::vector<std::pair<uint8_t, uint32_t>> children;
        int32_t rank = -1;       // index in special_match_order() of the token ending here
        int32_t user_rank = -1;  // the same among user-defined tokens only
    };
    std::vector<TrieNode> special_trie_;
    std::array<bool, 256> special_first_byte_{};  // bytes that start some special text
    bool has_user_defined_ = false;
};

}  // namespace strata
