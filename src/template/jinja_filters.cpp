// Jinja2's builtin filters on strings and numbers, and the filter table, with the argument
// names, defaults and edge cases of jinja2 3.1 (e.g. `round` rounds half to even like Python's
// round(); `truncate` has a leeway of 5; `int` accepts "42.5"). Filters over sequences are in
// jinja_sequence_filters.cpp.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "template/jinja_builtins.h"
#include "template/jinja_filter_support.h"
#include "template/jinja_renderer.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace filter_support {

Result<std::string> str_of(const Value& v) {
    return to_str(v);
}

Result<int64_t> int_arg(const std::optional<Value>& v, std::string_view what, int64_t dflt) {
    if (!v || v->is_none()) return dflt;
    if (!v->is_integral()) return err(what, " must be an integer, not ", type_name(*v));
    return v->as_int();
}

bool bool_arg(const std::optional<Value>& v, bool dflt) {
    return v ? truthy(*v) : dflt;
}

Result<std::string> str_arg(const std::optional<Value>& v, std::string dflt) {
    if (!v) return dflt;
    return to_str(*v);
}

// Looks up "a.b.0" on an item, each part as obj[part] (numbers index sequences).
Result<Value> attribute_path(Renderer& r, const Value& item, const Value& attribute) {
    if (attribute.is_integral()) return r.get_item(item, attribute);
    STRATA_ASSIGN(std::string path, to_str(attribute));
    Value cur = item;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
        int64_t index = 0;
        auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
        const bool numeric = ec == std::errc() && p == part.data() + part.size() && !part.empty();
        STRATA_ASSIGN(cur, r.get_item(cur, numeric ? Value::integer(index) : Value::string(part)));
        if (dot == std::string::npos) return cur;
        start = dot + 1;
    }
}

// Sort keys ignore case unless asked not to (jinja2's ignore_case postprocessing).
Value fold_case(const Value& v, bool case_sensitive) {
    if (case_sensitive || !v.is_string()) return v;
    return Value::string(unicode::lower(v.str()));
}

Result<Value> key_of(Renderer& r, const Value& item, const std::optional<Value>& attribute,
                     bool case_sensitive) {
    if (!attribute || attribute->is_none()) return fold_case(item, case_sensitive);
    STRATA_ASSIGN(Value v, attribute_path(r, item, *attribute));
    return fold_case(v, case_sensitive);
}

// Stable sort by precomputed keys; comparison errors (mixed types) are reported.
Result<std::vector<size_t>> sorted_order(Renderer& r, const std::vector<Value>& keys,
                                         bool reverse) {
    uint64_t log_n = 1;
    while ((uint64_t{1} << log_n) < keys.size()) ++log_n;
    STRATA_TRY(r.charge(keys.size() * log_n));
    std::vector<size_t> order(keys.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::optional<Error> failure;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (failure) return false;
        auto lt = reverse ? less_than(keys[b], keys[a]) : less_than(keys[a], keys[b]);
        if (!lt) {
            failure = lt.take_error();
            return false;
        }
        return *lt;
    });
    if (failure) return std::move(*failure);
    return order;
}

}  // namespace filter_support

namespace {

using namespace filter_support;

// ---- filters ----

Result<Value> f_abs(Renderer&, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("abs", a, {}));
    if (v.is_float()) return Value::number(std::fabs(v.as_double()));
    if (v.is_integral()) {
        if (v.as_int() == std::numeric_limits<int64_t>::min()) return err("integer overflow");
        return Value::integer(std::llabs(v.as_int()));
    }
    if (v.is_undefined()) return err(v.undefined_hint());
    return err("bad operand type for abs(): '", type_name(v), "'");
}

Result<Value> f_attr(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("attr", a, {"name"}, 1));
    STRATA_ASSIGN(std::string name, str_of(*p[0]));
    // Attributes only: a dict's keys are items, not attributes.
    if (v.is_dict() && !has_method(v, name)) {
        return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    return r.get_attribute(v, name);
}

Result<Value> f_capitalize(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("capitalize", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    return r.make_string(capitalize(s));
}

Result<Value> f_center(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("center", a, {"width"}));
    STRATA_ASSIGN(int64_t width, int_arg(p[0], "width", 80));
    STRATA_ASSIGN(std::string s, str_of(v));
    const auto len = static_cast<int64_t>(unicode::code_point_count(s));
    if (width <= len) return r.make_string(std::move(s));
    if (static_cast<uint64_t>(width) > r.limits().max_string_bytes)
        return err("center width is too large");
    const int64_t margin = width - len;
    const int64_t left = margin / 2 + (margin & width & 1);  // CPython's str.center split
    return r.make_string(std::string(static_cast<size_t>(left), ' ') + s +
                         std::string(static_cast<size_t>(margin - left), ' '));
}

