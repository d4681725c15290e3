#include "template/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

constexpr size_t kIndexThreshold = 12;  // dicts up to this size are searched linearly

Error too_deep() {
    return err("value is nested more than ", std::to_string(kMaxValueDepth), " levels deep");
}

// Python's hash-equality for dict keys: 1, 1.0 and True are the same key.
bool same_key(const Value& a, const Value& b) {
    if (a.is_string() || b.is_string()) return a.is_string() && b.is_string() && a.str() == b.str();
    if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
    if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
    return a.same_object(b);
}

}  // namespace

// ---- DictData ----

const Value* DictData::find(std::string_view key) const {
    if (!string_index_.empty()) {
        auto it = string_index_.find(std::string(key));
        return it == string_index_.end() ? nullptr : &entries_[it->second].second;
    }
    for (const auto& [k, v] : entries_) {
        if (k.is_string() && k.str() == key) return &v;
    }
    return nullptr;
}

const Value* DictData::find(const Value& key) const {
    if (key.is_string()) return find(std::string_view(key.str()));
    for (const auto& [k, v] : entries_) {
        if (same_key(k, key)) return &v;
    }
    return nullptr;
}

void DictData::index_entry(size_t i) {
    const Value& k = entries_[i].first;
    if (k.is_string()) string_index_.emplace(k.str(), i);
}

void DictData::set(Value key, Value value) {
    for (auto& [k, v] : entries_) {
        if (same_key(k, key)) {
            v = std::move(value);
            return;
        }
    }
    entries_.emplace_back(std::move(key), std::move(value));
    if (!string_index_.empty()) {
        index_entry(entries_.size() - 1);
    } else if (entries_.size() > kIndexThreshold) {
        for (size_t i = 0; i < entries_.size(); ++i) index_entry(i);
    }
}

void DictData::clear() {
    entries_.clear();
    string_index_.clear();
}

// ---- Value ----

Value Value::undefined(std::string hint) {
    return Value(Kind::Undefined, std::make_shared<const std::string>(std::move(hint)));
}
Value Value::none() {
    return Value(Kind::None, std::monostate{});
}
Value Value::boolean(bool b) {
    return Value(Kind::Bool, b);
}
Value Value::integer(int64_t i) {
    return Value(Kind::Int, i);
}
Value Value::number(double d) {
    return Value(Kind::Float, d);
}
Value Value::string(std::string s) {
    return Value(Kind::String, std::make_shared<const std::string>(std::move(s)));
}
Value Value::string(std::shared_ptr<const std::string> s) {
    return Value(Kind::String, std::move(s));
}

Result<Value> Value::list(std::vector<Value> items, bool is_tuple) {
    int depth = 1;
    for (const auto& v : items) depth = std::max(depth, v.depth() + 1);
    if (depth > kMaxValueDepth) return too_deep();
    auto data = std::make_shared<ListData>();
    data->items = std::move(items);
    data->is_tuple = is_tuple;
    data->depth = depth;
    return Value(Kind::List, std::move(data));
}

Result<Value> Value::dict(DictData d) {
    int depth = 1;
    for (const auto& [k, v] : d.entries()) depth = std::max(depth, v.depth() + 1);
    if (depth > kMaxValueDepth) return too_deep();
    d.depth = depth;
    return Value(Kind::Dict, std::make_shared<DictData>(std::move(d)));
}

Value Value::object(std::shared_ptr<ObjectData> o) {
    return Value(Kind::Object, std::move(o));
}

Value Value::callable(std::string name, std::string repr, NativeFunction fn) {
    auto c = std::make_shared<Callable>();
    c->name = std::move(name);
    c->repr = std::move(repr);
    c->fn = std::move(fn);
    return Value(Kind::Callable, std::shared_ptr<const Callable>(std::move(c)));
}

int64_t Value::as_int() const {
    if (kind_ == Kind::Bool) return std::get<bool>(v_) ? 1 : 0;
    return std::get<int64_t>(v_);
}

double Value::as_double() const {
    if (kind_ == Kind::Float) return std::get<double>(v_);
    return static_cast<double>(as_int());
}

int Value::depth() const {
    switch (kind_) {
        case Kind::List:
            return list_data().depth;
        case Kind::Dict:
            return dict_data().depth;
        case Kind::Object:
            return 1;  // attributes are bounded when they are assigned
        default:
            return 0;
    }
}

bool Value::same_object(const Value& other) const {
    if (kind_ != other.kind_) return false;
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None:
            return true;
        case Kind::Bool:
            return as_bool() == other.as_bool();
        case Kind::Int:
            return as_int() == other.as_int();
        case Kind::Float:
            return as_double() == other.as_double();
        case Kind::String:
            return str_ptr() == other.str_ptr() || str() == other.str();
        case Kind::List:
            return list_ptr() == other.list_ptr();
        case Kind::Dict:
            return dict_ptr() == other.dict_ptr();
        case Kind::Object:
            return object_ptr() == other.object_ptr();
        case Kind::Callable:
            return &callable_data() == &other.callable_data();
    }
    return false;
}

