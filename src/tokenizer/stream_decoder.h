// Turns generated tokens into text that can be shown as it arrives. A token may end in the middle
// of a UTF-8 character (byte-fallback tokens, byte-level BPE pieces of CJK or emoji), so bytes
// that could still become a character are held back until the next token completes them. What
// is returned is always valid UTF-8: a sequence that can no longer complete is replaced by
// U+FFFD, one per maximal invalid subpart (the Unicode recommendation), so the same bytes give
// the same text however they are split into tokens.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace strata {

// The UTF-8 part on its own: bytes in, valid text out.
class Utf8Assembler {
  public:
    // Adds bytes; returns the text they complete (possibly empty).
    std::string push(std::string_view bytes);
    // Ends the stream: an unfinished character held back becomes U+FFFD.
    std::string finish();
    // Bytes held back waiting for the rest of a character (0 to 3).
    size_t pending_bytes() const { return pending_.size(); }

  private:
    std::string pending_;
};

struct StreamDecodeOptions {
    // Write control and unknown tokens (<|im_end|>, <s>) as their text; off for chat output.
    bool render_special = false;
    // Remove the space a SentencePiece vocabulary puts in front of the first token, as
    // Tokenizer::detokenize does; for decoding a sequence from its start. Generated tokens
    // continue a prompt and keep their space.
    bool strip_leading_space = false;
};

class StreamDecoder {
  public:
    explicit StreamDecoder(const Tokenizer& tokenizer, StreamDecodeOptions options = {});

    // Adds a token; returns the text completed by it (possibly empty).
    std::string push(TokenId id);
    // Ends the stream: an unfinished character held back becomes U+FFFD. The decoder can
    // then start a new sequence.
    std::string finish();
    size_t pending_bytes() const { return utf8_.pending_bytes(); }

  private:
    const Tokenizer* tokenizer_;
    StreamDecodeOptions options_;
    bool first_token_ = true;
    Utf8Assembler utf8_;
};

}  // namespace strata