Result<Value> f_default(Renderer&, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("default", a, {"default_value", "boolean"}));
    const bool boolean = bool_arg(p[1], false);
    if (v.is_undefined() || (boolean && !truthy(v))) {
        return p[0] ? *p[0] : Value::string("");
    }
    return v;
}

Result<Value> f_escape(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("escape", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return r.make_string(std::move(out));
}

// Python's float(str): optional whitespace, sign, digits with '_' separators, inf and nan.
std::optional<double> parse_python_float(std::string_view s) {
    s = unicode::strip_space(s);
    std::string clean;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_') {
            if (i == 0 || i + 1 == s.size() || !unicode::is_ascii_digit(s[i - 1]) ||
                !unicode::is_ascii_digit(s[i + 1])) {
                return std::nullopt;
            }
            continue;
        }
        clean += s[i];
    }
    if (clean.empty()) return std::nullopt;
    std::string lower = unicode::lower(clean);
    const size_t sign = (lower[0] == '+' || lower[0] == '-') ? 1 : 0;
    const std::string body = lower.substr(sign);
    if (body == "inf" || body == "infinity" || body == "nan") {
        const double x = body == "nan" ? std::nan("") : std::numeric_limits<double>::infinity();
        return lower[0] == '-' ? -x : x;
    }
    for (char c : body) {
        if (!unicode::is_ascii_digit(c) && c != '.' && c != 'e' && c != '+' && c != '-') {
            return std::nullopt;
        }
    }
    return parse_decimal(clean);
}

// Python's int(str, base): whitespace, sign, optional 0x/0o/0b prefix, '_' between digits.
std::optional<int64_t> parse_python_int(std::string_view s, int64_t base) {
    s = unicode::strip_space(s);
    bool negative = false;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        negative = s[0] == '-';
        s.remove_prefix(1);
    }
    auto has_prefix = [&](char p) {
        return s.size() > 2 && s[0] == '0' && (s[1] == p || s[1] == p - 32);
    };
    if (base == 0) {
        base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
        if (base != 10) s.remove_prefix(2);
    } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) ||
               (base == 2 && has_prefix('b'))) {
        s.remove_prefix(2);
    }
    if (base < 2 || base > 36 || s.empty()) return std::nullopt;
    int64_t v = 0;
    bool prev_digit = false;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '_') {
            if (!prev_digit || i + 1 == s.size()) return std::nullopt;
            prev_digit = false;
            continue;
        }
        const int d = unicode::is_ascii_digit(c) ? c - '0'
                      : (c >= 'a' && c <= 'z')   ? c - 'a' + 10
                      : (c >= 'A' && c <= 'Z')   ? c - 'A' + 10
                                                 : 99;
        if (d >= base) return std::nullopt;
        if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) {
            return std::nullopt;
        }
        prev_digit = true;
    }
    return negative ? -v : v;
}

Result<Value> f_float(Renderer&, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("float", a, {"default"}));
    const Value dflt = p[0] ? *p[0] : Value::number(0.0);
    if (v.is_undefined()) return err(v.undefined_hint());
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
        if (auto x = parse_python_float(v.str())) return Value::number(*x);
    }
    return dflt;
}

Result<Value> f_int(Renderer&, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("int", a, {"default", "base"}));
    const Value dflt = p[0] ? *p[0] : Value::integer(0);
    STRATA_ASSIGN(int64_t base, int_arg(p[1], "base", 10));
    if (v.is_undefined()) return err(v.undefined_hint());
    if (v.is_integral()) return Value::integer(v.as_int());
    std::optional<double> x;
    if (v.is_float()) {
        x = v.as_double();
    } else if (v.is_string()) {
        if (auto i = parse_python_int(v.str(), base)) return Value::integer(*i);
        x = parse_python_float(v.str());  // "42.23"|int is 42, as in jinja2
    }
    if (!x || std::isnan(*x)) return dflt;
    if (std::isinf(*x)) return err("cannot convert float infinity to integer");
    const double t = std::trunc(*x);
    if (t < -9.2233720368547758e18 || t >= 9.2233720368547758e18) return err("integer overflow");
    return Value::integer(static_cast<int64_t>(t));
}

Result<Value> f_format(Renderer& r, Value& v, CallArgs& a) {
    if (!a.positional.empty() && !a.keyword.empty()) {
        return err("format can't handle positional and keyword arguments at the same time");
    }
    STRATA_ASSIGN(std::string fmt, str_of(v));
    Value values;
    if (!a.keyword.empty()) {
        DictData d;
        for (auto& [k, val] : a.keyword) d.set(Value::string(k), val);
        STRATA_ASSIGN(values, Value::dict(std::move(d)));
    } else {
        STRATA_ASSIGN(values, Value::list(std::move(a.positional), true));
    }
    STRATA_ASSIGN(std::string text, percent_format(fmt, values));
    return r.make_string(std::move(text));
}

