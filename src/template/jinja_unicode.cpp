#include "template/jinja_unicode.h"

#include "util/utf8.h"

namespace strata::jinja::unicode {

char32_t next_code_point(std::string_view s, size_t& i) {
    const utf8::Decoded d = utf8::decode(s, i);
    i += d.len;
    return d.cp;
}

void append_utf8(std::string& out, char32_t cp) {
    const bool scalar = cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    utf8::append(out, scalar ? cp : utf8::kReplacement);
}

std::u32string decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) out += next_code_point(s, i);
    return out;
}

std::string encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) append_utf8(out, c);
    return out;
}

size_t code_point_count(std::string_view s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size();) {
        next_code_point(s, i);
        ++n;
    }
    return n;
}

size_t first_invalid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const utf8::Decoded d = utf8::decode(s, i);
        if (!d.valid) return i;
        i += d.len;
    }
    return std::string_view::npos;
}

bool is_space(char32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_word_char(char32_t c) {
    if (c < 0x80) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
    }
    if (is_space(c)) return false;
    // Punctuation and symbol blocks; everything else outside ASCII counts as part of a word,
    // which is right for the letters and digits of every script.
    if (c <= 0xBF) {
        return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA ||
               (c >= 0xBC && c <= 0xBE);
    }
    if (c == 0xD7 || c == 0xF7) return false;
    if (c >= 0x2000 && c <= 0x206F) return false;  // general punctuation
    if (c >= 0x20A0 && c <= 0x20CF) return false;  // currency symbols
    if (c >= 0x2190 && c <= 0x2BFF) return false;  // arrows, math operators, shapes, dingbats
    if (c >= 0x2E00 && c <= 0x2E7F) return false;  // supplemental punctuation
    if (c >= 0x3000 && c <= 0x303F) {              // CJK punctuation (but 々, 〆, 〇, 〡-〩)
        return c == 0x3005 || c == 0x3006 || c == 0x3007 || (c >= 0x3021 && c <= 0x3029);
    }
    if ((c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
        (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65)) {
        return false;  // fullwidth punctuation
    }
    if (c >= 0xFE30 && c <= 0xFE4F) return false;    // CJK compatibility forms
    if (c >= 0x1F000 && c <= 0x1FAFF) return false;  // emoji and pictographs
    return true;
}

namespace {

// Pairs where the upper case letter is even and the lower case the next (odd) code point.
bool even_odd_pair(char32_t c) {
    return (c >= 0x0100 && c <= 0x012F) || (c >= 0x0132 && c <= 0x0137) ||
           (c >= 0x014A && c <= 0x0177) || (c >= 0x0460 && c <= 0x0481) ||
           (c >= 0x048A && c <= 0x04BF) || (c >= 0x04D0 && c <= 0x052F);
}
// Pairs where the upper case letter is odd and the lower case the next (even) code point.
bool odd_even_pair(char32_t c) {
    return (c >= 0x0139 && c <= 0x0148) || (c >= 0x0179 && c <= 0x017E) ||
           (c >= 0x04C1 && c <= 0x04CE);
}

}  // namespace

char32_t to_upper(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
    if (c == 0xB5) return 0x39C;  // micro sign → Greek capital mu
    if (c == 0xFF) return 0x178;
    if ((c >= 0xE0 && c <= 0xFE) && c != 0xF7) return c - 32;
    if (even_odd_pair(c)) return (c % 2 == 1) ? c - 1 : c;
    if (odd_even_pair(c)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;    // final sigma
    if (c >= 0x3AC && c <= 0x3CE) {  // accented Greek
        switch (c) {
            case 0x3AC:
                return 0x386;
            case 0x3AD:
                return 0x388;
            case 0x3AE:
                return 0x389;
            case 0x3AF:
                return 0x38A;
            case 0x3CC:
                return 0x38C;
            case 0x3CD:
                return 0x38E;
            case 0x3CE:
                return 0x38F;
            default:
                break;
        }
    }
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    if (c >= 0x561 && c <= 0x586) return c - 48;
    if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
    return c;
}

char32_t to_lower(char32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (c == 0x178) return 0xFF;
    if ((c >= 0xC0 && c <= 0xDE) && c != 0xD7) return c + 32;
    if (even_odd_pair(c)) return (c % 2 == 0) ? c + 1 : c;
    if (odd_even_pair(c)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x130) return 'i';
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    switch (c) {
        case 0x386:
            return 0x3AC;
        case 0x388:
            return 0x3AD;
        case 0x389:
            return 0x3AE;
        case 0x38A:
            return 0x3AF;
        case 0x38C:
            return 0x3CC;
        case 0x38E:
            return 0x3CD;
        case 0x38F:
            return 0x3CE;
        default:
            break;
    }
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c >= 0x531 && c <= 0x556) return c + 48;
    if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
    return c;
}

bool is_upper(char32_t c) {
    return to_lower(c) != c;
}
bool is_lower(char32_t c) {
    return to_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149;
}
bool is_cased(char32_t c) {
    return is_upper(c) || is_lower(c);
}

bool is_printable(char32_t c) {
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x7F) return true;
    if (c <= 0xA0) return false;  // C1 controls and the no-break space
    if (c == 0xAD || c == 0x61C || c == 0x1680 || c == 0x180E || c == 0x3000 || c == 0xFEFF) {
        return false;
    }
    if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
        (c >= 0x205F && c <= 0x206F)) {
        return false;
    }
    if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
    if (c >= 0xF0000) return false;  // private use planes
    return true;
}

std::string upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const char32_t c = next_code_point(s, i);
        if (c == 0xDF) {
            out += "SS";  // the one multi-letter mapping common enough to matter
        } else {
            append_utf8(out, to_upper(c));
        }
    }
    return out;
}

std::string lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) append_utf8(out, to_lower(next_code_point(s, i)));
    return out;
}

size_t leading_space_bytes(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        size_t j = i;
        if (!is_space(next_code_point(s, j))) break;
        i = j;
    }
    return i;
}

std::string_view lstrip_space(std::string_view s) {
    return s.substr(leading_space_bytes(s));
}

std::string_view rstrip_space(std::string_view s) {
    size_t end = 0;  // end of the last non-space code point
    for (size_t i = 0; i < s.size();) {
        if (!is_space(next_code_point(s, i))) end = i;
    }
    return s.substr(0, end);
}

std::string_view strip_space(std::string_view s) {
    return rstrip_space(lstrip_space(s));
}

}  // namespace strata::jinja::unicode
