// Filters over sequences and mappings: first, last, join, map, select/reject(attr), sort,
// unique, min, max, sum, dictsort, items, batch, list, reverse. Like jinja2 3.1, sorting and
// de-duplication ignore case unless case_sensitive=true; filters that return generators in
// jinja2 (map, select, reverse, ...) return lists here.
#include <algorithm>
#include <unordered_set>

#include "template/jinja_builtins.h"
#include "template/jinja_filter_support.h"
#include "template/jinja_renderer.h"
#include "template/jinja_unicode.h"

namespace strata::jinja::filter_support {

Result<Value> f_batch(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("batch", a, {"linecount", "fill_with"}, 1));
    STRATA_ASSIGN(int64_t n, int_arg(p[0], "batch size", 1));
    if (n <= 0) return err("batch size must be positive");
    if (static_cast<uint64_t>(n) > r.limits().max_list_items) {
        return err("batch size ", std::to_string(n), " passes the list limit of ",
                   std::to_string(r.limits().max_list_items), " items");
    }
    STRATA_ASSIGN(auto items, iterate(v));
    std::vector<Value> out, cur;
    for (auto& item : items) {
        cur.push_back(std::move(item));
        if (static_cast<int64_t>(cur.size()) == n) {
            STRATA_ASSIGN(Value b, r.make_list(std::move(cur)));
            out.push_back(std::move(b));
            cur.clear();
        }
    }
    if (!cur.empty()) {
        if (p[1] && !p[1]->is_none()) {
            while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*p[1]);
        }
        STRATA_ASSIGN(Value b, r.make_list(std::move(cur)));
        out.push_back(std::move(b));
    }
    return r.make_list(std::move(out));
}

Result<Value> f_dictsort(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("dictsort", a, {"case_sensitive", "by", "reverse"}));
    if (v.is_undefined()) return err(v.undefined_hint());
    if (!v.is_dict()) return err("dictsort needs a mapping, not ", type_name(v));
    const bool case_sensitive = bool_arg(p[0], false);
    STRATA_ASSIGN(std::string by, str_arg(p[1], "key"));
    if (by != "key" && by != "value") return err("You can only sort by either 'key' or 'value'");
    const bool reverse = bool_arg(p[2], false);
    const auto& entries = v.dict_data().entries();
    std::vector<Value> keys;
    for (const auto& [k, val] : entries)
        keys.push_back(fold_case(by == "key" ? k : val, case_sensitive));
    STRATA_ASSIGN(auto order, sorted_order(r, keys, reverse));
    std::vector<Value> out;
    for (size_t i : order) {
        STRATA_ASSIGN(Value pair, Value::list({entries[i].first, entries[i].second}, true));
        out.push_back(std::move(pair));
    }
    return r.make_list(std::move(out));
}

Result<Value> f_first(Renderer&, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("first", a, {}));
    if (v.is_list()) {  // without copying the list
        if (v.items().empty()) return Value::undefined("No first item, sequence was empty.");
        return v.items().front();
    }
    STRATA_ASSIGN(auto items, iterate(v));
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Result<Value> f_last(Renderer&, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("last", a, {}));
    if (v.is_list()) {
        if (v.items().empty()) return Value::undefined("No last item, sequence was empty.");
        return v.items().back();
    }
    STRATA_ASSIGN(auto items, iterate(v));
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Result<Value> f_items(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("items", a, {}));
    if (v.is_undefined()) return r.make_list({});
    if (!v.is_dict()) return err("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [k, val] : v.dict_data().entries()) {
        STRATA_ASSIGN(Value pair, Value::list({k, val}, true));
        out.push_back(std::move(pair));
    }
    return r.make_list(std::move(out));
}

Result<Value> f_join(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("join", a, {"d", "attribute"}));
    STRATA_ASSIGN(std::string sep, str_arg(p[0], ""));
    STRATA_ASSIGN(auto items, iterate(v));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        Value item = items[i];
        if (p[1] && !p[1]->is_none()) {
            STRATA_ASSIGN(item, attribute_path(r, item, *p[1]));
        }
        STRATA_ASSIGN(std::string s, str_of(item));
        if (i) out += sep;
        out += s;
        if (out.size() > r.limits().max_string_bytes) return err("join result is too large");
    }
    return r.make_string(std::move(out));
}

