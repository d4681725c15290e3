#include "server/api_request.h"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace strata::server {

namespace {

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::string:
            return "string";
        case json::value_t::boolean:
            return "bool";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float:
            return "number";
        case json::value_t::array:
            return "array";
        case json::value_t::object:
            return "object";
        default:
            return "null";
    }
}

[[noreturn]] void wrong_type(const char* key, const json& v, const char* want) {
    throw ApiError(400, std::string("json: cannot unmarshal ") + type_name(v) + " into field \"" +
                            key + "\" of type " + want);
}

// Go's time.ParseDuration units.
std::optional<double> duration_unit_seconds(std::string_view u) {
    if (u == "ns") return 1e-9;
    if (u == "us" || u == "µs") return 1e-6;
    if (u == "ms") return 1e-3;
    if (u == "s") return 1.0;
    if (u == "m") return 60.0;
    if (u == "h") return 3600.0;
    return std::nullopt;
}

std::optional<double> parse_go_duration(std::string_view s) {
    if (s.empty()) return std::nullopt;
    double sign = 1;
    if (s.front() == '-' || s.front() == '+') {
        if (s.front() == '-') sign = -1;
        s.remove_prefix(1);
    }
    if (s == "0") return 0.0;
    if (s.empty()) return std::nullopt;
    double total = 0;
    while (!s.empty()) {
        size_t i = 0;
        while (i < s.size() && (std::isdigit(uint8_t(s[i])) || s[i] == '.')) ++i;
        if (i == 0) return std::nullopt;
        double value = 0;
        try {
            value = std::stod(std::string(s.substr(0, i)));
        } catch (...) {
            return std::nullopt;
        }
        s.remove_prefix(i);
        size_t j = 0;
        while (j < s.size() && !std::isdigit(uint8_t(s[j])) && s[j] != '.') ++j;
        auto unit = duration_unit_seconds(s.substr(0, j));
        if (!unit) return std::nullopt;
        total += value * *unit;
        s.remove_prefix(j);
    }
    return sign * total;
}

template <typename T>
void set_int(const json& o, const char* key, T& out) {
    if (auto v = int_field(o, key)) out = T(*v);
}
void set_float(const json& o, const char* key, float& out) {
    if (auto v = number_field(o, key)) out = float(*v);
}

}  // namespace

json parse_body(const std::string& body) {
    if (body.empty()) throw ApiError(400, "missing request body");
    json j;
    try {
        j = json::parse(body);
    } catch (const json::parse_error& e) {
        throw ApiError(400, e.what());
    }
    if (!j.is_object()) {
        throw ApiError(
            400, std::string("json: cannot unmarshal ") + type_name(j) + " into a request object");
    }
    return j;
}

