// Operators with Python's semantics: int arithmetic is exact (overflow past 64 bits is an error
// rather than a big integer), `/` always gives a float, `//` and `%` floor toward negative
// infinity, `+` concatenates strings and lists, `*` repeats them, `~` joins the str() of both
// sides. Undefined operands fail with the undefined value's own message, as jinja2's Undefined.
#include <cmath>
#include <limits>

#include "template/jinja_builtins.h"
#include "template/jinja_renderer.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

bool is_ascii(std::string_view s) {
    for (char c : s) {
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    }
    return true;
}

Error overflow() {
    return err("integer overflow: the result does not fit in 64 bits");
}

Error unsupported(std::string_view op, const Value& a, const Value& b) {
    if (a.is_undefined()) return err(a.undefined_hint());
    if (b.is_undefined()) return err(b.undefined_hint());
    return err("unsupported operand type(s) for ", op, ": '", type_name(a), "' and '", type_name(b),
               "'");
}

// Python's float floor division and modulo (Objects/floatobject.c semantics).
void float_divmod(double a, double b, double& div_out, double& mod_out) {
    double mod = std::fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, b);
    }
    double floordiv;
    if (div != 0.0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = std::copysign(0.0, a / b);
    }
    div_out = floordiv;
    mod_out = mod;
}

Result<Value> repeat(Renderer& r, const Value& seq, int64_t n) {
    if (n < 0) n = 0;
    if (seq.is_string()) {
        const std::string& s = seq.str();
        if (!s.empty() && static_cast<uint64_t>(n) > r.limits().max_string_bytes / s.size()) {
            return err("repeating a string ", std::to_string(n), " times passes the limit of ",
                       std::to_string(r.limits().max_string_bytes), " bytes");
        }
        std::string out;
        out.reserve(s.size() * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += s;
        return r.make_string(std::move(out));
    }
    const auto& items = seq.items();
    if (!items.empty() && static_cast<uint64_t>(n) > r.limits().max_list_items / items.size()) {
        return err("repeating a list ", std::to_string(n), " times passes the limit of ",
                   std::to_string(r.limits().max_list_items), " items");
    }
    std::vector<Value> out;
    out.reserve(items.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
    return r.make_list(std::move(out), seq.is_tuple());
}

Result<Value> int_pow(int64_t base, int64_t exp) {
    if (exp < 0) {
        if (base == 0) return err("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    }
    int64_t result = 1;
    int64_t b = base;
    while (exp > 0) {
        if (exp & 1) {
            if (__builtin_mul_overflow(result, b, &result)) return overflow();
        }
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(b, b, &b)) return overflow();
    }
    return Value::integer(result);
}

Result<Value> arithmetic(BinaryOp op, const Value& a, const Value& b) {
    static constexpr const char* kSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};
    const char* sym = kSymbols[static_cast<int>(op)];
    if (!a.is_number() || !b.is_number()) return unsupported(sym, a, b);
    if (a.is_integral() && b.is_integral()) {
        const int64_t x = a.as_int(), y = b.as_int();
        int64_t z = 0;
        switch (op) {
            case BinaryOp::Add:
                if (__builtin_add_overflow(x, y, &z)) return overflow();
                return Value::integer(z);
            case BinaryOp::Sub:
                if (__builtin_sub_overflow(x, y, &z)) return overflow();
                return Value::integer(z);
            case BinaryOp::Mul:
                if (__builtin_mul_overflow(x, y, &z)) return overflow();
                return Value::integer(z);
            case BinaryOp::Div:
                if (y == 0) return err("division by zero");
                return Value::number(static_cast<double>(x) / static_cast<double>(y));
            case BinaryOp::FloorDiv:
            case BinaryOp::Mod: {
                if (y == 0) {
                    return err(op == BinaryOp::Mod ? "integer modulo by zero"
                                                   : "integer division or modulo by zero");
                }
                if (x == std::numeric_limits<int64_t>::min() && y == -1) {
                    if (op == BinaryOp::Mod) return Value::integer(0);
                    return overflow();
                }
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q -= 1;
                    m += y;
                }
                return Value::integer(op == BinaryOp::Mod ? m : q);
            }
            case BinaryOp::Pow:
                return int_pow(x, y);
            default:
                break;
        }
    }
    const double x = a.as_double(), y = b.as_double();
    switch (op) {
        case BinaryOp::Add:
            return Value::number(x + y);
        case BinaryOp::Sub:
            return Value::number(x - y);
        case BinaryOp::Mul:
            return Value::number(x * y);
        case BinaryOp::Div:
            if (y == 0.0) return err("float division by zero");
            return Value::number(x / y);
        case BinaryOp::FloorDiv:
        case BinaryOp::Mod: {
            if (y == 0.0) {
                return err(op == BinaryOp::Mod ? "float modulo" : "float floor division by zero");
            }
            double div = 0, mod = 0;
            float_divmod(x, y, div, mod);
            return Value::number(op == BinaryOp::Mod ? mod : div);
        }
        case BinaryOp::Pow:
            if (x == 0.0 && y < 0) return err("0.0 cannot be raised to a negative power");
            if (x < 0 && std::floor(y) != y) {
                return err(
                    "a negative number to a fractional power is a complex number, which "
                    "templates do not support");
            }
            return Value::number(std::pow(x, y));
        default:
            break;
    }
    return unsupported(sym, a, b);
}

}  // namespace

