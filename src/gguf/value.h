// GGUF metadata values: scalars, strings and (possibly nested) arrays, typed as in the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace strata {

// Numbering as in the GGUF format.
enum class ValueType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

std::string_view value_type_name(ValueType t);
bool value_type_known(uint32_t id);

struct Value;

struct Array {
    ValueType elem_type = ValueType::U8;
    std::vector<Value> items;
};

struct Value {
    using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                                 std::string, Array, uint64_t, int64_t, double>;
    Storage v;

    Value() : v(uint8_t{0}) {}
    template <typename T>
    requires(!std::is_same_v<std::decay_t<T>, Value>) Value(T x)
        : v(std::move(x)) {}                     // NOLINT: implicit by design
    Value(const char* s) : v(std::string(s)) {}  // NOLINT: implicit by design

    // The variant index equals the GGUF type number by construction.
    ValueType type() const { return static_cast<ValueType>(v.index()); }

    // Numeric reads that accept any integer (or float) encoding: files disagree on whether a
    // count is u32, i32 or u64. nullopt when the value is not numeric or does not fit.
    std::optional<int64_t> as_int() const;
    std::optional<uint64_t> as_uint() const;
    std::optional<double> as_float() const;
    std::optional<bool> as_bool() const;
    const std::string* as_string() const { return std::get_if<std::string>(&v); }
    const Array* as_array() const { return std::get_if<Array>(&v); }

    // Short human form; arrays longer than max_items are abbreviated ("[512 × string]").
    std::string to_display(size_t max_items = 8) const;
};

// Full JSON form (arrays in full). Defined in value.cpp.
void to_json(nlohmann::json& j, const Value& v);

// Helpers to build arrays for writers and tests.
Array make_string_array(const std::vector<std::string>& items);
Array make_f32_array(const std::vector<float>& items);
Array make_i32_array(const std::vector<int32_t>& items);

}  // namespace strata
