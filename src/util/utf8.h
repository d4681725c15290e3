// UTF-8 decoding for the tokenizer and the streaming decoder. Validation is strict (RFC 3629): no
// overlong forms, no surrogates, nothing above U+10FFFF. Text that breaks these rules still has
// to be tokenized and decoded without loss, so every function here says what it does with
// invalid bytes instead of failing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;
// U+FFFD encoded, what replaces invalid input in text that must be valid UTF-8.
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

struct Decoded {
    char32_t cp = 0;     // the code point, or kReplacement when !valid
    uint32_t len = 0;    // bytes consumed: the sequence, or the invalid part (always >= 1)
    bool valid = false;  // a complete, well-formed sequence
    // The invalid part is a correct but unfinished sequence cut off by the end of the input:
    // more bytes could still complete it (what a streaming decoder must hold back).
    bool truncated = false;
};

// Sequence length announced by a lead byte, 0 when the byte cannot start a sequence
// (continuation bytes 80..BF, the overlong leads C0 and C1, and F5..FF).
uint32_t sequence_length(uint8_t lead);

// Allowed range of the byte after `lead` (the others are 80..BF); the lead bytes E0, ED, F0 and
// F4 narrow it to exclude overlong forms, surrogates and code points above U+10FFFF.
void second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi);

// Decodes the sequence starting at s[i] (i < s.size()). An invalid sequence reports its maximal
// subpart: the longest prefix that could start a well-formed sequence, at least one byte, which
// is what Unicode recommends to replace with one U+FFFD.
Decoded decode(std::string_view s, size_t i);

// True when all of s is well-formed UTF-8.
bool is_valid(std::string_view s);

// Bytes at the end of s that begin a UTF-8 character but do not finish it yet (0..3): what a
// streaming consumer holds back so that every piece it passes on is whole characters.
size_t unfinished_tail(std::string_view s);

// Appends the UTF-8 form of cp (cp must be a scalar value: <= U+10FFFF, not a surrogate).
void append(std::string& out, char32_t cp);

}  // namespace strata::utf8
