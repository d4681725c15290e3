// Methods of str, list and dict that templates call (`message.content.strip()`,
// `d.items()`, `ns.parts.append(x)`), with Python's semantics: string positions count code
// points, split() without a separator splits on runs of Unicode whitespace.
//
// Lists are mutable through append/pop/insert/extend as in Python (Hugging Face's immutable
// sandbox refuses these; templates written for llama.cpp use them).
#include <algorithm>
#include <unordered_set>

#include "template/jinja_builtins.h"
#include "template/jinja_renderer.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

using Args = std::vector<std::optional<Value>>;

const std::unordered_set<std::string_view>& string_methods() {
    static const std::unordered_set<std::string_view> names = {
        "capitalize", "count",        "endswith",     "find",       "format",  "index",  "isalnum",
        "isalpha",    "isdigit",      "islower",      "isspace",    "isupper", "join",   "lower",
        "lstrip",     "removeprefix", "removesuffix", "replace",    "rfind",   "rindex", "rsplit",
        "rstrip",     "split",        "splitlines",   "startswith", "strip",   "title",  "upper"};
    return names;
}

Result<std::string> string_arg(const Value& v, std::string_view method) {
    if (!v.is_string()) {
        return err(method, "() argument must be str, not ", type_name(v));
    }
    return v.str();
}

// Optional [start, end) code point range of find/count/startswith, clamped as Python slices.
Result<std::pair<size_t, size_t>> range_args(const std::optional<Value>& start,
                                             const std::optional<Value>& end, size_t len) {
    auto clamp = [len](const std::optional<Value>& v, size_t dflt) -> Result<size_t> {
        if (!v || v->is_none()) return dflt;
        if (!v->is_integral()) return err("slice indices must be integers or None");
        int64_t x = v->as_int();
        if (x < 0) x += static_cast<int64_t>(len);
        return static_cast<size_t>(std::clamp<int64_t>(x, 0, static_cast<int64_t>(len)));
    };
    STRATA_ASSIGN(size_t s, clamp(start, 0));
    STRATA_ASSIGN(size_t e, clamp(end, len));
    return std::make_pair(s, e);
}

std::u32string_view sub(const std::u32string& s, std::pair<size_t, size_t> r) {
    if (r.first >= r.second) return {};
    return std::u32string_view(s).substr(r.first, r.second - r.first);
}

bool in_set(char32_t c, const std::optional<std::u32string>& chars) {
    return chars ? chars->find(c) != std::u32string::npos : unicode::is_space(c);
}

Result<Value> strip(Renderer& r, const std::string& s, CallArgs& a, std::string_view name,
                    bool left, bool right) {
    STRATA_ASSIGN(Args p, bind_args(name, a, {"chars"}));
    std::optional<std::u32string> chars;
    if (p[0] && !p[0]->is_none()) {
        STRATA_ASSIGN(std::string c, string_arg(*p[0], name));
        chars = unicode::decode(c);
    }
    if (!chars) {
        std::string_view v = s;
        if (left) v = unicode::lstrip_space(v);
        if (right) v = unicode::rstrip_space(v);
        return r.make_string(std::string(v));
    }
    const std::u32string cps = unicode::decode(s);
    size_t b = 0, e = cps.size();
    if (left) {
        while (b < e && in_set(cps[b], chars)) ++b;
    }
    if (right) {
        while (e > b && in_set(cps[e - 1], chars)) --e;
    }
    return r.make_string(unicode::encode(std::u32string_view(cps).substr(b, e - b)));
}

