#include "util/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

namespace {

Error size_error(std::string_view text, std::string_view why) {
    return err("invalid size '", std::string(text), "': ", std::string(why),
               " (a number and an optional binary unit: 4096, 512K, 3G, 1.5GiB, 2T)");
}

// "", "B" -> 0; "K", "KB", "KIB" -> 1 (powers of 1024); ... ; -1 when not a unit.
int unit_power(std::string_view unit) {
    std::string u;
    for (char c : unit) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (u.empty() || u == "B") return 0;
    static const std::string_view kLetters = "KMGTP";
    const size_t p = kLetters.find(u[0]);
    if (p == std::string_view::npos) return -1;
    const std::string rest = u.substr(1);
    if (rest != "" && rest != "B" && rest != "IB") return -1;
    return static_cast<int>(p) + 1;
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
    size_t begin = 0, end = text.size();
    while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
    while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    const std::string_view s = text.substr(begin, end - begin);
    if (s.empty()) return size_error(text, "empty");

    size_t i = 0, digits = 0, dots = 0;
    for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
        (s[i] == '.' ? dots : digits) += 1;
    }
    if (digits == 0) return size_error(text, "no number");
    if (dots > 1) return size_error(text, "more than one decimal point");
    size_t u = i;
    while (u < s.size() && s[u] == ' ') ++u;
    const int power = unit_power(s.substr(u));
    if (power < 0) return size_error(text, "unknown unit '" + std::string(s.substr(u)) + "'");
    if (power == 0 && dots > 0) return size_error(text, "a number of bytes must be whole");

    // Long double holds every 64-bit integer exactly on x86-64, so "18446744073709551615" stays
    // exact; anything that does not fit in 64 bits is refused rather than wrapped.
    const std::string number(s.substr(0, i));
    const long double value = std::strtold(number.c_str(), nullptr) * std::pow(1024.0L, power);
    const long double rounded = std::round(value);
    if (!std::isfinite(rounded) || rounded > 18446744073709551615.0L) {
        return size_error(text, "too large");
    }
    return static_cast<uint64_t>(rounded);
}

std::string format_fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

}  // namespace strata
