#include "util/utf8.h"

#include <cassert>

namespace strata::utf8 {

uint32_t sequence_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead < 0xC2) return 0;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    if (lead < 0xF5) return 4;
    return 0;
}

void second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
    lo = 0x80;
    hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
}

Decoded decode(std::string_view s, size_t i) {
    assert(i < s.size());
    const auto lead = static_cast<uint8_t>(s[i]);
    const uint32_t need = sequence_length(lead);
    if (need == 1) return {lead, 1, true, false};
    if (need == 0) return {kReplacement, 1, false, false};

    uint8_t lo = 0, hi = 0;
    second_byte_range(lead, lo, hi);
    char32_t cp = lead & (0xFF >> (need + 1));
    for (uint32_t k = 1; k < need; ++k) {
        if (i + k >= s.size()) return {kReplacement, k, false, true};
        const auto b = static_cast<uint8_t>(s[i + k]);
        if (b < lo || b > hi) return {kReplacement, k, false, false};
        cp = (cp << 6) | (b & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    return {cp, need, true, false};
}

bool is_valid(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        // ASCII runs dominate real text; skip them without the general decoder.
        if (static_cast<uint8_t>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const Decoded d = decode(s, i);
        if (!d.valid) return false;
        i += d.len;
    }
    return true;
}

size_t unfinished_tail(std::string_view s) {
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
        const size_t i = s.size() - back;
        const bool continuation = (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
        if (continuation) continue;
        return decode(s, i).truncated ? back : 0;
    }
    return 0;
}

void append(std::string& out, char32_t cp) {
    assert(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF));
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace strata::utf8