Result<Value> split(Renderer& r, const std::string& s, CallArgs& a, bool from_right) {
    STRATA_ASSIGN(Args p, bind_args(from_right ? "rsplit" : "split", a, {"sep", "maxsplit"}));
    int64_t maxsplit = -1;
    if (p[1] && !p[1]->is_none()) {
        if (!p[1]->is_integral()) return err("maxsplit must be an integer");
        maxsplit = p[1]->as_int();
    }
    std::vector<std::string> parts;
    // Parts are counted as they are found: a long string of separators must not build
    // millions of them before the list limit is checked.
    const size_t max_parts = r.limits().max_list_items;
    auto too_many = [&] {
        return err("split would make more than ", std::to_string(max_parts), " parts");
    };
    if (!p[0] || p[0]->is_none()) {
        // Runs of whitespace separate; leading and trailing whitespace yields no empty parts.
        const std::u32string cps = unicode::decode(s);
        const auto n = static_cast<int64_t>(cps.size());
        int64_t splits = 0;
        if (!from_right) {
            int64_t i = 0;
            while (true) {
                while (i < n && unicode::is_space(cps[static_cast<size_t>(i)])) ++i;
                if (i >= n) break;
                if (maxsplit >= 0 && splits == maxsplit) {
                    parts.push_back(
                        unicode::encode(std::u32string_view(cps).substr(static_cast<size_t>(i))));
                    if (parts.size() > max_parts) return too_many();
                    break;
                }
                int64_t j = i;
                while (j < n && !unicode::is_space(cps[static_cast<size_t>(j)])) ++j;
                parts.push_back(unicode::encode(std::u32string_view(cps).substr(
                    static_cast<size_t>(i), static_cast<size_t>(j - i))));
                if (parts.size() > max_parts) return too_many();
                ++splits;
                i = j;
            }
        } else {
            int64_t i = n;  // exclusive end
            while (true) {
                while (i > 0 && unicode::is_space(cps[static_cast<size_t>(i - 1)])) --i;
                if (i <= 0) break;
                if (maxsplit >= 0 && splits == maxsplit) {
                    parts.push_back(unicode::encode(
                        std::u32string_view(cps).substr(0, static_cast<size_t>(i))));
                    if (parts.size() > max_parts) return too_many();
                    break;
                }
                int64_t j = i;
                while (j > 0 && !unicode::is_space(cps[static_cast<size_t>(j - 1)])) --j;
                parts.push_back(unicode::encode(std::u32string_view(cps).substr(
                    static_cast<size_t>(j), static_cast<size_t>(i - j))));
                if (parts.size() > max_parts) return too_many();
                ++splits;
                i = j;
            }
            std::reverse(parts.begin(), parts.end());
        }
    } else {
        STRATA_ASSIGN(std::string sep, string_arg(*p[0], "split"));
        if (sep.empty()) return err("empty separator");
        int64_t splits = 0;
        if (!from_right) {
            size_t start = 0;
            while (maxsplit < 0 || splits < maxsplit) {
                const size_t at = s.find(sep, start);
                if (at == std::string::npos) break;
                parts.push_back(s.substr(start, at - start));
                if (parts.size() > max_parts) return too_many();
                start = at + sep.size();
                ++splits;
            }
            parts.push_back(s.substr(start));
            if (parts.size() > max_parts) return too_many();
        } else {
            size_t end = s.size();
            while (maxsplit < 0 || splits < maxsplit) {
                if (end < sep.size()) break;
                const size_t at = s.rfind(sep, end - sep.size());
                if (at == std::string::npos) break;
                parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
                if (parts.size() > max_parts) return too_many();
                end = at;
                ++splits;
            }
            parts.push_back(s.substr(0, end));
            if (parts.size() > max_parts) return too_many();
            std::reverse(parts.begin(), parts.end());
        }
    }
    std::vector<Value> out;
    out.reserve(parts.size());
    for (auto& part : parts) out.push_back(Value::string(std::move(part)));
    return r.make_list(std::move(out));
}

Result<Value> replace(Renderer& r, const std::string& s, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("replace", a, {"old", "new", "count"}, 2));
    STRATA_ASSIGN(std::string old_s, string_arg(*p[0], "replace"));
    STRATA_ASSIGN(std::string new_s, string_arg(*p[1], "replace"));
    int64_t count = -1;
    if (p[2] && !p[2]->is_none()) {
        if (!p[2]->is_integral()) return err("replace count must be an integer");
        count = p[2]->as_int();
    }
    std::string out;
    auto grow = [&](std::string_view piece) -> Result<void> {
        if (out.size() + piece.size() > r.limits().max_string_bytes) {
            return err("replace result passes the string limit of ",
                       std::to_string(r.limits().max_string_bytes), " bytes");
        }
        out += piece;
        return {};
    };
    int64_t done = 0;
    if (old_s.empty()) {
        // Python inserts `new` before every character and at the end.
        for (size_t i = 0; i <= s.size();) {
            if (count < 0 || done < count) {
                STRATA_TRY(grow(new_s));
                ++done;
            }
            if (i == s.size()) break;
            const size_t start = i;
            unicode::next_code_point(s, i);
            STRATA_TRY(grow(std::string_view(s).substr(start, i - start)));
        }
        return r.make_string(std::move(out));
    }
    size_t start = 0;
    while (count < 0 || done < count) {
        const size_t at = s.find(old_s, start);
        if (at == std::string::npos) break;
        STRATA_TRY(grow(std::string_view(s).substr(start, at - start)));
        STRATA_TRY(grow(new_s));
        start = at + old_s.size();
        ++done;
    }
    STRATA_TRY(grow(std::string_view(s).substr(start)));
    return r.make_string(std::move(out));
}

