// The builtin vocabulary of the template language: operators, filters (`x | f`), tests
// (`x is t`), methods of str/list/dict (`s.strip()`), global functions (`range`, `namespace`,
// `raise_exception`, ...) and `tojson`. Each follows the Python behaviour jinja2 exposes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_value.h"
#include "util/result.h"

namespace strata::jinja {

class Renderer;

// ---- operators (jinja_operators.cpp) ----
Result<Value> binary_op(Renderer& r, BinaryOp op, const Value& a, const Value& b);
Result<Value> unary_op(UnaryOp op, const Value& v);
Result<bool> compare_op(CompareOp op, const Value& a, const Value& b);
// Python's `item in container`.
Result<bool> contains(const Value& container, const Value& item);
// Python's iteration: list items, dict keys, string characters; undefined iterates as empty.
// Strings of more than kMaxIteratedChars characters are refused (one value per character).
inline constexpr size_t kMaxIteratedChars = 1u << 20;
Result<std::vector<Value>> iterate(const Value& v);
// Python's len(); fails for values without a length.
Result<int64_t> length(const Value& v);
// s[start:stop:step] over lists, tuples and strings (code points).
Result<Value> slice(Renderer& r, const Value& v, const Value& start, const Value& stop,
                    const Value& step);
// s[i] with Python's negative indices; nullopt when out of range.
std::optional<Value> index_sequence(const Value& v, int64_t i);

// ---- filters, tests, methods, globals ----
using FilterFn = Result<Value> (*)(Renderer& r, Value& input, CallArgs& args);
using TestFn = Result<bool> (*)(Renderer& r, const Value& value, CallArgs& args);
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

bool has_method(const Value& object, std::string_view name);
Result<Value> call_method(Renderer& r, const Value& object, std::string_view name, CallArgs& args);

// nullptr when `name` is not a global.
const Value* find_global(std::string_view name);

// Python's json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
struct JsonFormat {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // per level; unset: single line
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
    size_t max_bytes = kMaxPrintedBytes;  // fails rather than build longer text
};
Result<std::string> to_json_text(const Value& v, const JsonFormat& format);

// ---- string formatting (jinja_format.cpp) ----
// Python's `fmt % values`: a tuple supplies the arguments, a dict the %(name)s fields.
Result<std::string> percent_format(const std::string& fmt, const Value& values);
// Python's str.format with {}, {0} and {name} fields (no format specs).
Result<std::string> brace_format(const std::string& fmt, const CallArgs& args);

// ---- argument binding for builtins ----
// Binds positional and keyword arguments to parameter names, as Python does. Unset optional
// parameters come back as std::nullopt.
Result<std::vector<std::optional<Value>>> bind_args(std::string_view function, CallArgs& args,
                                                    std::initializer_list<std::string_view> names,
                                                    size_t required = 0);

// Python's str.upper-style helpers shared by filters and methods.
std::string title_case_python(std::string_view s);  // str.title()
std::string capitalize(std::string_view s);         // str.capitalize()

}  // namespace strata::jinja
