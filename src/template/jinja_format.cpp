// String formatting as Python does it: printf-style `"%s: %d" % (a, b)` (also the `format`
// filter) and str.format with `{}`, `{0}` and `{name}` fields.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "template/jinja_builtins.h"
#include "template/jinja_renderer.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

struct Spec {
    std::string flags;
    int width = -1;
    int precision = -1;
    char conversion = 's';
};

std::string pad(std::string text, const Spec& spec) {
    const auto len = static_cast<int>(unicode::code_point_count(text));
    if (spec.width <= len) return text;
    const auto fill = static_cast<size_t>(spec.width - len);
    if (spec.flags.find('-') != std::string::npos) return text + std::string(fill, ' ');
    return std::string(fill, ' ') + text;
}

std::string c_format(const Spec& spec, const char* length, const char* conv_override = nullptr) {
    std::string f = "%" + spec.flags;
    if (spec.width >= 0) f += std::to_string(spec.width);
    if (spec.precision >= 0) f += "." + std::to_string(spec.precision);
    f += length;
    f += conv_override ? conv_override : std::string(1, spec.conversion);
    return f;
}

// %e %f %g as C's printf in the "C" locale (which is what Python produces), whatever the
// process locale: digits from std::to_chars, then sign and padding.
std::string format_float(double x, const Spec& spec) {
    const bool upper = spec.conversion == 'E' || spec.conversion == 'F' || spec.conversion == 'G';
    const char conv = static_cast<char>(spec.conversion | 0x20);  // lower case
    const int precision = spec.precision < 0 ? 6 : std::min(spec.precision, 400);
    std::string digits;
    if (std::isnan(x)) {
        digits = "nan";
    } else if (std::isinf(x)) {
        digits = "inf";
    } else {
        char buf[1024];
        const auto format = conv == 'f'   ? std::chars_format::fixed
                            : conv == 'e' ? std::chars_format::scientific
                                          : std::chars_format::general;
        const int p = (conv == 'g' && precision == 0) ? 1 : precision;
        const auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(x), format, p);
        digits = res.ec == std::errc() ? std::string(buf, res.ptr) : "inf";
    }
    if (upper) {
        for (char& c : digits) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
    }
    std::string sign;
    if (std::signbit(x) && !std::isnan(x)) {
        sign = "-";
    } else if (spec.flags.find('+') != std::string::npos) {
        sign = "+";
    } else if (spec.flags.find(' ') != std::string::npos) {
        sign = " ";
    }
    const auto len = static_cast<int>(sign.size() + digits.size());
    if (spec.width <= len) return sign + digits;
    const auto fill = static_cast<size_t>(spec.width - len);
    if (spec.flags.find('-') != std::string::npos) return sign + digits + std::string(fill, ' ');
    if (spec.flags.find('0') != std::string::npos && std::isfinite(x)) {
        return sign + std::string(fill, '0') + digits;
    }
    return std::string(fill, ' ') + sign + digits;
}

Result<std::string> format_one(const Spec& spec, const Value& v) {
    char buf[512];
    switch (spec.conversion) {
        case 's':
        case 'r':
        case 'a': {
            STRATA_ASSIGN(std::string s, spec.conversion == 's' ? to_str(v) : to_repr(v));
            if (spec.precision >= 0) {
                const std::u32string cps = unicode::decode(s);
                if (cps.size() > static_cast<size_t>(spec.precision)) {
                    s = unicode::encode(cps.substr(0, static_cast<size_t>(spec.precision)));
                }
            }
            return pad(std::move(s), spec);
        }
        case 'c': {
            std::string s;
            if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
                unicode::append_utf8(s, static_cast<char32_t>(v.as_int()));
            } else if (v.is_string() && unicode::code_point_count(v.str()) == 1) {
                s = v.str();
            } else {
                return err("%c requires an int or a unicode character, not ", type_name(v));
            }
            return pad(std::move(s), spec);
        }
        case 'd':
        case 'i':
        case 'u':
        case 'o':
        case 'x':
        case 'X': {
            const bool integer_only =
                spec.conversion == 'o' || spec.conversion == 'x' || spec.conversion == 'X';
            int64_t n = 0;
            if (v.is_integral()) {
                n = v.as_int();
            } else if (v.is_float() && !integer_only) {
                n = static_cast<int64_t>(v.as_double());
            } else {
                return err("%", std::string(1, spec.conversion),
                           " format: ", integer_only ? "an integer" : "a real number",
                           " is required, not ", type_name(v));
            }
            if (spec.conversion == 'o' && spec.flags.find('#') != std::string::npos) {
                Spec plain = spec;
                plain.flags.erase(plain.flags.find('#'), 1);
                std::snprintf(buf, sizeof(buf), c_format(plain, "ll", "o").c_str(),
                              static_cast<long long>(n));
                std::string s = buf;
                const size_t digit = s.find_first_not_of(" -+");
                s.insert(digit, "0o");  // Python spells the octal prefix 0o
                return s;
            }
            const char* conv = spec.conversion == 'i' || spec.conversion == 'u' ? "d" : nullptr;
            std::snprintf(buf, sizeof(buf), c_format(spec, "ll", conv).c_str(),
                          static_cast<long long>(n));
            return std::string(buf);
        }
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': {
            if (!v.is_number()) {
                return err("must be real number, not ", type_name(v));
            }
            return format_float(v.as_double(), spec);
        }
        default:
            break;
    }
    return err("unsupported format character '", std::string(1, spec.conversion), "'");
}

}  // namespace

