#include "util/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace strata {

std::string format_bytes(uint64_t bytes, bool decimal) {
    static const char* const kBinary[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    static const char* const kDecimal[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    const double base = decimal ? 1000.0 : 1024.0;
    double v = static_cast<double>(bytes);
    int unit = 0;
    while (v >= base && unit < 5) {
        v /= base;
        ++unit;
    }
    char buf[32];
    if (unit == 0) {
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(buf, sizeof buf, "%.2f %s", v, decimal ? kDecimal[unit] : kBinary[unit]);
    }
    return buf;
}

std::string format_count(uint64_t n) {
    static const char* const kUnits[] = {"", " K", " M", " B", " T"};
    double v = static_cast<double>(n);
    int unit = 0;
    while (v >= 1000.0 && unit < 4) {
        v /= 1000.0;
        ++unit;
    }
    char buf[32];
    if (unit == 0) {
        std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    } else {
        std::snprintf(buf, sizeof buf, "%.2f%s", v, kUnits[unit]);
    }
    return buf;
}

Result<uint64_t> parse_size(std::string_view text) {
    std::string s(text);
    size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) return err("invalid size '", s, "': expected a number such as 3G, 512M or 4096");
    double number = 0;
    try {
        number = std::stod(s.substr(0, i));
    } catch (...) {
        return err("invalid size '", s, "'");
    }
    std::string suffix;
    for (size_t j = i; j < s.size(); ++j) {
        if (s[j] != ' ') suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(s[j])));
    }
    double mult = 1;
    if (suffix.empty() || suffix == "B") {
        mult = 1;
    } else {
        const char u = suffix[0];
        const std::string rest = suffix.substr(1);
        if (rest != "" && rest != "B" && rest != "IB") {
            return err("invalid size '", s, "': unknown unit '", suffix, "'");
        }
        switch (u) {
            case 'K': mult = 1024.0; break;
            case 'M': mult = 1024.0 * 1024; break;
            case 'G': mult = 1024.0 * 1024 * 1024; break;
            case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
            default: return err("invalid size '", s, "': unknown unit '", suffix, "'");
        }
    }
    const double bytes = number * mult;
    if (!std::isfinite(bytes) || bytes < 0 || bytes > 1.8e19) {
        return err("invalid size '", s, "': out of range");
    }
    return static_cast<uint64_t>(std::llround(bytes));
}

}  // namespace strata