// ---- truthiness, type names ----

bool truthy(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
            return v.as_bool();
        case Kind::Int:
            return v.as_int() != 0;
        case Kind::Float:
            return v.as_double() != 0.0;
        case Kind::String:
            return !v.str().empty();
        case Kind::List:
            return !v.items().empty();
        case Kind::Dict:
            return !v.dict_data().empty();
        case Kind::Object:
        case Kind::Callable:
            return true;
    }
    return false;
}

std::string_view type_name(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return "Undefined";
        case Kind::None:
            return "NoneType";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::String:
            return "str";
        case Kind::List:
            return v.is_tuple() ? "tuple" : "list";
        case Kind::Dict:
            return "dict";
        case Kind::Object:
            return v.object_data().type == ObjectData::Type::Namespace ? "Namespace"
                                                                       : "LoopContext";
        case Kind::Callable:
            return "function";
    }
    return "object";
}

// ---- equality and ordering ----

namespace {

Result<bool> equals_at(const Value& a, const Value& b, int depth) {
    if (depth > kMaxValueDepth) return too_deep();
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::Undefined:
        case Kind::None:
            return true;
        case Kind::String:
            return a.str() == b.str();
        case Kind::List: {
            if (a.is_tuple() != b.is_tuple()) return false;
            const auto& x = a.items();
            const auto& y = b.items();
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i) {
                STRATA_ASSIGN(bool eq, equals_at(x[i], y[i], depth + 1));
                if (!eq) return false;
            }
            return true;
        }
        case Kind::Dict: {
            const auto& x = a.dict_data();
            const auto& y = b.dict_data();
            if (x.size() != y.size()) return false;
            for (const auto& [k, v] : x.entries()) {
                const Value* other = y.find(k);
                if (!other) return false;
                STRATA_ASSIGN(bool eq, equals_at(v, *other, depth + 1));
                if (!eq) return false;
            }
            return true;
        }
        default:
            return a.same_object(b);
    }
}

Result<bool> less_at(const Value& a, const Value& b, int depth) {
    if (depth > kMaxValueDepth) return too_deep();
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        const auto& x = a.items();
        const auto& y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            STRATA_ASSIGN(bool eq, equals_at(x[i], y[i], depth + 1));
            if (!eq) return less_at(x[i], y[i], depth + 1);
        }
        return x.size() < y.size();
    }
    if (a.is_undefined()) return err(a.undefined_hint());
    if (b.is_undefined()) return err(b.undefined_hint());
    return err("'<' not supported between instances of '", type_name(a), "' and '", type_name(b),
               "'");
}

}  // namespace

Result<bool> equals(const Value& a, const Value& b) {
    return equals_at(a, b, 0);
}
Result<bool> less_than(const Value& a, const Value& b) {
    return less_at(a, b, 0);
}

// ---- printing ----

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    // Shortest round-trip digits, then laid out as Python's repr does: positional notation for
    // exponents -4..15, scientific otherwise, always with a '.' or an exponent.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string out;
    size_t pos = 0;
    if (sci[0] == '-') {
        out += '-';
        pos = 1;
    }
    const size_t e_pos = sci.find('e');
    std::string digits;
    for (size_t i = pos; i < e_pos; ++i) {
        if (sci[i] != '.') digits += sci[i];
    }
    const int exp = std::stoi(sci.substr(e_pos + 1));
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out += "0.";
            out.append(static_cast<size_t>(-exp - 1), '0');
            out += digits;
        } else {
            const size_t int_len = static_cast<size_t>(exp) + 1;
            if (digits.size() <= int_len) {
                out += digits;
                out.append(int_len - digits.size(), '0');
                out += ".0";
            } else {
                out += digits.substr(0, int_len);
                out += '.';
                out += digits.substr(int_len);
            }
        }
    } else {
        out += digits[0];
        if (digits.size() > 1) {
            out += '.';
            out += digits.substr(1);
        }
        char ebuf[16];
        std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        out += ebuf;
    }
    return out;
}

std::optional<double> parse_decimal(std::string_view text) {
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);  // from_chars takes no '+'
    if (text.empty() || text[0] == '+') return std::nullopt;
    double x = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec == std::errc::result_out_of_range) {
        // Python gives inf for overflow and 0 for underflow; the digits decide which.
        const size_t e = text.find_first_of("eE");
        const bool big_exponent = e != std::string_view::npos && text.substr(e + 1, 1) != "-";
        const double mag = big_exponent ? std::numeric_limits<double>::infinity() : 0.0;
        return text[0] == '-' ? -mag : mag;
    }
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return x;
}

