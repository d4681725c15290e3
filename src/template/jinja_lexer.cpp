#include "template/jinja_lexer.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "template/jinja_unicode.h"
#include "template/jinja_value.h"

namespace strata::jinja {

// ---- SourceMap ----

SourceMap::SourceMap(std::string_view source) : source_(source) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
        if (source_[i] == '\n') line_starts_.push_back(static_cast<uint32_t>(i + 1));
    }
}

std::string SourceMap::location(uint32_t offset) const {
    if (line_starts_.empty()) return "1:1";
    offset = std::min<uint32_t>(offset, static_cast<uint32_t>(source_.size()));
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    const uint32_t start = *(it - 1);
    const size_t col =
        unicode::code_point_count(std::string_view(source_).substr(start, offset - start)) + 1;
    return std::to_string(line) + ":" + std::to_string(col);
}

std::string normalize_template_source(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
    return is_name_start(c) || is_digit(c);
}

// Operators, longest first so that "//" wins over "/".
constexpr const char* kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                      "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                      ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};

class Lexer {
  public:
    Lexer(std::string_view src, const SourceMap& map) : src_(src), map_(map) {}

    Result<std::vector<Token>> run() {
        while (pos_ < src_.size()) {
            const bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
            const size_t tag = find_tag_start(pos_);
            if (tag == std::string_view::npos) {
                emit_text(src_.substr(pos_), pos_);
                pos_ = src_.size();
                break;
            }
            const char kind = src_[tag + 1];
            size_t body = tag + 2;
            char modifier = 0;
            if (body < src_.size() && (src_[body] == '-' || src_[body] == '+')) {
                modifier = src_[body];
                ++body;
            }
            size_t raw_body = 0;
            const bool raw = kind == '%' && match_raw_begin(body, raw_body);
            std::string_view text = src_.substr(pos_, tag - pos_);
            text = control_whitespace_before(text, modifier, kind != '{', line_starting);
            emit_text(text, pos_);
            if (kind == '#') {
                STRATA_TRY(skip_comment(tag, body));
            } else if (raw) {
                STRATA_TRY(read_raw(tag, raw_body));
            } else {
                STRATA_TRY(read_tag(tag, body, kind == '%'));
            }
        }
        Token eof;
        eof.type = TokenType::Eof;
        eof.offset = static_cast<uint32_t>(src_.size());
        out_.push_back(std::move(eof));
        return std::move(out_);
    }

  private:
    Error fail(size_t offset, const std::string& msg) const {
        return err(map_.location(static_cast<uint32_t>(offset)), ": ", msg);
    }

    size_t find_tag_start(size_t from) const {
        for (size_t i = src_.find('{', from); i != std::string_view::npos;
             i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() &&
                (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
                return i;
            }
        }
        return std::string_view::npos;
    }

    // Whitespace control that applies to the text before a tag: '-' strips all whitespace,
    // lstrip_blocks strips a whitespace-only run from the start of the line (block and comment
    // tags only), '+' disables lstrip_blocks.
    static std::string_view control_whitespace_before(std::string_view text, char modifier,
                                                      bool lstrip_applies, bool line_starting) {
        if (modifier == '-') return unicode::rstrip_space(text);
        if (modifier == '+' || !lstrip_applies) return text;
        const size_t nl = text.rfind('\n');
        const size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
        if (line_start == 0 && !line_starting) return text;
        const std::string_view tail = text.substr(line_start);
        if (!tail.empty() && unicode::leading_space_bytes(tail) == tail.size()) {
            return text.substr(0, line_start);
        }
        return text;
    }

    // After a tag's end delimiter: '-' strips all following whitespace, otherwise trim_blocks
    // removes one newline (block and comment tags, unless '+').
    void control_whitespace_after(char modifier, bool trim_applies) {
        if (modifier == '-') {
            pos_ += unicode::leading_space_bytes(src_.substr(pos_));
        } else if (modifier != '+' && trim_applies && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
        }
    }

    void emit_text(std::string_view text, size_t offset) {
        if (text.empty()) return;
        Token t;
        t.type = TokenType::Text;
        t.text = std::string(text);
        t.offset = static_cast<uint32_t>(offset);
        out_.push_back(std::move(t));
    }