Result<std::string> percent_format(const std::string& fmt, const Value& values) {
    std::vector<Value> args;
    const bool mapping = values.is_dict();
    if (values.is_tuple()) {
        args = values.items();
    } else if (!mapping) {
        args.push_back(values);
    }
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) return err("incomplete format");
        const Value* key_value = nullptr;
        if (fmt[i] == '(') {
            const size_t close = fmt.find(')', i);
            if (close == std::string::npos) return err("incomplete format key");
            if (!mapping) return err("format requires a mapping");
            const std::string key = fmt.substr(i + 1, close - i - 1);
            key_value = values.dict_data().find(key);
            if (!key_value) return err("KeyError: '", key, "'");
            i = close + 1;
        }
        Spec spec;
        while (i < fmt.size() && std::string_view("#0- +").find(fmt[i]) != std::string_view::npos) {
            spec.flags += fmt[i++];
        }
        auto read_number = [&](int& target) -> Result<void> {
            if (i < fmt.size() && fmt[i] == '*') {
                if (next >= args.size()) return err("not enough arguments for format string");
                if (!args[next].is_integral()) return err("* wants int");
                target = static_cast<int>(std::clamp<int64_t>(args[next++].as_int(), -1, 4096));
                ++i;
                return {};
            }
            int n = 0;
            bool any = false;
            while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
                n = std::min(n * 10 + (fmt[i++] - '0'), 4096);
                any = true;
            }
            if (any) target = n;
            return {};
        };
        STRATA_TRY(read_number(spec.width));
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            spec.precision = 0;
            STRATA_TRY(read_number(spec.precision));
        }
        while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
        if (i >= fmt.size()) return err("incomplete format");
        spec.conversion = fmt[i];
        if (spec.conversion == '%') {
            out += '%';
            continue;
        }
        const Value* arg = key_value;
        if (!arg) {
            if (mapping) {
                arg = &values;  // "%s" % {'a': 1} formats the dict itself
            } else {
                if (next >= args.size()) return err("not enough arguments for format string");
                arg = &args[next++];
            }
        }
        STRATA_ASSIGN(std::string piece, format_one(spec, *arg));
        out += piece;
        if (out.size() > kMaxPrintedBytes) return err("formatted text is too long");
    }
    if (!mapping && next < args.size()) {
        return err("not all arguments converted during string formatting");
    }
    return out;
}

Result<std::string> brace_format(const std::string& s, const CallArgs& a) {
    std::string out;
    size_t next_auto = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '}') {
            if (i + 1 >= s.size() || s[i + 1] != '}') {
                return err("Single '}' encountered in format string");
            }
            ++i;
            out += '}';
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < s.size() && s[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const size_t close = s.find('}', i);
        if (close == std::string::npos) return err("Single '{' encountered in format string");
        const std::string field = s.substr(i + 1, close - i - 1);
        if (field.find_first_of(":!.[") != std::string::npos) {
            return err("format fields such as '{", field,
                       "}' are not supported; use {}, {0} or "
                       "{name}");
        }
        const Value* v = nullptr;
        if (field.empty() || field.find_first_not_of("0123456789") == std::string::npos) {
            const size_t idx = field.empty() ? next_auto++ : std::stoul(field.substr(0, 9));
            if (idx >= a.positional.size()) {
                return err("Replacement index ", std::to_string(idx),
                           " out of range for positional args tuple");
            }
            v = &a.positional[idx];
        } else {
            for (const auto& [k, val] : a.keyword) {
                if (k == field) v = &val;
            }
            if (!v) return err("KeyError: '", field, "'");
        }
        STRATA_ASSIGN(std::string text, to_str(*v));
        out += text;
        if (out.size() > kMaxPrintedBytes) return err("formatted text is too long");
        i = close;
    }
    return out;
}

}  // namespace strata::jinja