// find/rfind/index/rindex/count share argument handling: (sub, start, end) in code points.
Result<Value> search(const std::string& s, CallArgs& a, std::string_view name) {
    STRATA_ASSIGN(Args p, bind_args(name, a, {"sub", "start", "end"}, 1));
    STRATA_ASSIGN(std::string needle_s, string_arg(*p[0], name));
    const std::u32string hay = unicode::decode(s);
    const std::u32string needle = unicode::decode(needle_s);
    STRATA_ASSIGN(auto range, range_args(p[1], p[2], hay.size()));
    if (range.first > range.second) {
        if (name == "count") return Value::integer(0);
        if (name == "index" || name == "rindex") return err("substring not found");
        return Value::integer(-1);
    }
    const std::u32string_view window =
        std::u32string_view(hay).substr(range.first, range.second - range.first);
    if (name == "count") {
        if (needle.empty()) return Value::integer(static_cast<int64_t>(window.size()) + 1);
        int64_t n = 0;
        for (size_t at = window.find(needle); at != std::u32string_view::npos;
             at = window.find(needle, at + needle.size())) {
            ++n;
        }
        return Value::integer(n);
    }
    const bool reverse = name == "rfind" || name == "rindex";
    const size_t at = reverse ? window.rfind(needle) : window.find(needle);
    if (at == std::u32string_view::npos) {
        if (name == "index" || name == "rindex") return err("substring not found");
        return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(range.first + at));
}

Result<Value> starts_or_ends(const std::string& s, CallArgs& a, bool starts) {
    const std::string_view name = starts ? "startswith" : "endswith";
    STRATA_ASSIGN(Args p, bind_args(name, a, {"prefix", "start", "end"}, 1));
    std::vector<std::string> candidates;
    if (p[0]->is_list() && p[0]->is_tuple()) {
        for (const auto& c : p[0]->items()) {
            STRATA_ASSIGN(std::string x, string_arg(c, name));
            candidates.push_back(std::move(x));
        }
    } else {
        if (!p[0]->is_string()) {
            return err(name, " first arg must be str or a tuple of str, not ", type_name(*p[0]));
        }
        candidates.push_back(p[0]->str());
    }
    std::string window = s;
    if (p[1] || p[2]) {
        const std::u32string cps = unicode::decode(s);
        STRATA_ASSIGN(auto range, range_args(p[1], p[2], cps.size()));
        if (range.first > range.second) return Value::boolean(false);
        window = unicode::encode(sub(cps, range));
    }
    for (const auto& c : candidates) {
        if (c.size() > window.size()) continue;
        if (starts ? window.compare(0, c.size(), c) == 0
                   : window.compare(window.size() - c.size(), c.size(), c) == 0) {
            return Value::boolean(true);
        }
    }
    return Value::boolean(false);
}

Result<Value> join(Renderer& r, const std::string& sep, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("join", a, {"iterable"}, 1));
    STRATA_ASSIGN(auto items, iterate(*p[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
            return err("sequence item ", std::to_string(i), ": expected str instance, ",
                       type_name(items[i]), " found");
        }
        if (i) out += sep;
        out += items[i].str();
        if (out.size() > r.limits().max_string_bytes) return err("join result is too large");
    }
    return r.make_string(std::move(out));
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred) {
    if (s.empty()) return Value::boolean(false);
    for (size_t i = 0; i < s.size();) {
        if (!pred(unicode::next_code_point(s, i))) return Value::boolean(false);
    }
    return Value::boolean(true);
}

bool is_digit_char(char32_t c) {
    return (c >= '0' && c <= '9') || (c >= 0x660 && c <= 0x669) || (c >= 0xFF10 && c <= 0xFF19);
}