    size_t skip_inline_space(size_t i) const {
        return i + unicode::leading_space_bytes(src_.substr(i));
    }

    bool word_at(size_t i, std::string_view word) const {
        return src_.substr(i, word.size()) == word &&
               (i + word.size() >= src_.size() || !is_name_char(src_[i + word.size()]));
    }

    // `{% raw %}` or `{%- raw -%}`; `body` is just past the modifier. On success `after` is the
    // first byte of the raw content (whitespace after "-%}" already skipped).
    bool match_raw_begin(size_t body, size_t& after) const {
        size_t i = skip_inline_space(body);
        if (!word_at(i, "raw")) return false;
        i = skip_inline_space(i + 3);
        if (src_.substr(i, 3) == "-%}") {
            after = skip_inline_space(i + 3);
            return true;
        }
        if (src_.substr(i, 2) == "%}") {
            after = i + 2;  // trim_blocks does not apply after `{% raw %}`
            return true;
        }
        return false;
    }

    Result<void> read_raw(size_t tag, size_t content_start) {
        for (size_t i = src_.find("{%", content_start); i != std::string_view::npos;
             i = src_.find("{%", i + 1)) {
            size_t j = i + 2;
            char modifier = 0;
            if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) modifier = src_[j++];
            j = skip_inline_space(j);
            if (!word_at(j, "endraw")) continue;
            j = skip_inline_space(j + 6);
            char end_modifier = 0;
            if (src_.substr(j, 3) == "-%}" || src_.substr(j, 3) == "+%}") {
                end_modifier = src_[j];
                j += 3;
            } else if (src_.substr(j, 2) == "%}") {
                j += 2;
            } else {
                continue;
            }
            const bool line_starting = content_start == 0 || src_[content_start - 1] == '\n';
            std::string_view text = src_.substr(content_start, i - content_start);
            text = control_whitespace_before(text, modifier, true, line_starting);
            emit_text(text, content_start);
            pos_ = j;
            control_whitespace_after(end_modifier, true);
            return {};
        }
        return fail(tag, "missing end of raw directive ({% endraw %})");
    }

    Result<void> skip_comment(size_t tag, size_t body) {
        const size_t end = src_.find("#}", body);
        if (end == std::string_view::npos) return fail(tag, "missing end of comment tag (#})");
        char modifier = 0;
        if (end > body && (src_[end - 1] == '-' || src_[end - 1] == '+')) modifier = src_[end - 1];
        pos_ = end + 2;
        control_whitespace_after(modifier, true);
        return {};
    }

    Result<void> read_tag(size_t tag, size_t body, bool block) {
        Token begin;
        begin.type = block ? TokenType::BlockBegin : TokenType::VariableBegin;
        begin.offset = static_cast<uint32_t>(tag);
        out_.push_back(std::move(begin));
        std::vector<char> open_brackets;
        size_t i = body;
        while (true) {
            if (i >= src_.size()) {
                return fail(tag, block ? "unexpected end of template: '{%' is never closed"
                                       : "unexpected end of template: '{{' is never closed");
            }
            if (open_brackets.empty()) {
                // End delimiters only count outside brackets, so `{{ {'a': {'b': 1}} }}` works.
                const std::string_view close = block ? "%}" : "}}";
                char modifier = 0;
                size_t end_len = 0;
                if (src_[i] == '-' && src_.substr(i + 1, 2) == close) {
                    modifier = '-';
                    end_len = 3;
                } else if (block && src_[i] == '+' && src_.substr(i + 1, 2) == close) {
                    modifier = '+';
                    end_len = 3;
                } else if (src_.substr(i, 2) == close) {
                    end_len = 2;
                }
                if (end_len) {
                    Token end;
                    end.type = block ? TokenType::BlockEnd : TokenType::VariableEnd;
                    end.offset = static_cast<uint32_t>(i);
                    out_.push_back(std::move(end));
                    pos_ = i + end_len;
                    control_whitespace_after(modifier, block);
                    return {};
                }
            }
            const size_t space = unicode::leading_space_bytes(src_.substr(i));
            if (space) {
                i += space;
                continue;
            }
            STRATA_ASSIGN(size_t next, read_token(i, open_brackets));
            i = next;
        }
    }

    // Reads one token inside a tag starting at i; returns the position after it.
    Result<size_t> read_token(size_t i, std::vector<char>& open_brackets) {
        const char c = src_[i];
        Token t;
        t.offset = static_cast<uint32_t>(i);
        if (is_digit(c)) return read_number(i);
        if (is_name_start(c) || static_cast<unsigned char>(c) >= 0x80) {
            const size_t len = name_length(i);
            if (len > 0) {
                t.type = TokenType::Name;
                t.text = std::string(src_.substr(i, len));
                out_.push_back(std::move(t));
                return i + len;
            }
        }
        if (c == '\'' || c == '"') return read_string(i);
        for (const char* op : kOperators) {
            const size_t len = std::strlen(op);
            if (src_.substr(i, len) != op) continue;
            if (len == 1 && (c == '(' || c == '[' || c == '{')) {
                open_brackets.push_back(c);
            } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
                const char want = c == ')' ? '(' : c == ']' ? '[' : '{';
                if (open_brackets.empty()) return fail(i, std::string("unexpected '") + c + "'");
                if (open_brackets.back() != want) {
                    const char expected = open_brackets.back() == '('   ? ')'
                                          : open_brackets.back() == '[' ? ']'
                                                                        : '}';
                    return fail(i,
                                std::string("unexpected '") + c + "', expected '" + expected + "'");
                }
                open_brackets.pop_back();
            }
            t.type = TokenType::Operator;
            t.text = op;
            out_.push_back(std::move(t));
            return i + len;
        }
        size_t j = i;
        const char32_t cp = unicode::next_code_point(src_, j);
        std::string shown;
        unicode::append_utf8(shown, cp);
        return fail(i, "unexpected character '" + shown + "' in a tag");
    }

    // Identifiers are ASCII letters, digits and '_', and, as in Python, letters and digits of
    // any script (`{% set größe = 1 %}`). Digits cannot start one: numbers are read first.
    size_t name_length(size_t i) const {
        size_t j = i;
        while (j < src_.size()) {
            if (static_cast<unsigned char>(src_[j]) < 0x80) {
                if (!is_name_char(src_[j])) break;
                ++j;
            } else {
                size_t k = j;
                if (!unicode::is_word_char(unicode::next_code_point(src_, k))) break;
                j = k;
            }
        }
        return j - i;
    }

    // Digits with optional '_' separators; returns the end.
    size_t scan_digits(size_t i) const {
        while (i < src_.size() &&
               (is_digit(src_[i]) || (src_[i] == '_' && i + 1 < src_.size() &&
                                      is_digit(src_[i + 1]) && i > 0 && is_digit(src_[i - 1])))) {
            ++i;
        }
        return i;
    }

    Result<size_t> read_number(size_t i) {
        Token t;
        t.offset = static_cast<uint32_t>(i);
        size_t j = scan_digits(i);
        bool is_float = false;
        // A fraction needs digits after the '.', and a number right after a '.' never has one:
        // `xs.0.1` is xs[0][1] as in Jinja2.
        const bool after_dot = i > 0 && src_[i - 1] == '.';
        if (!after_dot && j + 1 < src_.size() && src_[j] == '.' && is_digit(src_[j + 1])) {
            j = scan_digits(j + 1);
            is_float = true;
        }
        if (!after_dot && j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
            size_t k = j + 1;
            if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
            if (k < src_.size() && is_digit(src_[k])) {
                j = scan_digits(k);
                is_float = true;
            }
        }
        std::string digits;
        for (size_t k = i; k < j; ++k) {
            if (src_[k] != '_') digits += src_[k];
        }
        if (is_float) {
            t.type = TokenType::Float;
            t.float_value = parse_decimal(digits).value_or(0.0);  // digits were checked above
        } else {
            t.type = TokenType::Integer;
            int64_t v = 0;
            for (char d : digits) {
                if (v > (std::numeric_limits<int64_t>::max() - (d - '0')) / 10) {
                    return fail(i, "integer literal " + digits + " is too large");
                }
                v = v * 10 + (d - '0');
            }
            t.int_value = v;
        }
        t.text = digits;
        out_.push_back(std::move(t));
        return j;
    }

    static int hex_value(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    // String literals decode backslash escapes as Python's unicode-escape codec does; an
    // unknown escape keeps its backslash.
    Result<size_t> read_string(size_t i) {
        const char quote = src_[i];
        std::string value;
        size_t j = i + 1;
        char32_t pending_high_surrogate = 0;
        auto put = [&](char32_t cp) {
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (pending_high_surrogate) unicode::append_utf8(value, 0xFFFD);
                pending_high_surrogate = cp;
                return;
            }
            if (pending_high_surrogate) {
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    cp = 0x10000 + ((pending_high_surrogate - 0xD800) << 10) + (cp - 0xDC00);
                } else {
                    unicode::append_utf8(value, 0xFFFD);
                }
                pending_high_surrogate = 0;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            unicode::append_utf8(value, cp);
        };
        auto put_bytes = [&](std::string_view bytes) {
            if (pending_high_surrogate) {
                unicode::append_utf8(value, 0xFFFD);
                pending_high_surrogate = 0;
            }
            value += bytes;
        };
        while (true) {
            if (j >= src_.size()) return fail(i, "unterminated string literal");
            const char c = src_[j];
            if (c == quote) break;
            if (c != '\\') {
                put_bytes(src_.substr(j, 1));
                ++j;
                continue;
            }
            if (j + 1 >= src_.size()) return fail(i, "unterminated string literal");
            const char e = src_[j + 1];
            j += 2;
            switch (e) {
                case '\n':
                    break;  // line continuation
                case 'N':
                    // Python's \N{NAME} needs the Unicode name database.
                    return fail(j - 2,
                                "\\N{...} escapes are not supported; write the character or "
                                "use \\u");
                case '\\':
                    put_bytes("\\");
                    break;
                case '\'':
                    put_bytes("'");
                    break;
                case '"':
                    put_bytes("\"");
                    break;
                case 'n':
                    put_bytes("\n");
                    break;
                case 't':
                    put_bytes("\t");
                    break;
                case 'r':
                    put_bytes("\r");
                    break;
                case 'b':
                    put_bytes("\b");
                    break;
                case 'f':
                    put_bytes("\f");
                    break;
                case 'v':
                    put_bytes("\v");
                    break;
                case 'a':
                    put_bytes("\a");
                    break;
                case 'x':
                case 'u':
                case 'U': {
                    const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    char32_t cp = 0;
                    for (int k = 0; k < n; ++k) {
                        const int h = j + k < src_.size() ? hex_value(src_[j + k]) : -1;
                        if (h < 0) {
                            return fail(j - 2, std::string("truncated \\") + e +
                                                   " escape in string literal");
                        }
                        cp = cp * 16 + static_cast<char32_t>(h);
                    }
                    if (cp > 0x10FFFF)
                        return fail(j - 2, "escape beyond U+10FFFF in string literal");
                    j += n;
                    put(cp);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        char32_t cp = static_cast<char32_t>(e - '0');
                        for (int k = 0;
                             k < 2 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7';
                             ++k, ++j) {
                            cp = cp * 8 + static_cast<char32_t>(src_[j] - '0');
                        }
                        put(cp);
                    } else {
                        put_bytes("\\");
                        --j;  // the character after the backslash is kept as it is
                    }
            }
        }
        if (pending_high_surrogate) unicode::append_utf8(value, 0xFFFD);
        Token t;
        t.type = TokenType::String;
        t.text = std::move(value);
        t.offset = static_cast<uint32_t>(i);
        out_.push_back(std::move(t));
        return j + 1;
    }

    std::string_view src_;
    const SourceMap& map_;
    size_t pos_ = 0;
    std::vector<Token> out_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source, const SourceMap& map) {
    return Lexer(source, map).run();
}

}  // namespace strata::jinja
