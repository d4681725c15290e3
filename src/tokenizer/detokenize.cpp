// Token -> bytes: the pieces table, whole-sequence detokenization and the streaming decoder.
#include <string>

#include "tokenizer/merge_encoders.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace strata {

namespace {

const std::string kEmpty;

// "▁" back to a space.
std::string unescape_spaces(std::string_view text) {
    static constexpr std::string_view kMarker = "\xE2\x96\x81";
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        if (text.compare(i, kMarker.size(), kMarker) == 0) {
            out += ' ';
            i += kMarker.size();
        } else {
            out += text[i++];
        }
    }
    return out;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// "<0x0A>" -> "\n"; anything else is not a byte token and stands for nothing.
std::string byte_token_piece(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return {};
    const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
    if (hi < 0 || lo < 0) return {};
    return std::string(1, static_cast<char>(hi * 16 + lo));
}

// Byte-level text back to bytes. A character outside GPT-2's byte map (some files hold added
// tokens in plain UTF-8) is kept as it is, where llama.cpp writes a "[UNK_BYTE_0x..]" marker.
std::string byte_level_piece(std::string_view text) {
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
        const utf8::Decoded d = utf8::decode(text, i);
        const int byte = d.valid ? unicode_to_byte(d.cp) : -1;
        if (byte >= 0) {
            out += static_cast<char>(byte);
        } else {
            out.append(text.substr(i, d.len));
        }
        i += d.len;
    }
    return out;
}

}  // namespace

void Tokenizer::build_pieces() {
    pieces_.resize(vocab_.size());
    const bool spm = vocab_.kind() == VocabKind::SentencePiece;
    for (size_t i = 0; i < vocab_.size(); ++i) {
        const TokenInfo& t = vocab_.token(static_cast<TokenId>(i));
        std::string& piece = pieces_[i];
        switch (t.type) {
            case TokenType::Control:
            case TokenType::Unknown:
            case TokenType::UserDefined:
                piece = t.text;
                break;
            case TokenType::Normal:
                piece = spm ? unescape_spaces(t.text) : byte_level_piece(t.text);
                break;
            case TokenType::Byte:
                // Byte-level vocabularies have no byte tokens; the reference writes nothing.
                if (spm) piece = byte_token_piece(t.text);
                break;
            case TokenType::Unused:
            case TokenType::Undefined:
                break;
        }
    }
}

const std::string& Tokenizer::piece(TokenId id) const {
    return vocab_.contains(id) ? pieces_[static_cast<size_t>(id)] : kEmpty;
}

bool Tokenizer::is_hidden(TokenId id) const {
    if (!vocab_.contains(id)) return true;
    const TokenType t = vocab_.token(id).type;
    return t == TokenType::Control || t == TokenType::Unknown;
}

std::string_view Tokenizer::piece(TokenId id, bool render_special) const {
    if (!render_special && is_hidden(id)) return {};
    return piece(id);
}

std::string Tokenizer::detokenize(std::span<const TokenId> tokens,
                                  const DetokenizeOptions& options) const {
    bool strip_space = vocab_.add_space_prefix();
    size_t begin = 0, end = tokens.size();
    if (options.remove_special && vocab_.add_bos() && end > 0 &&
        tokens[0] == vocab_.special().bos) {
        strip_space = false;
        begin = 1;
    }
    if (options.remove_special && vocab_.add_eos() && end > begin &&
        tokens[end - 1] == vocab_.special().eos) {
        --end;
    }
    std::string out;
    for (size_t i = begin; i < end; ++i) {
        std::string_view p = piece(tokens[i], options.render_special);
        // Only the first token loses its space, even when it is a BOS (reference behaviour).
        if (strip_space && !p.empty() && p[0] == ' ') p.remove_prefix(1);
        strip_space = false;
        out += p;
    }
    return out;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, StreamDecodeOptions options)
    : tokenizer_(&tokenizer), options_(options) {}

std::string StreamDecoder::push(TokenId id) {
    std::string_view p = tokenizer_->piece(id, options_.render_special);
    if (first_token_ && options_.strip_leading_space && tokenizer_->vocab().add_space_prefix() &&
        !p.empty() && p[0] == ' ') {
        p.remove_prefix(1);
    }
    first_token_ = false;
    return utf8_.push(p);
}

std::string StreamDecoder::finish() {
    first_token_ = true;
    return utf8_.finish();
}

std::string Utf8Assembler::push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    out.reserve(pending_.size());
    size_t i = 0;
    while (i < pending_.size()) {
        if (static_cast<uint8_t>(pending_[i]) < 0x80) {
            out += pending_[i++];
            continue;
        }
        const utf8::Decoded d = utf8::decode(pending_, i);
        if (d.truncated) break;  // the next bytes may complete it
        if (d.valid) {
            out.append(pending_, i, d.len);
        } else {
            out += utf8::kReplacementUtf8;
        }
        i += d.len;
    }
    pending_.erase(0, i);
    return out;
}

std::string Utf8Assembler::finish() {
    std::string out;
    if (!pending_.empty()) out = utf8::kReplacementUtf8;  // one unfinished character
    pending_.clear();
    return out;
}

}  // namespace strata