Result<Value> string_method(Renderer& r, const std::string& s, std::string_view name, CallArgs& a) {
    if (name == "strip") return strip(r, s, a, name, true, true);
    if (name == "lstrip") return strip(r, s, a, name, true, false);
    if (name == "rstrip") return strip(r, s, a, name, false, true);
    if (name == "split") return split(r, s, a, false);
    if (name == "rsplit") return split(r, s, a, true);
    if (name == "replace") return replace(r, s, a);
    if (name == "startswith") return starts_or_ends(s, a, true);
    if (name == "endswith") return starts_or_ends(s, a, false);
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" ||
        name == "count") {
        return search(s, a, name);
    }
    if (name == "format") {
        STRATA_ASSIGN(std::string text, brace_format(s, a));
        return r.make_string(std::move(text));
    }
    if (name == "join") return join(r, s, a);
    if (name == "removeprefix" || name == "removesuffix") {
        STRATA_ASSIGN(Args p, bind_args(name, a, {"affix"}, 1));
        STRATA_ASSIGN(std::string affix, string_arg(*p[0], name));
        if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0) {
            return r.make_string(s.substr(affix.size()));
        }
        if (name == "removesuffix" && s.size() >= affix.size() &&
            s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
            return r.make_string(s.substr(0, s.size() - affix.size()));
        }
        return r.make_string(s);
    }
    if (name == "splitlines") {
        STRATA_ASSIGN(Args p, bind_args(name, a, {"keepends"}));
        const bool keep = p[0] && truthy(*p[0]);
        std::vector<Value> lines;
        size_t start = 0;
        for (size_t i = 0; i < s.size();) {
            const size_t at = i;
            const char32_t c = unicode::next_code_point(s, i);
            if (!unicode::is_line_break(c)) continue;
            if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
            lines.push_back(Value::string(s.substr(start, (keep ? i : at) - start)));
            start = i;
        }
        if (start < s.size()) lines.push_back(Value::string(s.substr(start)));
        return r.make_list(std::move(lines));
    }
    // The remaining methods take no arguments.
    STRATA_TRY(bind_args(name, a, {}));
    if (name == "upper") return r.make_string(unicode::upper(s));
    if (name == "lower") return r.make_string(unicode::lower(s));
    if (name == "title") return r.make_string(title_case_python(s));
    if (name == "capitalize") return r.make_string(capitalize(s));
    if (name == "isspace") return all_chars(s, unicode::is_space);
    if (name == "isdigit") return all_chars(s, is_digit_char);
    if (name == "isalnum") {
        return all_chars(s, [](char32_t c) { return unicode::is_word_char(c) && c != '_'; });
    }
    if (name == "isalpha") {
        return all_chars(s, [](char32_t c) {
            return unicode::is_word_char(c) && c != '_' && !is_digit_char(c);
        });
    }
    if (name == "isupper" || name == "islower") {
        const bool want_upper = name == "isupper";
        bool cased = false;
        for (size_t i = 0; i < s.size();) {
            const char32_t c = unicode::next_code_point(s, i);
            if (want_upper ? unicode::is_lower(c) : unicode::is_upper(c))
                return Value::boolean(false);
            cased = cased || unicode::is_cased(c);
        }
        return Value::boolean(cased);
    }
    return err("'str' object has no attribute '", name, "'");
}

Result<Value> dict_method(Renderer& r, const Value& d, std::string_view name, CallArgs& a) {
    const DictData& data = d.dict_data();
    if (name == "get") {
        STRATA_ASSIGN(Args p, bind_args("get", a, {"key", "default"}, 1));
        if (const Value* v = data.find(*p[0])) return *v;
        return p[1] ? *p[1] : Value::none();
    }
    STRATA_TRY(bind_args(name, a, {}));
    std::vector<Value> out;
    out.reserve(data.size());
    for (const auto& [k, v] : data.entries()) {
        if (name == "keys") {
            out.push_back(k);
        } else if (name == "values") {
            out.push_back(v);
        } else {
            STRATA_ASSIGN(Value pair, Value::list({k, v}, true));
            out.push_back(std::move(pair));
        }
    }
    return r.make_list(std::move(out));
}

Result<void> check_insert(Renderer& r, const Value& list, const Value& item, size_t adding) {
    if (list.items().size() + adding > r.limits().max_list_items) {
        return err("a list of more than ", std::to_string(r.limits().max_list_items),
                   " items passes the limit");
    }
    if (item.depth() + 1 > kMaxValueDepth) {
        return err("value is nested more than ", std::to_string(kMaxValueDepth), " levels deep");
    }
    return {};
}

