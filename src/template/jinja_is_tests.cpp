// Jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...), exactly the set jinja2 3.1
// defines, with Python's type rules: bool counts as a number but not as an integer, and strings
// and dicts are sequences.
#include <cmath>
#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_renderer.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

Result<Value> one_arg(std::string_view test, CallArgs& a, std::string_view param) {
    STRATA_ASSIGN(auto p, bind_args(test, a, {param}, 1));
    return *p[0];
}

Result<bool> no_args(std::string_view test, CallArgs& a) {
    STRATA_TRY(bind_args(test, a, {}));
    return true;
}

#define STRATA_SIMPLE_TEST(fn, name, expr)                    \
    Result<bool> fn(Renderer&, const Value& v, CallArgs& a) { \
        STRATA_TRY(no_args(name, a));                         \
        return (expr);                                        \
    }

STRATA_SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
STRATA_SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
STRATA_SIMPLE_TEST(t_none, "none", v.is_none())
STRATA_SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
STRATA_SIMPLE_TEST(t_true, "true", v.is_bool() && v.as_bool())
STRATA_SIMPLE_TEST(t_false, "false", v.is_bool() && !v.as_bool())
STRATA_SIMPLE_TEST(t_integer, "integer", v.is_int())
STRATA_SIMPLE_TEST(t_float, "float", v.is_float())
STRATA_SIMPLE_TEST(t_number, "number", v.is_number())
STRATA_SIMPLE_TEST(t_string, "string", v.is_string())
STRATA_SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
// Undefined is iterable (as empty) and counts as a sequence in jinja2, too.
STRATA_SIMPLE_TEST(t_iterable, "iterable",
                   v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
STRATA_SIMPLE_TEST(t_sequence, "sequence",
                   v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
STRATA_SIMPLE_TEST(t_callable, "callable", v.is_callable())
STRATA_SIMPLE_TEST(t_escaped, "escaped", (static_cast<void>(v), false))  // no markup strings

#undef STRATA_SIMPLE_TEST

Result<bool> parity(const Value& v, CallArgs& a, std::string_view name, bool want_odd) {
    STRATA_TRY(no_args(name, a));
    if (v.is_undefined()) return err(v.undefined_hint());
    if (v.is_integral()) return ((v.as_int() % 2) != 0) == want_odd;
    if (v.is_float()) {
        const double m = std::fmod(v.as_double(), 2.0);
        return want_odd ? std::fabs(m) == 1.0 : m == 0.0;
    }
    return err("the '", name, "' test needs a number, not ", type_name(v));
}
Result<bool> t_odd(Renderer&, const Value& v, CallArgs& a) {
    return parity(v, a, "odd", true);
}
Result<bool> t_even(Renderer&, const Value& v, CallArgs& a) {
    return parity(v, a, "even", false);
}

Result<bool> t_divisibleby(Renderer& r, const Value& v, CallArgs& a) {
    STRATA_ASSIGN(Value n, one_arg("divisibleby", a, "num"));
    STRATA_ASSIGN(Value m, binary_op(r, BinaryOp::Mod, v, n));
    return equals(m, Value::integer(0));
}

Result<bool> t_lower(Renderer&, const Value& v, CallArgs& a) {
    STRATA_TRY(no_args("lower", a));
    STRATA_ASSIGN(std::string s, to_str(v));
    bool cased = false;
    for (size_t i = 0; i < s.size();) {
        const char32_t c = unicode::next_code_point(s, i);
        if (unicode::is_upper(c)) return false;
        cased = cased || unicode::is_lower(c);
    }
    return cased;
}

Result<bool> t_upper(Renderer&, const Value& v, CallArgs& a) {
    STRATA_TRY(no_args("upper", a));
    STRATA_ASSIGN(std::string s, to_str(v));
    bool cased = false;
    for (size_t i = 0; i < s.size();) {
        const char32_t c = unicode::next_code_point(s, i);
        if (unicode::is_lower(c)) return false;
        cased = cased || unicode::is_upper(c);
    }
    return cased;
}

Result<bool> compare_test(const Value& v, CallArgs& a, std::string_view name, CompareOp op) {
    STRATA_ASSIGN(Value other, one_arg(name, a, "other"));
    return compare_op(op, v, other);
}
Result<bool> t_eq(Renderer&, const Value& v, CallArgs& a) {
    return compare_test(v, a, "eq", CompareOp::Eq);
}
Result<bool> t_ne(Renderer&, const Value& v, CallArgs& a) {
    return compare_test(v, a, "ne", CompareOp::Ne);
}
Result<bool> t_lt(Renderer&, const Value& v, CallArgs& a) {
    return compare_test(v, a, "lt", CompareOp::Lt);
}
Result<bool> t_le(Renderer&, const Value& v, CallArgs& a) {
    return compare_test(v, a, "le", CompareOp::Le);
}
Result<bool> t_gt(Renderer&, const Value& v, CallArgs& a) {
    return compare_test(v, a, "gt", CompareOp::Gt);
}
Result<bool> t_ge(Renderer&, const Value& v, CallArgs& a) {
    return compare_test(v, a, "ge", CompareOp::Ge);
}

Result<bool> t_in(Renderer&, const Value& v, CallArgs& a) {
    STRATA_ASSIGN(Value seq, one_arg("in", a, "seq"));
    return contains(seq, v);
}

Result<bool> t_sameas(Renderer&, const Value& v, CallArgs& a) {
    STRATA_ASSIGN(Value other, one_arg("sameas", a, "other"));
    return v.same_object(other);
}

Result<bool> t_filter(Renderer&, const Value& v, CallArgs& a) {
    STRATA_TRY(no_args("filter", a));
    return v.is_string() && find_filter(v.str()) != nullptr;
}

Result<bool> t_test(Renderer&, const Value& v, CallArgs& a) {
    STRATA_TRY(no_args("test", a));
    return v.is_string() && find_test(v.str()) != nullptr;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
    static const std::unordered_map<std::string_view, TestFn> table = {
        {"defined", t_defined},
        {"undefined", t_undefined},
        {"none", t_none},
        {"boolean", t_boolean},
        {"true", t_true},
        {"false", t_false},
        {"integer", t_integer},
        {"float", t_float},
        {"number", t_number},
        {"string", t_string},
        {"mapping", t_mapping},
        {"iterable", t_iterable},
        {"sequence", t_sequence},
        {"callable", t_callable},
        {"escaped", t_escaped},
        {"odd", t_odd},
        {"even", t_even},
        {"divisibleby", t_divisibleby},
        {"lower", t_lower},
        {"upper", t_upper},
        {"eq", t_eq},
        {"equalto", t_eq},
        {"==", t_eq},
        {"ne", t_ne},
        {"!=", t_ne},
        {"lt", t_lt},
        {"lessthan", t_lt},
        {"<", t_lt},
        {"le", t_le},
        {"<=", t_le},
        {"gt", t_gt},
        {"greaterthan", t_gt},
        {">", t_gt},
        {"ge", t_ge},
        {">=", t_ge},
        {"in", t_in},
        {"sameas", t_sameas},
        {"filter", t_filter},
        {"test", t_test},
    };
    return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
    const auto& t = test_table();
    auto it = t.find(name);
    return it == t.end() ? nullptr : it->second;
}

}  // namespace strata::jinja