Result<Value> f_list(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("list", a, {}));
    STRATA_ASSIGN(auto items, iterate(v));
    return r.make_list(std::move(items));
}

Result<Value> f_map(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(auto items, iterate(v));
    std::vector<Value> out;
    out.reserve(items.size());
    if (a.positional.empty()) {
        // map(attribute='x', default=...)
        std::optional<Value> attribute, dflt;
        for (auto& [k, val] : a.keyword) {
            if (k == "attribute") {
                attribute = val;
            } else if (k == "default") {
                dflt = val;
            } else {
                return err("Unexpected keyword argument '", k, "'");
            }
        }
        if (!attribute) return err("map requires a filter argument");
        for (const auto& item : items) {
            STRATA_ASSIGN(Value x, attribute_path(r, item, *attribute));
            if (x.is_undefined() && dflt && !dflt->is_none()) x = *dflt;
            out.push_back(std::move(x));
        }
        return r.make_list(std::move(out));
    }
    STRATA_ASSIGN(std::string name, str_of(a.positional[0]));
    for (const auto& item : items) {
        CallArgs sub;
        sub.positional.assign(a.positional.begin() + 1, a.positional.end());
        sub.keyword = a.keyword;
        STRATA_ASSIGN(Value x, r.apply_filter(name, item, sub));
        out.push_back(std::move(x));
    }
    return r.make_list(std::move(out));
}

namespace {

Result<Value> min_or_max(Renderer& r, Value& v, CallArgs& a, bool want_max) {
    STRATA_ASSIGN(Args p, bind_args(want_max ? "max" : "min", a, {"case_sensitive", "attribute"}));
    const bool case_sensitive = bool_arg(p[0], false);
    STRATA_ASSIGN(auto items, iterate(v));
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    STRATA_ASSIGN(Value best_key, key_of(r, items[0], p[1], case_sensitive));
    for (size_t i = 1; i < items.size(); ++i) {
        STRATA_ASSIGN(Value k, key_of(r, items[i], p[1], case_sensitive));
        STRATA_ASSIGN(bool better, want_max ? less_than(best_key, k) : less_than(k, best_key));
        if (better) {
            best = i;
            best_key = std::move(k);
        }
    }
    return items[best];
}

}  // namespace

Result<Value> f_max(Renderer& r, Value& v, CallArgs& a) {
    return min_or_max(r, v, a, true);
}

Result<Value> f_min(Renderer& r, Value& v, CallArgs& a) {
    return min_or_max(r, v, a, false);
}

Result<Value> f_reverse(Renderer& r, Value& v, CallArgs& a) {
    STRATA_TRY(bind_args("reverse", a, {}));
    if (v.is_string()) {
        std::u32string cps = unicode::decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return r.make_string(unicode::encode(cps));
    }
    STRATA_ASSIGN(auto items, iterate(v));
    std::reverse(items.begin(), items.end());
    return r.make_list(std::move(items));
}

namespace {

Result<Value> select_impl(Renderer& r, Value& v, CallArgs& a, bool by_attribute, bool keep) {
    STRATA_ASSIGN(auto items, iterate(v));
    size_t next = 0;
    std::optional<Value> attribute;
    if (by_attribute) {
        if (a.positional.empty()) return err("Missing parameter for attribute name");
        attribute = a.positional[next++];
    }
    std::optional<std::string> test;
    if (next < a.positional.size()) {
        STRATA_ASSIGN(test, str_of(a.positional[next++]));
    }
    std::vector<Value> out;
    for (const auto& item : items) {
        Value x = item;
        if (attribute) {
            STRATA_ASSIGN(x, attribute_path(r, item, *attribute));
        }
        bool passed;
        if (test) {
            CallArgs sub;
            sub.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next),
                                  a.positional.end());
            sub.keyword = a.keyword;
            STRATA_ASSIGN(passed, r.apply_test(*test, x, sub));
        } else {
            passed = truthy(x);
        }
        if (passed == keep) out.push_back(item);
    }
    return r.make_list(std::move(out));
}

}  // namespace

