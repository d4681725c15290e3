// The two merge algorithms behind Tokenizer (internal to session/). Both start from one symbol
// per character and repeatedly merge the best adjacent pair, as llama.cpp's bigram priority
// queues do; they differ in what "best" means and in what happens to leftovers.
//
// Neither keeps a pointer to the vocabulary: the Tokenizer that owns them passes it in, so the
// Tokenizer can be moved freely.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_hash.h"
#include "tokenizer/vocab.h"

namespace strata {

// SentencePiece-style: the adjacent pair whose concatenation is the highest-scoring token
// merges first (ties: leftmost). A final symbol that is not a token is written as byte-fallback
// tokens <0xNN>, else as the token whose text is that single byte, else as the unknown token.
class SpmEncoder {
  public:
    explicit SpmEncoder(const Vocab& vocab);

    // `text` is already escaped: spaces replaced by U+2581 "▁", the prefix space added. Invalid
    // UTF-8 bytes are symbols of their own (and so end up as byte tokens).
    void encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) const;

  private:
    std::array<TokenId, 256> byte_tokens_{};  // kNoToken when a byte cannot be represented
};

// GPT-2's reversible byte <-> character map: printable bytes stand for themselves, the others
// for U+0100 onwards. Byte-level vocabularies store token texts in this form.
std::string_view byte_to_unicode(uint8_t byte);  // UTF-8 of the character for `byte`
int unicode_to_byte(char32_t cp);                // the byte, or -1 for other characters

// Working memory for BpeEncoder::encode, reused across pieces.
struct BpeScratch {
    struct Symbol {
        int32_t id;              // merge-table symbol (see BpeEncoder), -1 when the text is unknown
        uint32_t start, length;  // bytes of the encoded word
        int32_t prev, next;
    };
    struct Pair {
        int32_t rank;
        int32_t left, right;        // symbol indexes
        int32_t left_id, right_id;  // their ids when queued, to skip stale pairs
        int32_t result;             // id of the merged symbol
    };
    std::string word;
    std::vector<Symbol> symbols;
    std::vector<Pair> queue;
};

// Byte-level BPE: the adjacent pair with the lowest merge rank merges first (ties: leftmost).
// Every string that occurs in a merge gets a symbol id (a token id when it is a token, an id past
// the vocabulary otherwise), so merging compares integers, not strings, and gives the same result
// as comparing the texts.
class BpeEncoder {
  public:
    static BpeEncoder build(const Vocab& vocab);

    // Encodes one pre-token (raw bytes). A final symbol that is not a token is written byte by
    // byte as tokens whose text is that single (encoded) byte, where they exist (llama.cpp's rule).
    void encode(const Vocab& vocab, std::string_view piece, std::vector<TokenId>& out,
                BpeScratch& scratch) const;

  private:
    struct Merge {
        int32_t rank;
        int32_t result;
    };
    struct TextHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };

    int32_t symbol_id(const Vocab& vocab, std::string_view text) const;
    void push_pair(BpeScratch& s, int32_t left, int32_t right) const;

    int32_t n_vocab_ = 0;
    std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> extra_symbols_;
    PairTable<Merge> merges_;  // (left id, right id) -> merge
    std::array<int32_t, 256> byte_symbols_{};
};

}  // namespace strata
