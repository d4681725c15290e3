#include "gguf/value.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

namespace strata {

static_assert(std::variant_size_v<Value::Storage> == 13, "one alternative per GGUF value type");
static_assert(std::is_same_v<std::variant_alternative_t<8, Value::Storage>, std::string>);
static_assert(std::is_same_v<std::variant_alternative_t<9, Value::Storage>, Array>);
static_assert(std::is_same_v<std::variant_alternative_t<12, Value::Storage>, double>);

std::string_view value_type_name(ValueType t) {
    switch (t) {
        case ValueType::U8:
            return "u8";
        case ValueType::I8:
            return "i8";
        case ValueType::U16:
            return "u16";
        case ValueType::I16:
            return "i16";
        case ValueType::U32:
            return "u32";
        case ValueType::I32:
            return "i32";
        case ValueType::F32:
            return "f32";
        case ValueType::BOOL:
            return "bool";
        case ValueType::STRING:
            return "string";
        case ValueType::ARRAY:
            return "array";
        case ValueType::U64:
            return "u64";
        case ValueType::I64:
            return "i64";
        case ValueType::F64:
            return "f64";
    }
    return "?";
}

bool value_type_known(uint32_t id) {
    return id <= static_cast<uint32_t>(ValueType::F64);
}

std::optional<int64_t> Value::as_int() const {
    return std::visit(
        [](const auto& x) -> std::optional<int64_t> {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, uint64_t>) {
                if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return {};
                return static_cast<int64_t>(x);
            } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                return static_cast<int64_t>(x);
            } else {
                return std::nullopt;
            }
        },
        v);
}

std::optional<uint64_t> Value::as_uint() const {
    if (auto* u = std::get_if<uint64_t>(&v)) return *u;
    auto i = as_int();
    if (!i || *i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
}

std::optional<double> Value::as_float() const {
    if (auto* f = std::get_if<float>(&v)) return *f;
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto i = as_int()) return static_cast<double>(*i);
    if (auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
    return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
    if (auto* b = std::get_if<bool>(&v)) return *b;
    if (auto i = as_int()) return *i != 0;
    return std::nullopt;
}

namespace {

std::string quote(const std::string& s, size_t max_len = 60) {
    std::string out = "\"";
    size_t n = 0;
    for (char c : s) {
        if (n++ >= max_len) {
            out += "…";
            break;
        }
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '"')
            out += "\\\"";
        else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
            out += buf;
        } else
            out += c;
    }
    return out + "\"";
}

std::string number(double d) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", d);
    return buf;
}

}  // namespace

std::string Value::to_display(size_t max_items) const {
    return std::visit(
        [&](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
                return quote(x);
            } else if constexpr (std::is_same_v<T, Array>) {
                if (x.items.size() > max_items) {
                    return "[" + std::to_string(x.items.size()) + " × " +
                           std::string(value_type_name(x.elem_type)) + "]";
                }
                std::string out = "[";
                for (size_t i = 0; i < x.items.size(); ++i) {
                    if (i) out += ", ";
                    out += x.items[i].to_display(max_items);
                }
                return out + "]";
            } else if constexpr (std::is_same_v<T, bool>) {
                return x ? "true" : "false";
            } else if constexpr (std::is_floating_point_v<T>) {
                return number(x);
            } else {
                return std::to_string(x);
            }
        },
        v);
}

void to_json(nlohmann::json& j, const Value& val) {
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, Array>) {
                j = nlohmann::json::array();
                for (const auto& item : x.items) {
                    nlohmann::json e;
                    to_json(e, item);
                    j.push_back(std::move(e));
                }
            } else if constexpr (std::is_floating_point_v<T>) {
                // JSON has no NaN/Inf; print them as strings rather than failing the dump.
                if (std::isfinite(x))
                    j = static_cast<double>(x);
                else
                    j = number(x);
            } else if constexpr (std::is_same_v<T, std::string>) {
                // Metadata strings can hold invalid UTF-8; the JSON writer replaces it later.
                j = x;
            } else {
                j = x;
            }
        },
        val.v);
}

Array make_string_array(const std::vector<std::string>& items) {
    Array a;
    a.elem_type = ValueType::STRING;
    a.items.reserve(items.size());
    for (const auto& s : items) a.items.emplace_back(s);
    return a;
}

Array make_f32_array(const std::vector<float>& items) {
    Array a;
    a.elem_type = ValueType::F32;
    a.items.reserve(items.size());
    for (float f : items) a.items.emplace_back(f);
    return a;
}

Array make_i32_array(const std::vector<int32_t>& items) {
    Array a;
    a.elem_type = ValueType::I32;
    a.items.reserve(items.size());
    for (int32_t i : items) a.items.emplace_back(i);
    return a;
}

}  // namespace strata