Result<Value> f_select(Renderer& r, Value& v, CallArgs& a) {
    return select_impl(r, v, a, false, true);
}

Result<Value> f_reject(Renderer& r, Value& v, CallArgs& a) {
    return select_impl(r, v, a, false, false);
}

Result<Value> f_selectattr(Renderer& r, Value& v, CallArgs& a) {
    return select_impl(r, v, a, true, true);
}

Result<Value> f_rejectattr(Renderer& r, Value& v, CallArgs& a) {
    return select_impl(r, v, a, true, false);
}

Result<Value> f_sort(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("sort", a, {"reverse", "case_sensitive", "attribute"}));
    const bool reverse = bool_arg(p[0], false), case_sensitive = bool_arg(p[1], false);
    STRATA_ASSIGN(auto items, iterate(v));
    // attribute="a,b" sorts by several attributes in turn.
    std::vector<std::optional<Value>> attributes;
    if (p[2] && p[2]->is_string() && p[2]->str().find(',') != std::string::npos) {
        const std::string& all = p[2]->str();
        size_t start = 0;
        while (true) {
            const size_t comma = all.find(',', start);
            const auto part =
                unicode::strip_space(std::string_view(all).substr(start, comma - start));
            attributes.emplace_back(Value::string(std::string(part)));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    } else {
        attributes.push_back(p[2]);
    }
    std::vector<Value> keys;
    for (const auto& item : items) {
        std::vector<Value> parts;
        for (const auto& attr : attributes) {
            STRATA_ASSIGN(Value k, key_of(r, item, attr, case_sensitive));
            parts.push_back(std::move(k));
        }
        if (parts.size() == 1) {
            keys.push_back(std::move(parts[0]));
        } else {
            STRATA_ASSIGN(Value t, Value::list(std::move(parts), true));
            keys.push_back(std::move(t));
        }
    }
    STRATA_ASSIGN(auto order, sorted_order(r, keys, reverse));
    std::vector<Value> out;
    out.reserve(items.size());
    for (size_t i : order) out.push_back(items[i]);
    return r.make_list(std::move(out));
}

Result<Value> f_sum(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("sum", a, {"attribute", "start"}));
    Value total = p[1] ? *p[1] : Value::integer(0);
    if (total.is_string()) return err("sum() can't sum strings [use ''.join(seq) instead]");
    STRATA_ASSIGN(auto items, iterate(v));
    for (const auto& item : items) {
        Value x = item;
        if (p[0] && !p[0]->is_none()) {
            STRATA_ASSIGN(x, attribute_path(r, item, *p[0]));
        }
        STRATA_ASSIGN(total, binary_op(r, BinaryOp::Add, total, x));
    }
    return total;
}

Result<Value> f_unique(Renderer& r, Value& v, CallArgs& a) {
    STRATA_ASSIGN(Args p, bind_args("unique", a, {"case_sensitive", "attribute"}));
    const bool case_sensitive = bool_arg(p[0], false);
    STRATA_ASSIGN(auto items, iterate(v));
    // Strings and numbers (the usual items) are found by hashing; other keys by comparison.
    std::unordered_set<std::string> seen_strings;
    std::unordered_set<double> seen_numbers;
    std::vector<Value> seen_other, out;
    for (const auto& item : items) {
        STRATA_ASSIGN(Value k, key_of(r, item, p[1], case_sensitive));
        bool dup = false;
        if (k.is_string()) {
            dup = !seen_strings.insert(k.str()).second;
        } else if (k.is_number()) {
            dup = !seen_numbers.insert(k.as_double()).second;
        } else {
            STRATA_TRY(r.charge(seen_other.size()));
            for (const auto& s : seen_other) {
                STRATA_ASSIGN(dup, equals(s, k));
                if (dup) break;
            }
            if (!dup) seen_other.push_back(std::move(k));
        }
        if (!dup) out.push_back(item);
    }
    return r.make_list(std::move(out));
}

}  // namespace strata::jinja::filter_support
