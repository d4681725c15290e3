// Global functions templates can call, and the argument binding that all builtins share.
//   range(...)            Python's range, at most 100000 items as in jinja2's sandbox
//   namespace(...)        an object whose attributes `{% set ns.x = ... %}` may assign
//   dict(...)             a dict from keyword arguments (and/or a mapping)
//   raise_exception(msg)  aborts rendering with msg (Hugging Face's helper)
//   strftime_now(fmt)     the current local time formatted (Hugging Face's helper); the clock
//                         can be fixed through RenderOptions::now
#include <ctime>
#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_renderer.h"

namespace strata::jinja {

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox MAX_RANGE

Result<Value> g_range(Renderer& r, CallArgs& a) {
    if (!a.keyword.empty()) return err("range() takes no keyword arguments");
    if (a.positional.empty() || a.positional.size() > 3) {
        return err("range expected 1 to 3 arguments, got ", std::to_string(a.positional.size()));
    }
    int64_t bounds[3] = {0, 0, 1};
    for (size_t i = 0; i < a.positional.size(); ++i) {
        const Value& v = a.positional[i];
        if (v.is_undefined()) return err(v.undefined_hint());
        if (!v.is_integral()) {
            return err("'", type_name(v), "' object cannot be interpreted as an integer");
        }
    }
    if (a.positional.size() == 1) {
        bounds[1] = a.positional[0].as_int();
    } else {
        bounds[0] = a.positional[0].as_int();
        bounds[1] = a.positional[1].as_int();
        if (a.positional.size() == 3) bounds[2] = a.positional[2].as_int();
    }
    const int64_t start = bounds[0], stop = bounds[1], step = bounds[2];
    if (step == 0) return err("range() arg 3 must not be zero");
    // Count without overflow: the span is computed in unsigned arithmetic.
    uint64_t count = 0;
    if (step > 0 && start < stop) {
        count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) /
                    static_cast<uint64_t>(step) +
                1;
    } else if (step < 0 && start > stop) {
        count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) /
                    (0 - static_cast<uint64_t>(step)) +
                1;
    }
    if (count > static_cast<uint64_t>(kMaxRange)) {
        return err("range too big: ", std::to_string(count),
                   " items, and templates may use at most ", std::to_string(kMaxRange),
                   " (as in jinja2's sandbox)");
    }
    std::vector<Value> items;
    items.reserve(count);
    int64_t x = start;
    for (uint64_t i = 0; i < count; ++i, x += (i < count ? step : 0))
        items.push_back(Value::integer(x));
    return r.make_list(std::move(items));
}

// dict(mapping_or_pairs?, **kwargs), the construction shared by dict() and namespace().
Result<DictData> dict_from_args(std::string_view fn, CallArgs& a) {
    if (a.positional.size() > 1) {
        return err(fn, "() expected at most 1 positional argument, got ",
                   std::to_string(a.positional.size()));
    }
    DictData d;
    if (!a.positional.empty()) {
        const Value& src = a.positional[0];
        if (src.is_dict()) {
            for (const auto& [k, v] : src.dict_data().entries()) d.set(k, v);
        } else if (src.is_list()) {
            for (const auto& pair : src.items()) {
                STRATA_ASSIGN(auto kv, iterate(pair));
                if (kv.size() != 2) {
                    return err(fn, "(): each element of the sequence must be a pair");
                }
                d.set(kv[0], kv[1]);
            }
        } else {
            return err(fn, "() argument must be a mapping or a sequence of pairs, not ",
                       type_name(src));
        }
    }
    for (auto& [k, v] : a.keyword) d.set(Value::string(k), v);
    return d;
}

Result<Value> g_dict(Renderer&, CallArgs& a) {
    STRATA_ASSIGN(DictData d, dict_from_args("dict", a));
    return Value::dict(std::move(d));
}

Result<Value> g_namespace(Renderer& r, CallArgs& a) {
    STRATA_ASSIGN(DictData d, dict_from_args("namespace", a));
    auto ns = std::make_shared<ObjectData>();
    ns->type = ObjectData::Type::Namespace;
    for (const auto& [k, v] : d.entries()) {
        if (v.depth() + 1 > kMaxValueDepth) return err("namespace value is nested too deeply");
        ns->attrs.set(k, v);
    }
    Value out = Value::object(std::move(ns));
    r.note_mutation(out);  // its attributes can be assigned later, possibly to itself
    return out;
}

Result<Value> g_raise_exception(Renderer&, CallArgs& a) {
    STRATA_ASSIGN(auto p, bind_args("raise_exception", a, {"message"}, 1));
    STRATA_ASSIGN(std::string message, to_str(*p[0]));
    return Error{std::move(message)};
}

Result<Value> g_strftime_now(Renderer& r, CallArgs& a) {
    STRATA_ASSIGN(auto p, bind_args("strftime_now", a, {"format"}, 1));
    if (!p[0]->is_string()) return err("strftime_now() format must be a string");
    const std::string& fmt = p[0]->str();
    if (fmt.size() > 256) return err("strftime_now() format is too long");
    const std::time_t now = r.options().now.value_or(std::time(nullptr));
    std::tm tm{};
    localtime_r(&now, &tm);
    if (fmt.empty()) return Value::string("");
    std::string buf(1024, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n == 0) return err("strftime_now() could not format '", fmt, "'");
    buf.resize(n);
    return Value::string(std::move(buf));
}

const std::unordered_map<std::string_view, Value>& global_table() {
    static const std::unordered_map<std::string_view, Value> table = {
        {"range", Value::callable("range", "<class 'range'>", g_range)},
        {"dict", Value::callable("dict", "<class 'dict'>", g_dict)},
        {"namespace",
         Value::callable("namespace", "<class 'jinja2.utils.Namespace'>", g_namespace)},
        {"raise_exception",
         Value::callable("raise_exception", "<function raise_exception>", g_raise_exception)},
        {"strftime_now",
         Value::callable("strftime_now", "<function strftime_now>", g_strftime_now)},
    };
    return table;
}

}  // namespace

const Value* find_global(std::string_view name) {
    const auto& t = global_table();
    auto it = t.find(name);
    return it == t.end() ? nullptr : &it->second;
}

Result<std::vector<std::optional<Value>>> bind_args(std::string_view function, CallArgs& args,
                                                    std::initializer_list<std::string_view> names,
                                                    size_t required) {
    std::vector<std::optional<Value>> out(names.size());
    if (args.positional.size() > names.size()) {
        return err(function, "() takes at most ", std::to_string(names.size()), " argument",
                   names.size() == 1 ? "" : "s", " (", std::to_string(args.positional.size()),
                   " given)");
    }
    for (size_t i = 0; i < args.positional.size(); ++i) out[i] = std::move(args.positional[i]);
    for (auto& [key, value] : args.keyword) {
        size_t i = 0;
        for (auto n : names) {
            if (n == key) break;
            ++i;
        }
        if (i == names.size()) {
            return err(function, "() got an unexpected keyword argument '", key, "'");
        }
        if (out[i]) return err(function, "() got multiple values for argument '", key, "'");
        out[i] = std::move(value);
    }
    size_t i = 0;
    for (auto n : names) {
        if (i < required && !out[i]) {
            return err(function, "() missing required argument '", n, "'");
        }
        ++i;
    }
    return out;
}

}  // namespace strata::jinja
