// Values of the chat-template language, with Python's semantics as Jinja2 exposes them: none,
// bool, int, float, str, list, tuple, dict (insertion-ordered), objects (namespace(), the loop
// variable), callables (macros, builtins, bound methods) and Jinja2's default Undefined.
//
// Containers are shared by reference, as in Python: `{% set a = ns.items %}` aliases the list, and
// list.append() through either name is seen through both. Strings are immutable and shared too,
// so copying a Value never copies message text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace strata::jinja {

class Renderer;
class Value;

enum class Kind : uint8_t {
    Undefined,
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Dict,
    Object,
    Callable
};

// Values nest at most this deep. Destroying or printing a value recurses over its depth, so the
// bound keeps a hostile template from overflowing the stack.
inline constexpr int kMaxValueDepth = 256;

struct ListData {
    std::vector<Value> items;
    bool is_tuple = false;
    int depth = 1;            // 1 + the deepest child container when built (see kMaxValueDepth)
    bool registered = false;  // mutated by the template; the renderer clears it after rendering
};

// A dict keeps insertion order; keys are usually strings, and those are found through a hash
// index once the dict is large.
class DictData {
  public:
    // Defined after Value, which must be complete for them.
    size_t size() const;
    bool empty() const;
    const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    // Inserts or replaces (keeping the original position, as Python does).
    void set(Value key, Value value);
    void clear();

    int depth = 1;
    bool registered = false;

  private:
    void index_entry(size_t i);
    std::vector<std::pair<Value, Value>> entries_;
    std::unordered_map<std::string, size_t> string_index_;  // built once the dict is large
};

// Objects with attributes rather than items: namespace() (assignable attributes) and the loop
// variable of a for loop (computed attributes over the loop's item list).
struct ObjectData {
    enum class Type : uint8_t { Namespace, Loop };
    Type type = Type::Namespace;
    DictData attrs;  // Namespace attributes
    // Loop state: the items being iterated (after the loop's `if` filter) and the position.
    std::shared_ptr<const std::vector<Value>> loop_items;
    size_t loop_index = 0;
    bool registered = false;
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Result<Value>(Renderer&, CallArgs&)>;

struct Callable {
    std::string name;
    std::string repr;  // what printing it shows, e.g. "<Macro 'm'>"
    NativeFunction fn;
};

class Value {
  public:
    Value() : kind_(Kind::Undefined) {}

    // `hint` is the message of the error raised when the undefined value is used where jinja2's
    // default Undefined fails (arithmetic, attribute access, calling, ordering, tojson).
    static Value undefined(std::string hint = "value is undefined");
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value number(double d);
    static Value string(std::string s);
    static Value string(std::shared_ptr<const std::string> s);
    // Lists and dicts record their depth; Result fails when it passes kMaxValueDepth.
    static Result<Value> list(std::vector<Value> items, bool is_tuple = false);
    static Result<Value> dict(DictData d);
    static Value object(std::shared_ptr<ObjectData> o);
    static Value callable(std::string name, std::string repr, NativeFunction fn);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    // Python's numbers: bool is an int subclass, so True + 1 == 2.
    bool is_number() const {
        return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float;
    }
    bool is_integral() const { return kind_ == Kind::Bool || kind_ == Kind::Int; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }  // list or tuple
    bool is_tuple() const { return kind_ == Kind::List && list_data().is_tuple; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_object() const { return kind_ == Kind::Object; }
    bool is_namespace() const {
        return kind_ == Kind::Object && object_data().type == ObjectData::Type::Namespace;
    }
    bool is_callable() const { return kind_ == Kind::Callable; }

    bool as_bool() const { return std::get<bool>(v_); }
    int64_t as_int() const;    // Bool or Int
    double as_double() const;  // any number
    const std::string& str() const { return *std::get<StrPtr>(v_); }
    const std::shared_ptr<const std::string>& str_ptr() const { return std::get<StrPtr>(v_); }
    const std::string& undefined_hint() const { return *std::get<StrPtr>(v_); }
    ListData& list_data() const { return *std::get<std::shared_ptr<ListData>>(v_); }
    const std::vector<Value>& items() const { return list_data().items; }
    DictData& dict_data() const { return *std::get<std::shared_ptr<DictData>>(v_); }
    ObjectData& object_data() const { return *std::get<std::shared_ptr<ObjectData>>(v_); }
    const Callable& callable_data() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
    const std::shared_ptr<ListData>& list_ptr() const {
        return std::get<std::shared_ptr<ListData>>(v_);
    }
    const std::shared_ptr<DictData>& dict_ptr() const {
        return std::get<std::shared_ptr<DictData>>(v_);
    }
    const std::shared_ptr<ObjectData>& object_ptr() const {
        return std::get<std::shared_ptr<ObjectData>>(v_);
    }

    // Nesting depth: 0 for scalars, the recorded depth for containers.
    int depth() const;
    // True when both refer to the same container or callable (Python's `is`).
    bool same_object(const Value& other) const;

  private:
    using StrPtr = std::shared_ptr<const std::string>;
    using Storage = std::variant<std::monostate, bool, int64_t, double, StrPtr,
                                 std::shared_ptr<ListData>, std::shared_ptr<DictData>,
                                 std::shared_ptr<ObjectData>, std::shared_ptr<const Callable>>;
    Value(Kind k, Storage v) : kind_(k), v_(std::move(v)) {}

    Kind kind_;
    Storage v_;
};

inline size_t DictData::size() const {
    return entries_.size();
}
inline bool DictData::empty() const {
    return entries_.empty();
}

// Python's truthiness: empty containers, "", 0, None and undefined are false.
bool truthy(const Value& v);
// Python's type name as its error messages show it ("int", "str", "NoneType", "dict").
std::string_view type_name(const Value& v);

// Python's ==: numbers compare by value across bool/int/float, lists and dicts deeply, undefined
// equals only undefined. Fails only on structures nested past kMaxValueDepth.
Result<bool> equals(const Value& a, const Value& b);
// Python's <, for numbers, strings and same-kind sequences; other pairs fail with Python's
// TypeError text.
Result<bool> less_than(const Value& a, const Value& b);

// Printing a container fails rather than build text longer than this.
inline constexpr size_t kMaxPrintedBytes = 64u << 20;

// str(v) as Python prints it ({{ v }}, ~, |string, |join): strings as they are, None as "None",
// floats as repr, containers as repr. Undefined prints as "".
Result<std::string> to_str(const Value& v, size_t max_bytes = kMaxPrintedBytes);
// repr(v): strings quoted as Python quotes them.
Result<std::string> to_repr(const Value& v, size_t max_bytes = kMaxPrintedBytes);
// Python's repr of a float ("1.0", "1e+16", "0.30000000000000004", "inf").
std::string float_repr(double d);
// Parses a whole decimal floating-point text ("-1.5e3", "+.5"), independent of the C locale;
// nullopt when it is not one.
std::optional<double> parse_decimal(std::string_view text);

// Context values come from JSON with insertion order kept (nlohmann::ordered_json).
Result<Value> from_json(const nlohmann::ordered_json& j);

}  // namespace strata::jinja