const json* field(const json& object, const char* key) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<std::string> string_field(const json& object, const char* key) {
    const json* v = field(object, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(key, *v, "string");
    return v->get<std::string>();
}

std::optional<bool> bool_field(const json& object, const char* key) {
    const json* v = field(object, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(key, *v, "bool");
    return v->get<bool>();
}

std::optional<int64_t> int_field(const json& object, const char* key) {
    const json* v = field(object, key);
    if (!v) return std::nullopt;
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_number_float() && std::isfinite(v->get<double>()) &&
        std::fabs(v->get<double>()) < 9e18) {
        return int64_t(v->get<double>());
    }
    if (v->is_number_unsigned()) return int64_t(std::min<uint64_t>(v->get<uint64_t>(), INT64_MAX));
    wrong_type(key, *v, "int");
}

std::optional<double> number_field(const json& object, const char* key) {
    const json* v = field(object, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(key, *v, "float");
    return v->get<double>();
}

const json* array_field(const json& object, const char* key) {
    const json* v = field(object, key);
    if (v && !v->is_array()) wrong_type(key, *v, "array");
    return v;
}

const json* object_field(const json& object, const char* key) {
    const json* v = field(object, key);
    if (v && !v->is_object()) wrong_type(key, *v, "object");
    return v;
}

KeepAlive parse_keep_alive(const json& body, KeepAlive fallback) {
    const json* v = field(body, "keep_alive");
    if (!v) return fallback;
    double seconds = 0;
    if (v->is_number()) {
        seconds = v->get<double>();
    } else if (v->is_string()) {
        auto d = parse_go_duration(v->get<std::string>());
        if (!d) {
            throw ApiError(400, "time: invalid duration \"" + v->get<std::string>() +
                                    "\" in keep_alive (use seconds or a duration like \"5m\")");
        }
        seconds = *d;
    } else {
        wrong_type("keep_alive", *v, "duration");
    }
    if (seconds < 0) return std::nullopt;
    return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

GenerateOptions ollama_defaults() {
    GenerateOptions g;
    g.max_tokens = -1;
    g.sampling.temperature = 0.8f;
    g.sampling.top_k = 40;
    g.sampling.top_p = 0.9f;
    g.sampling.min_p = 0.0f;
    g.sampling.repeat_penalty = 1.0f;
    g.sampling.penalty_last_n = 64;
    g.sampling.seed = kRandomSeed;
    return g;
}

std::vector<std::string> parse_stop(const json& value, const char* name) {
    std::vector<std::string> out;
    if (value.is_string()) {
        out.push_back(value.get<std::string>());
    } else if (value.is_array()) {
        for (const json& s : value) {
            if (!s.is_string()) wrong_type(name, s, "string");
            out.push_back(s.get<std::string>());
        }
    } else if (!value.is_null()) {
        wrong_type(name, value, "[]string");
    }
    return out;
}

void apply_options(const json* options, GenerateOptions& g) {
    if (!options) return;
    if (!options->is_object()) wrong_type("options", *options, "object");
    const json& o = *options;
    SamplerParams& s = g.sampling;
    set_int(o, "num_predict", g.max_tokens);
    if (g.max_tokens < -1) g.max_tokens = -1;  // -2 "fill the context" is the same here
    set_float(o, "temperature", s.temperature);
    set_int(o, "top_k", s.top_k);
    set_float(o, "top_p", s.top_p);
    set_float(o, "min_p", s.min_p);
    set_float(o, "repeat_penalty", s.repeat_penalty);
    set_int(o, "repeat_last_n", s.penalty_last_n);
    set_float(o, "presence_penalty", s.presence_penalty);
    set_float(o, "frequency_penalty", s.frequency_penalty);
    if (auto seed = int_field(o, "seed")) {
        s.seed = *seed < 0 ? kRandomSeed : uint64_t(*seed);
    }
    if (const json* stop = field(o, "stop")) {
        for (auto& x : parse_stop(*stop, "stop")) g.stop.push_back(std::move(x));
    }
    if (auto n = int_field(o, "num_ctx"); n && *n > 0) {
        g.context_limit = uint32_t(std::min<int64_t>(*n, UINT32_MAX));
    }
    // Typed but without an effect here: a wrong type is still an error, as in Ollama.
    for (const char* key : {"num_keep", "num_batch", "num_gpu", "main_gpu", "num_thread"}) {
        (void)int_field(o, key);
    }
    (void)number_field(o, "typical_p");
    (void)bool_field(o, "use_mmap");
    if (s.top_p <= 0.0f) s.top_p = 1.0f;
    if (s.temperature < 0.0f) s.temperature = 0.0f;
    if (auto r = validate(s); !r) throw ApiError(400, "options: " + r.error().message);
}

ThinkSetting parse_think(const json& body) {
    ThinkSetting t;
    const json* v = field(body, "think");
    if (!v) return t;
    t.given = true;
    if (v->is_boolean()) {
        t.on = v->get<bool>();
        return t;
    }
    if (v->is_string()) {
        const std::string s = v->get<std::string>();
        if (s == "low" || s == "medium" || s == "high" || s == "max") {
            t.on = true;
            t.level = s;
            return t;
        }
        if (s == "true" || s == "false") {
            t.on = s == "true";
            return t;
        }
        throw ApiError(400,
                       "invalid think value: \"" + s +
                           "\" (must be \"high\", \"medium\", \"low\", \"max\", true, or false)");
    }
    throw ApiError(400, std::string("invalid think value: ") + v->dump() +
                            " (must be \"high\", \"medium\", \"low\", \"max\", true, or false)");
}

std::optional<json> parse_format(const json& body) {
    const json* v = field(body, "format");
    if (!v) return std::nullopt;
    if (v->is_string()) {
        const std::string s = v->get<std::string>();
        if (s.empty()) return std::nullopt;
        if (s == "json") return *v;
        throw ApiError(400, "invalid format: \"" + s + "\" (use \"json\" or a JSON schema object)");
    }
    if (v->is_object()) return *v;
    throw ApiError(400, "invalid format: " + v->dump() + " (use \"json\" or a JSON schema object)");
}

std::string to_text(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string parse_tool_choice(const json& body) {
    const json* tc = field(body, "tool_choice");
    if (!tc || tc->is_null()) return "";
    if (tc->is_string()) return tc->get<std::string>();
    if (tc->is_object()) {
        const json* fn = field(*tc, "function");
        const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
        if (name && name->is_string() && !name->get<std::string>().empty()) {
            return name->get<std::string>();
        }
    }
    throw ApiError(400,
                   "tool_choice must be \"auto\", \"none\", \"required\", a function's name or "
                   "{\"type\": \"function\", \"function\": {\"name\": ...}}");
}

int parse_top_logprobs(const json& body) {
    const int64_t top = int_field(body, "top_logprobs").value_or(0);
    if (top < 0 || top > 20) throw ApiError(400, "top_logprobs must be between 0 and 20");
    return bool_field(body, "logprobs").value_or(false) ? int(top) : -1;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
    const std::time_t secs = std::time_t(us.count() / 1'000'000);
    int64_t frac = us.count() % 1'000'000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string out = buf;
    if (frac > 0) {
        char f[16];
        std::snprintf(f, sizeof f, ".%06lld", static_cast<long long>(frac));
        std::string fs = f;
        while (fs.back() == '0') fs.pop_back();  // trailing zeros dropped, as Go writes it
        out += fs;
    }
    return out + "Z";
}

}  // namespace strata::server
