// A tokenizer vocabulary as GGUF metadata describes it (the tokenizer.ggml.* keys): token texts,
// scores and types, BPE merges, special token ids and the flags that decide how text is turned
// into tokens. Loading follows llama.cpp (the reference implementation) including its defaults
// and its fix-ups, so that token ids match it exactly; where it differs, the comment says so.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/flat_hash.h"
#include "util/result.h"

namespace strata {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,      // <s>, <|im_start|>: never produced from plain text, rendered only on request
    UserDefined = 4,  // added tokens that always match as a whole, even in plain text
    Unused = 5,
    Byte = 6,  // SentencePiece byte fallback <0xNN>
};

std::string_view token_type_name(TokenType t);

// tokenizer.ggml.model: "llama" is SentencePiece-style (score-driven merges over "▁"-escaped
// text, byte fallback), "gpt2" is byte-level BPE (ranked merges after regex pre-tokenization).
enum class VocabKind { SentencePiece, BytePair };

struct TokenInfo {
    std::string text;
    float score = 0.0f;
    TokenType type = TokenType::Normal;
    // Whitespace next to this special token is dropped when it is found in text (llama.cpp sets
    // these for a few model families by name; GGUF has no key for them).
    bool lstrip = false;
    bool rstrip = false;
};

struct SpecialTokenIds {
    TokenId bos = kNoToken;
    TokenId eos = kNoToken;
    TokenId eot = kNoToken;  // end of turn
    TokenId eom = kNoToken;  // end of message (tool call follows)
    TokenId unk = kNoToken;
    TokenId pad = kNoToken;
    TokenId sep = kNoToken;
    TokenId mask = kNoToken;
    TokenId fim_pre = kNoToken;
    TokenId fim_suf = kNoToken;
    TokenId fim_mid = kNoToken;
    TokenId fim_pad = kNoToken;
    TokenId fim_rep = kNoToken;
    TokenId fim_sep = kNoToken;
};

class Vocab {
  public:
    // Reads the tokenizer.ggml.* keys. Fails with an actionable message when the tokenizer
    // model is not supported (bert, t5, rwkv, ...), the pre-tokenizer is unknown, or the arrays
    // are missing, of the wrong type or of inconsistent lengths.
    static Result<Vocab> from_gguf(const GgufFile& file);

    VocabKind kind() const { return kind_; }
    // "llama" or "gpt2", as in the file.
    const std::string& model_name() const { return model_name_; }
    // Pre-tokenizer name for BPE vocabularies ("default" when the file has none); empty for SPM.
    const std::string& pre_tokenizer() const { return pre_; }

    size_t size() const { return tokens_.size(); }
    bool contains(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < tokens_.size(); }
    const TokenInfo& token(TokenId id) const { return tokens_[static_cast<size_t>(id)]; }
    // Token whose text is exactly `text`, or kNoToken. With duplicate texts the highest id wins.
    TokenId find(std::string_view text) const;

    const SpecialTokenIds& special() const { return special_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // SPM: a space is put in front of text that starts the input or follows a special token.
    bool add_space_prefix() const { return add_space_prefix_; }
    // BPE (Llama 3 style): a pre-token that is itself a token is not merged further.
    bool ignore_merges() const { return ignore_merges_; }

    // Tokens that end generation: EOS, EOT, EOM, FIM pad/repo/separator, and every token whose
    // text is a known end-of-turn marker (<|im_end|>, <|eot_id|>, <end_of_turn>, ...). Sorted.
    const std::vector<TokenId>& end_of_generation() const { return eog_; }
    bool is_end_of_generation(TokenId id) const;

    // Tokens that are matched as a whole inside text before the rest is tokenized: control,
    // user-defined and unknown tokens, longest text first (ties by id).
    const std::vector<TokenId>& special_match_order() const { return special_order_; }

    // BPE merges in rank order (rank = index), each as its two parts.
    const std::vector<std::pair<std::string, std::string>>& merges() const { return merges_; }

    // Things about the file that are odd but not fatal (out-of-range special ids, duplicate or
    // empty token texts), worded for a user.
    const std::vector<std::string>& warnings() const { return warnings_; }

  private:
    VocabKind kind_ = VocabKind::SentencePiece;
    std::string model_name_;
    std::string pre_;
    std::vector<TokenInfo> tokens_;
    TextIdTable ids_;
    std::vector<std::pair<std::string, std::string>> merges_;
    SpecialTokenIds special_;
    bool add_bos_ = false;
    bool add_eos_ = false;
    bool add_space_prefix_ = false;
    bool ignore_merges_ = false;
    std::vector<TokenId> eog_;
    std::vector<TokenId> special_order_;
    std::vector<std::string> warnings_;

    friend class VocabLoader;
};

}  // namespace strata
