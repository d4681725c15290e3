// `tojson` as Hugging Face defines it: Python's json.dumps with ensure_ascii=False by default
// (so text stays readable and nothing beyond JSON's own escapes is applied), the default
// separators ", " and ": ", and floats formatted as Python's repr ("1.0", "1e-07").
#include <cmath>
#include <cstdio>

#include "template/jinja_builtins.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        const char32_t c = unicode::next_code_point(s, i);
        char buf[16];
        switch (c) {
            case '"':
                out += "\\\"";
                continue;
            case '\\':
                out += "\\\\";
                continue;
            case '\n':
                out += "\\n";
                continue;
            case '\r':
                out += "\\r";
                continue;
            case '\t':
                out += "\\t";
                continue;
            case '\b':
                out += "\\b";
                continue;
            case '\f':
                out += "\\f";
                continue;
            default:
                break;
        }
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
            if (c >= 0x10000) {
                const char32_t v = c - 0x10000;
                std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                              static_cast<unsigned>(0xD800 + (v >> 10)),
                              static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            } else {
                std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            }
            out += buf;
        } else {
            out.append(s, start, i - start);
        }
    }
    out += '"';
}

std::string json_float(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return float_repr(d);
}

// Dict keys as json.dumps converts them; other key types are an error.
Result<std::string> json_key(const Value& k) {
    switch (k.kind()) {
        case Kind::String:
            return k.str();
        case Kind::Int:
            return std::to_string(k.as_int());
        case Kind::Float:
            return json_float(k.as_double());
        case Kind::Bool:
            return std::string(k.as_bool() ? "true" : "false");
        case Kind::None:
            return std::string("null");
        default:
            break;
    }
    return err("keys must be str, int, float, bool or None, not ", type_name(k));
}

class JsonWriter {
  public:
    explicit JsonWriter(const JsonFormat& f) : f_(f) {}

    Result<void> write(const Value& v, int level) {
        if (level > kMaxValueDepth) return err("tojson: value is nested too deeply");
        if (out.size() > f_.max_bytes) {
            return err("tojson: the JSON text would take more than ", std::to_string(f_.max_bytes),
                       " bytes");
        }
        switch (v.kind()) {
            case Kind::None:
                out += "null";
                return {};
            case Kind::Bool:
                out += v.as_bool() ? "true" : "false";
                return {};
            case Kind::Int:
                out += std::to_string(v.as_int());
                return {};
            case Kind::Float:
                out += json_float(v.as_double());
                return {};
            case Kind::String:
                append_json_string(out, v.str(), f_.ensure_ascii);
                return {};
            case Kind::List:
                return write_list(v, level);
            case Kind::Dict:
                return write_dict(v, level);
            default:
                break;
        }
        return err("Object of type ", type_name(v), " is not JSON serializable");
    }

    std::string out;

  private:
    void newline(int level) {
        if (!f_.indent) return;
        out += '\n';
        for (int i = 0; i < level; ++i) out += *f_.indent;
    }

    Result<void> write_list(const Value& v, int level) {
        const auto& items = v.items();
        if (items.empty()) {
            out += "[]";
            return {};
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += f_.item_separator;
            newline(level + 1);
            STRATA_TRY(write(items[i], level + 1));
        }
        newline(level);
        out += ']';
        return {};
    }

    Result<void> write_dict(const Value& v, int level) {
        const auto& entries = v.dict_data().entries();
        if (entries.empty()) {
            out += "{}";
            return {};
        }
        std::vector<size_t> order(entries.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        if (f_.sort_keys) {
            std::optional<Error> failure;
            std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
                if (failure) return false;
                auto lt = less_than(entries[a].first, entries[b].first);
                if (!lt) {
                    failure = lt.take_error();
                    return false;
                }
                return *lt;
            });
            if (failure) return std::move(*failure);
        }
        out += '{';
        bool first = true;
        for (size_t i : order) {
            if (!first) out += f_.item_separator;
            first = false;
            newline(level + 1);
            STRATA_ASSIGN(std::string key, json_key(entries[i].first));
            append_json_string(out, key, f_.ensure_ascii);
            out += f_.key_separator;
            STRATA_TRY(write(entries[i].second, level + 1));
        }
        newline(level);
        out += '}';
        return {};
    }

    const JsonFormat& f_;
};

}  // namespace

Result<std::string> to_json_text(const Value& v, const JsonFormat& format) {
    JsonWriter w(format);
    STRATA_TRY(w.write(v, 0));
    if (w.out.size() > format.max_bytes) {
        return err("tojson: the JSON text would take more than ", std::to_string(format.max_bytes),
                   " bytes");
    }
    return std::move(w.out);
}

}  // namespace strata::jinja