Result<Value> f_indent(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("indent", a, {"width", "first", "blank"}));
    std::string pad = "    ";
    if (p[0] && p[0]->is_string()) {
        pad = p[0]->str();
    } else if (p[0]) {
        STRATA_ASSIGN(int64_t w, int_arg(p[0], "width", 4));
        pad = std::string(static_cast<size_t>(std::clamp<int64_t>(w, 0, 1 << 16)), ' ');
    }
    const bool first = bool_arg(p[1], false), blank = bool_arg(p[2], false);
    STRATA_ASSIGN(std::string s, str_of(v));
    s += '\n';  // as jinja2 does, so that splitlines() sees a final line
    // str.splitlines(): lines end at any Unicode line break; "\r\n" is one break.
    std::vector<std::string_view> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        const char32_t c = unicode::next_code_point(s, i);
        if (!unicode::is_line_break(c)) continue;
        lines.push_back(std::string_view(s).substr(start, at - start));
        if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
        start = i;
    }
    if (start < s.size()) lines.push_back(std::string_view(s).substr(start));
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += '\n';
            if (blank || !lines[i].empty()) out += pad;
        }
        out += lines[i];
        if (out.size() > r.limits().max_string_bytes) return err("indent result is too large");
    }
    if (first) out = pad + out;
    return r.make_string(std::move(out));
}

Result<Value> f_length(Renderer&, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("length", a, {}));
    STRATA_ASSIGN(int64_t n, length(v));
    return Value::integer(n);
}

Result<Value> f_lower(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("lower", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    return r.make_string(unicode::lower(s));
}

Result<Value> f_upper(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("upper", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    return r.make_string(unicode::upper(s));
}

Result<Value> f_replace(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("replace", a, {"old", "new", "count"}, 2));
    STRATA_ASSIGN(std::string old_s, str_of(*p[0]));
    STRATA_ASSIGN(std::string new_s, str_of(*p[1]));
    STRATA_ASSIGN(int64_t count, int_arg(p[2], "count", -1));
    STRATA_ASSIGN(std::string s, str_of(v));
    CallArgs m;
    m.positional = {Value::string(old_s), Value::string(new_s), Value::integer(count)};
    return call_method(r, Value::string(std::move(s)), "replace", m);
}

Result<Value> f_round(Renderer&, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("round", a, {"precision", "method"}));
    STRATA_ASSIGN(int64_t precision, int_arg(p[0], "precision", 0));
    STRATA_ASSIGN(std::string method, str_arg(p[1], "common"));
    if (method != "common" && method != "ceil" && method != "floor") {
        return err("method must be 'common', 'ceil' or 'floor'");
    }
    if (v.is_undefined()) return err(v.undefined_hint());
    if (!v.is_number()) return err("type ", type_name(v), " doesn't define __round__ method");
    precision = std::clamp<int64_t>(precision, -400, 400);
    if (method != "common") {
        const double scale = std::pow(10.0, static_cast<double>(precision));
        const double x = v.as_double() * scale;
        return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
    }
    if (v.is_integral()) {  // round(int, n) stays an int
        if (precision >= 0) return Value::integer(v.as_int());
        const double scale = std::pow(10.0, static_cast<double>(-precision));
        return Value::integer(
            static_cast<int64_t>(std::nearbyint(static_cast<double>(v.as_int()) / scale) * scale));
    }
    const double x = v.as_double();
    if (!std::isfinite(x)) return v;
    if (precision < 0) {
        const double scale = std::pow(10.0, static_cast<double>(-precision));
        return Value::number(std::nearbyint(x / scale) * scale);
    }
    // Correctly rounded, half to even on the exact binary value: what Python's round() does.
    char buf[512];
    auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed,
                             static_cast<int>(std::min<int64_t>(precision, 340)));
    if (res.ec != std::errc()) return v;
    const auto rounded = parse_decimal(std::string_view(buf, static_cast<size_t>(res.ptr - buf)));
    return rounded ? Value::number(*rounded) : v;
}

Result<Value> f_safe(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("safe", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    return r.make_string(std::move(s));
}

Result<Value> f_string(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("string", a, {}));
    if (v.is_string()) return v;
    STRATA_ASSIGN(std::string s, str_of(v));
    return r.make_string(std::move(s));
}