namespace {

void append_string_repr(std::string& out, const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    out += quote;
    for (size_t i = 0; i < s.size();) {
        const char32_t c = unicode::next_code_point(s, i);
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (unicode::is_printable(c)) {
            unicode::append_utf8(out, c);
        } else {
            char buf[16];
            if (c < 0x100) {
                std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
            } else if (c < 0x10000) {
                std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            } else {
                std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
            }
            out += buf;
        }
    }
    out += quote;
}

enum class PrintStatus { Ok, TooDeep, TooLong };

struct Printer {
    std::string out;
    size_t max_bytes;
    PrintStatus status = PrintStatus::Ok;
    bool append(const Value& v, int depth, bool as_str);
    bool append_items(const Value& v, int depth);
};

bool Printer::append_items(const Value& v, int depth) {
    if (v.is_list()) {
        const auto& items = v.items();
        out += v.is_tuple() ? '(' : '[';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += ", ";
            if (!append(items[i], depth + 1, false)) return false;
        }
        if (v.is_tuple() && items.size() == 1) out += ',';
        out += v.is_tuple() ? ')' : ']';
        return true;
    }
    const auto& entries = v.is_dict() ? v.dict_data().entries() : v.object_data().attrs.entries();
    out += '{';
    bool first = true;
    for (const auto& [k, val] : entries) {
        if (!first) out += ", ";
        first = false;
        if (!append(k, depth + 1, false)) return false;
        out += ": ";
        if (!append(val, depth + 1, false)) return false;
    }
    out += '}';
    return true;
}

// as_str: Python's str() at the top level (strings unquoted, undefined empty); repr otherwise.
bool Printer::append(const Value& v, int depth, bool as_str) {
    if (depth > kMaxValueDepth) {
        status = PrintStatus::TooDeep;
        return false;
    }
    if (out.size() > max_bytes) {
        status = PrintStatus::TooLong;
        return false;
    }
    switch (v.kind()) {
        case Kind::Undefined:
            if (!as_str) out += "Undefined";
            return true;
        case Kind::None:
            out += "None";
            return true;
        case Kind::Bool:
            out += v.as_bool() ? "True" : "False";
            return true;
        case Kind::Int:
            out += std::to_string(v.as_int());
            return true;
        case Kind::Float:
            out += float_repr(v.as_double());
            return true;
        case Kind::String:
            if (as_str) {
                out += v.str();
            } else {
                append_string_repr(out, v.str());
            }
            return true;
        case Kind::List:
        case Kind::Dict:
            return append_items(v, depth);
        case Kind::Object:
            if (v.object_data().type == ObjectData::Type::Loop) {
                const auto& o = v.object_data();
                out += "<LoopContext " + std::to_string(o.loop_index + 1) + "/" +
                       std::to_string(o.loop_items->size()) + ">";
                return true;
            }
            out += "<Namespace ";
            if (!append_items(v, depth)) return false;
            out += '>';
            return true;
        case Kind::Callable:
            out += v.callable_data().repr;
            return true;
    }
    return true;
}

Result<std::string> print_value(const Value& v, size_t max_bytes, bool as_str) {
    Printer p{std::string(), max_bytes};
    if (p.append(v, 0, as_str) && p.out.size() <= max_bytes) return std::move(p.out);
    if (p.status == PrintStatus::TooDeep) return too_deep();
    return err("printing the value would take more than ", std::to_string(max_bytes), " bytes");
}

}  // namespace

Result<std::string> to_str(const Value& v, size_t max_bytes) {
    if (v.is_string()) return v.str();
    return print_value(v, max_bytes, true);
}

Result<std::string> to_repr(const Value& v, size_t max_bytes) {
    return print_value(v, max_bytes, false);
}

// ---- JSON ----

namespace {

Result<Value> from_json_at(const nlohmann::ordered_json& j, int depth) {
    if (depth > kMaxValueDepth)
        return err("the context is nested more than ", std::to_string(kMaxValueDepth),
                   " levels deep");
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value::boolean(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value::integer(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = j.get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
            return Value::integer(static_cast<int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value::number(j.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value::string(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            std::vector<Value> items;
            items.reserve(j.size());
            for (const auto& e : j) {
                STRATA_ASSIGN(Value v, from_json_at(e, depth + 1));
                items.push_back(std::move(v));
            }
            return Value::list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            DictData d;
            for (const auto& [k, e] : j.items()) {
                STRATA_ASSIGN(Value v, from_json_at(e, depth + 1));
                d.set(Value::string(k), std::move(v));
            }
            return Value::dict(std::move(d));
        }
        case nlohmann::ordered_json::value_t::binary:
        case nlohmann::ordered_json::value_t::discarded:
            break;
    }
    return err("the context holds a JSON value that is not text");
}

}  // namespace

Result<Value> from_json(const nlohmann::ordered_json& j) {
    return from_json_at(j, 0);
}

}  // namespace strata::jinja
