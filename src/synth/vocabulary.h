// The tokenizer of a synthetic model: either every `tokenizer.*` key of another GGUF, copied
// verbatim, or a small self-contained SentencePiece-style vocabulary with a ChatML template.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/result.h"

namespace strata {

struct SynthVocabulary {
    std::vector<MetadataEntry> entries;  // tokenizer.* keys, in the order they are written
    uint32_t n_tokens = 0;               // length of tokenizer.ggml.tokens (= n_vocab)
    std::string source;                  // "built-in" or the file it came from
};

// Token ids and types of the built-in vocabulary (token types as in llama.cpp's
// llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte).
inline constexpr uint32_t kBuiltinUnkId = 0;
inline constexpr uint32_t kBuiltinBosId = 1;
inline constexpr uint32_t kBuiltinEosId = 2;
inline constexpr uint32_t kBuiltinFirstByteId = 3;  // <0x00> .. <0xFF> are ids 3 .. 258

// tokenizer.ggml.model "llama": <unk>, <s>, </s>, the 256 byte-fallback tokens, "▁" and the
// printable ASCII characters, common English words as "▁word" pieces together with every prefix
// (so SentencePiece's pairwise merges can build each word), a few suffixes, and the ChatML
// control tokens <|im_start|> / <|im_end|> used by tokenizer.chat_template. Scores fall with
// the piece index, like a SentencePiece model sorted by frequency.
SynthVocabulary builtin_vocabulary();

// Every tokenizer.* key of a GGUF file (a model or a vocabulary-only file), in file order.
Result<SynthVocabulary> vocabulary_from_gguf(const std::string& path);

}  // namespace strata
