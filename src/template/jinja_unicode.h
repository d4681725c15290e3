// The parts of Python's Unicode behaviour that chat templates reach: strings are
// indexed, sliced and measured in code points; strip() and split() treat every Unicode
// whitespace character as whitespace; upper()/lower() map cased letters.
//
// Case mapping covers the scripts that matter in practice (ASCII, Latin-1, Latin Extended-A,
// Greek, Cyrillic, Armenian, fullwidth Latin) one code point to one code point; of the
// multi-character mappings only upper("ß") == "SS" is done, the rare others keep the character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja::unicode {

// Decodes the code point at s[i] and advances i; invalid bytes decode as U+FFFD (see
// util/utf8.h, which does the decoding).
char32_t next_code_point(std::string_view s, size_t& i);
// Appends cp as UTF-8; a surrogate or a value past U+10FFFF becomes U+FFFD.
void append_utf8(std::string& out, char32_t cp);
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
size_t code_point_count(std::string_view s);
// Offset of the first byte that is not valid UTF-8, or npos.
size_t first_invalid_utf8(std::string_view s);

inline bool is_ascii_digit(char c) {
    return c >= '0' && c <= '9';
}

// str.isspace(): ASCII whitespace, \x1c-\x1f, \x85, \xa0 and the Unicode space separators.
bool is_space(char32_t c);
// Characters that str.splitlines() breaks at.
bool is_line_break(char32_t c);
// The \w of Python's re module: letters, digits, numerics and '_'.
bool is_word_char(char32_t c);
bool is_cased(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_printable(char32_t c);  // str.isprintable(), as repr() decides what to escape
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);

// Python's str.strip()/lstrip()/rstrip() over whitespace.
std::string_view strip_space(std::string_view s);
std::string_view lstrip_space(std::string_view s);
std::string_view rstrip_space(std::string_view s);
// Length in bytes of the whitespace run that starts s.
size_t leading_space_bytes(std::string_view s);

}  // namespace strata::jinja::unicode