Result<Value> binary_op(Renderer& r, BinaryOp op, const Value& a, const Value& b) {
    switch (op) {
        case BinaryOp::Concat: {
            STRATA_ASSIGN(std::string x, to_str(a));
            STRATA_ASSIGN(std::string y, to_str(b));
            return r.make_string(x + y);
        }
        case BinaryOp::Add:
            if (a.is_string() && b.is_string()) {
                if (a.str().size() + b.str().size() > r.limits().max_string_bytes) {
                    return err("concatenation passes the string limit of ",
                               std::to_string(r.limits().max_string_bytes), " bytes");
                }
                return r.make_string(a.str() + b.str());
            }
            if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
                std::vector<Value> items = a.items();
                items.insert(items.end(), b.items().begin(), b.items().end());
                return r.make_list(std::move(items), a.is_tuple());
            }
            if ((a.is_string() || a.is_list()) && !b.is_undefined()) {
                return err("can only concatenate ", type_name(a), " (not \"", type_name(b),
                           "\") to ", type_name(a));
            }
            return arithmetic(op, a, b);
        case BinaryOp::Mul:
            if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(r, a, b.as_int());
            if ((b.is_string() || b.is_list()) && a.is_integral()) return repeat(r, b, a.as_int());
            return arithmetic(op, a, b);
        case BinaryOp::Mod:
            if (a.is_string()) {
                STRATA_ASSIGN(std::string text, percent_format(a.str(), b));
                return r.make_string(std::move(text));
            }
            return arithmetic(op, a, b);
        case BinaryOp::And:
        case BinaryOp::Or:
            break;  // evaluated with short-circuit by the renderer
        default:
            return arithmetic(op, a, b);
    }
    return err("internal error: unexpected operator");
}

Result<Value> unary_op(UnaryOp op, const Value& v) {
    if (op == UnaryOp::Not) return Value::boolean(!truthy(v));
    if (v.is_undefined()) return err(v.undefined_hint());
    if (!v.is_number()) {
        return err("bad operand type for unary ", op == UnaryOp::Neg ? "-" : "+", ": '",
                   type_name(v), "'");
    }
    if (op == UnaryOp::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
    if (v.is_float()) return Value::number(-v.as_double());
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return overflow();
    return Value::integer(-v.as_int());
}

Result<bool> compare_op(CompareOp op, const Value& a, const Value& b) {
    switch (op) {
        case CompareOp::Eq:
            return equals(a, b);
        case CompareOp::Ne: {
            STRATA_ASSIGN(bool eq, equals(a, b));
            return !eq;
        }
        case CompareOp::Lt:
            return less_than(a, b);
        case CompareOp::Gt:
            return less_than(b, a);
        case CompareOp::Le:
        case CompareOp::Ge: {
            STRATA_ASSIGN(bool lt, op == CompareOp::Le ? less_than(a, b) : less_than(b, a));
            if (lt) return true;
            return equals(a, b);
        }
        case CompareOp::In:
            return contains(b, a);
        case CompareOp::NotIn: {
            STRATA_ASSIGN(bool in, contains(b, a));
            return !in;
        }
    }
    return false;
}

Result<bool> contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Kind::Undefined:
            return false;
        case Kind::String:
            if (!item.is_string()) {
                return err("'in <string>' requires string as left operand, not ", type_name(item));
            }
            return container.str().find(item.str()) != std::string::npos;
        case Kind::List:
            for (const auto& v : container.items()) {
                STRATA_ASSIGN(bool eq, equals(v, item));
                if (eq) return true;
            }
            return false;
        case Kind::Dict:
            return container.dict_data().find(item) != nullptr;
        default:
            break;
    }
    return err("argument of type '", type_name(container), "' is not iterable");
}