Result<Value> f_title(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("title", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    // jinja2's title: words begin after '-', whitespace or an opening bracket; each word gets
    // its first character upper-cased and the rest lower-cased.
    std::string out;
    bool word_start = true;
    for (size_t i = 0; i < s.size();) {
        const char32_t c = unicode::next_code_point(s, i);
        const bool separator =
            c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
        if (separator) {
            unicode::append_utf8(out, c);
            word_start = true;
        } else {
            unicode::append_utf8(out, word_start ? unicode::to_upper(c) : unicode::to_lower(c));
            word_start = false;
        }
    }
    return r.make_string(std::move(out));
}

Result<Value> f_tojson(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p,
                  bind_args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"}));
    JsonFormat fmt;
    fmt.ensure_ascii = bool_arg(p[0], false);
    if (p[1] && !p[1]->is_none()) {
        if (p[1]->is_string()) {
            fmt.indent = p[1]->str();
        } else if (p[1]->is_integral()) {
            fmt.indent =
                std::string(static_cast<size_t>(std::clamp<int64_t>(p[1]->as_int(), 0, 1024)), ' ');
        } else {
            return err("tojson indent must be an integer or a string");
        }
        fmt.item_separator = ",";
    }
    if (p[2] && !p[2]->is_none()) {
        if (!p[2]->is_list() || p[2]->items().size() != 2 || !p[2]->items()[0].is_string() ||
            !p[2]->items()[1].is_string()) {
            return err("tojson separators must be a pair of strings");
        }
        fmt.item_separator = p[2]->items()[0].str();
        fmt.key_separator = p[2]->items()[1].str();
    }
    fmt.sort_keys = bool_arg(p[3], false);
    fmt.max_bytes = r.limits().max_string_bytes;
    STRATA_ASSIGN(std::string text, to_json_text(v, fmt));
    return r.make_string(std::move(text));
}

Result<Value> f_trim(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("trim", a, {"chars"}));
    STRATA_ASSIGN(std::string s, str_of(v));
    CallArgs m;
    if (p[0]) m.positional.push_back(*p[0]);
    return call_method(r, Value::string(std::move(s)), "strip", m);
}

Result<Value> f_truncate(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("truncate", a, {"length", "killwords", "end", "leeway"}));
    STRATA_ASSIGN(int64_t len, int_arg(p[0], "length", 255));
    const bool killwords = bool_arg(p[1], false);
    STRATA_ASSIGN(std::string end, str_arg(p[2], "..."));
    STRATA_ASSIGN(int64_t leeway, int_arg(p[3], "leeway", 5));
    STRATA_ASSIGN(std::string s, str_of(v));
    const std::u32string cps = unicode::decode(s);
    const auto end_len = static_cast<int64_t>(unicode::code_point_count(end));
    if (len < end_len)
        return err("expected length >= ", std::to_string(end_len), ", got ", std::to_string(len));
    if (leeway < 0) return err("expected leeway >= 0, got ", std::to_string(leeway));
    if (static_cast<int64_t>(cps.size()) <= len + leeway) return r.make_string(std::move(s));
    std::u32string head = cps.substr(0, static_cast<size_t>(len - end_len));
    if (!killwords) {
        const size_t space = head.rfind(U' ');
        if (space != std::u32string::npos) head = head.substr(0, space);
    }
    return r.make_string(unicode::encode(head) + end);
}

Result<Value> f_wordcount(Renderer&, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("wordcount", a, {}));
    STRATA_ASSIGN(std::string s, str_of(v));
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.size();) {
        const bool w = unicode::is_word_char(unicode::next_code_point(s, i));
        if (w && !in_word) ++words;
        in_word = w;
    }
    return Value::integer(words);
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
    static const std::unordered_map<std::string_view, FilterFn> table = {
        {"abs", f_abs},
        {"attr", f_attr},
        {"batch", f_batch},
        {"capitalize", f_capitalize},
        {"center", f_center},
        {"count", f_length},
        {"d", f_default},
        {"default", f_default},
        {"dictsort", f_dictsort},
        {"e", f_escape},
        {"escape", f_escape},
        {"first", f_first},
        {"float", f_float},
        {"format", f_format},
        {"indent", f_indent},
        {"int", f_int},
        {"items", f_items},
        {"join", f_join},
        {"last", f_last},
        {"length", f_length},
        {"list", f_list},
        {"lower", f_lower},
        {"map", f_map},
        {"max", f_max},
        {"min", f_min},
        {"reject", f_reject},
        {"rejectattr", f_rejectattr},
        {"replace", f_replace},
        {"reverse", f_reverse},
        {"round", f_round},
        {"safe", f_safe},
        {"select", f_select},
        {"selectattr", f_selectattr},
        {"sort", f_sort},
        {"string", f_string},
        {"sum", f_sum},
        {"title", f_title},
        {"tojson", f_tojson},
        {"trim", f_trim},
        {"truncate", f_truncate},
        {"unique", f_unique},
        {"upper", f_upper},
        {"wordcount", f_wordcount},
    };
    return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
    const auto& t = filter_table();
    auto it = t.find(name);
    return it == t.end() ? nullptr : it->second;
}

}  // namespace strata::jinja