Result<Value> list_method(Renderer& r, const Value& list, std::string_view name, CallArgs& a) {
    auto& items = list.list_data().items;
    if (name == "index" || name == "count") {
        STRATA_ASSIGN(Args p, bind_args(name, a, {"value"}, 1));
        int64_t n = 0;
        for (size_t i = 0; i < items.size(); ++i) {
            STRATA_ASSIGN(bool eq, equals(items[i], *p[0]));
            if (!eq) continue;
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++n;
        }
        if (name == "index") {
            STRATA_ASSIGN(std::string shown, to_repr(*p[0]));
            return err(shown, " is not in list");
        }
        return Value::integer(n);
    }
    r.note_mutation(list);
    ListData& data = list.list_data();
    if (name == "append") {
        STRATA_ASSIGN(Args p, bind_args("append", a, {"object"}, 1));
        STRATA_TRY(check_insert(r, list, *p[0], 1));
        data.depth = std::max(data.depth, p[0]->depth() + 1);
        items.push_back(*p[0]);
        return Value::none();
    }
    if (name == "insert") {
        STRATA_ASSIGN(Args p, bind_args("insert", a, {"index", "object"}, 2));
        if (!p[0]->is_integral()) return err("insert index must be an integer");
        STRATA_TRY(check_insert(r, list, *p[1], 1));
        int64_t i = p[0]->as_int();
        const auto n = static_cast<int64_t>(items.size());
        if (i < 0) i = std::max<int64_t>(0, i + n);
        i = std::min(i, n);
        data.depth = std::max(data.depth, p[1]->depth() + 1);
        items.insert(items.begin() + i, *p[1]);
        return Value::none();
    }
    if (name == "extend") {
        STRATA_ASSIGN(Args p, bind_args("extend", a, {"iterable"}, 1));
        STRATA_ASSIGN(auto more, iterate(*p[0]));
        for (const auto& item : more) {
            STRATA_TRY(check_insert(r, list, item, more.size()));
            data.depth = std::max(data.depth, item.depth() + 1);
        }
        items.insert(items.end(), more.begin(), more.end());
        return Value::none();
    }
    // pop
    STRATA_ASSIGN(Args p, bind_args("pop", a, {"index"}));
    if (items.empty()) return err("pop from empty list");
    int64_t i = -1;
    if (p[0]) {
        if (!p[0]->is_integral()) return err("pop index must be an integer");
        i = p[0]->as_int();
    }
    const auto n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return err("pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
}

}  // namespace

std::string title_case_python(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool previous_cased = false;
    for (size_t i = 0; i < s.size();) {
        const char32_t c = unicode::next_code_point(s, i);
        if (unicode::is_upper(c)) {
            unicode::append_utf8(out, previous_cased ? unicode::to_lower(c) : c);
            previous_cased = true;
        } else if (unicode::is_lower(c)) {
            unicode::append_utf8(out, previous_cased ? c : unicode::to_upper(c));
            previous_cased = true;
        } else {
            unicode::append_utf8(out, c);
            previous_cased = false;
        }
    }
    return out;
}

std::string capitalize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool first = true;
    for (size_t i = 0; i < s.size();) {
        const char32_t c = unicode::next_code_point(s, i);
        unicode::append_utf8(out, first ? unicode::to_upper(c) : unicode::to_lower(c));
        first = false;
    }
    return out;
}

bool has_method(const Value& object, std::string_view name) {
    switch (object.kind()) {
        case Kind::String:
            return string_methods().count(name) > 0;
        case Kind::Dict:
            return name == "items" || name == "keys" || name == "values" || name == "get";
        case Kind::List:
            if (name == "index" || name == "count") return true;
            return !object.is_tuple() &&
                   (name == "append" || name == "pop" || name == "insert" || name == "extend");
        default:
            return false;
    }
}

Result<Value> call_method(Renderer& r, const Value& object, std::string_view name, CallArgs& args) {
    switch (object.kind()) {
        case Kind::String:
            return string_method(r, object.str(), name, args);
        case Kind::Dict:
            return dict_method(r, object, name, args);
        case Kind::List:
            return list_method(r, object, name, args);
        default:
            break;
    }
    return err("'", type_name(object), "' object has no attribute '", name, "'");
}

}  // namespace strata::jinja