Result<std::vector<Value>> iterate(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return std::vector<Value>{};
        case Kind::List:
            return v.items();
        case Kind::Dict: {
            std::vector<Value> keys;
            keys.reserve(v.dict_data().size());
            for (const auto& [k, val] : v.dict_data().entries()) keys.push_back(k);
            return keys;
        }
        case Kind::String: {
            std::vector<Value> chars;
            const std::string& s = v.str();
            if (s.size() > kMaxIteratedChars && unicode::code_point_count(s) > kMaxIteratedChars) {
                return err("iterating over a string of more than ",
                           std::to_string(kMaxIteratedChars), " characters is refused");
            }
            for (size_t i = 0; i < s.size();) {
                const size_t start = i;
                unicode::next_code_point(s, i);
                chars.push_back(Value::string(s.substr(start, i - start)));
            }
            return chars;
        }
        default:
            break;
    }
    return err("'", type_name(v), "' object is not iterable");
}

Result<int64_t> length(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return 0;
        case Kind::String:
            return static_cast<int64_t>(unicode::code_point_count(v.str()));
        case Kind::List:
            return static_cast<int64_t>(v.items().size());
        case Kind::Dict:
            return static_cast<int64_t>(v.dict_data().size());
        default:
            break;
    }
    return err("object of type '", type_name(v), "' has no len()");
}

std::optional<Value> index_sequence(const Value& v, int64_t i) {
    if (v.is_list()) {
        const auto n = static_cast<int64_t>(v.items().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return std::nullopt;
        return v.items()[static_cast<size_t>(i)];
    }
    if (!v.is_string()) return std::nullopt;
    const std::string& s = v.str();
    if (is_ascii(s)) {
        const auto n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return std::nullopt;
        return Value::string(std::string(1, s[static_cast<size_t>(i)]));
    }
    const std::u32string cps = unicode::decode(s);
    const auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return Value::string(unicode::encode(cps.substr(static_cast<size_t>(i), 1)));
}

Result<Value> slice(Renderer& r, const Value& v, const Value& start_v, const Value& stop_v,
                    const Value& step_v) {
    if (v.is_undefined()) return err(v.undefined_hint());
    const Value* parts[3] = {&start_v, &stop_v, &step_v};
    std::optional<int64_t> bound[3];
    for (int i = 0; i < 3; ++i) {
        if (parts[i]->is_none()) continue;
        if (!parts[i]->is_integral()) {
            return err("slice indices must be integers or None or have an __index__ method");
        }
        bound[i] = parts[i]->as_int();
    }
    if (!v.is_list() && !v.is_string()) return err("'", type_name(v), "' object cannot be sliced");
    const int64_t step = bound[2].value_or(1);
    if (step == 0) return err("slice step cannot be zero");

    std::u32string cps;
    const bool ascii = v.is_string() && is_ascii(v.str());
    if (v.is_string() && !ascii) cps = unicode::decode(v.str());
    const int64_t len = v.is_list() ? static_cast<int64_t>(v.items().size())
                        : ascii     ? static_cast<int64_t>(v.str().size())
                                    : static_cast<int64_t>(cps.size());
    auto adjust = [&](std::optional<int64_t> b, int64_t dflt) {
        if (!b) return dflt;
        int64_t x = *b;
        if (x < 0) {
            x += len;
            if (x < 0) x = step < 0 ? -1 : 0;
        } else if (x >= len) {
            x = step < 0 ? len - 1 : len;
        }
        return x;
    };
    const int64_t start = adjust(bound[0], step < 0 ? len - 1 : 0);
    const int64_t stop = adjust(bound[1], step < 0 ? -1 : len);
    std::vector<int64_t> picks;
    if (step > 0) {
        for (int64_t i = start; i < stop; i += step) picks.push_back(i);
    } else {
        for (int64_t i = start; i > stop; i += step) picks.push_back(i);
    }
    if (v.is_list()) {
        std::vector<Value> out;
        out.reserve(picks.size());
        for (int64_t i : picks) out.push_back(v.items()[static_cast<size_t>(i)]);
        return r.make_list(std::move(out), v.is_tuple());
    }
    std::string out;
    if (ascii) {
        out.reserve(picks.size());
        for (int64_t i : picks) out += v.str()[static_cast<size_t>(i)];
    } else {
        for (int64_t i : picks) unicode::append_utf8(out, cps[static_cast<size_t>(i)]);
    }
    return r.make_string(std::move(out));
}

}  // namespace strata::jinja
