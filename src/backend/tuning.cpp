#include "backend/tuning.h"

#include <charconv>
#include <span>

namespace strata {

namespace {

// Enum names, indexed by the enum's value.
constexpr std::string_view kPromptMmqNames[] = {"off", "experts", "all"};
constexpr std::string_view kPdlNames[] = {"off", "at_end", "at_start"};
constexpr std::string_view kCpuPathNames[] = {"best", "scalar", "avx2", "avx512"};

std::string joined(std::span<const std::string_view> names, std::string_view between) {
    std::string out;
    for (const std::string_view n : names) {
        if (!out.empty()) out += between;
        out += n;
    }
    return out;
}

Error bad_value(std::string_view key, std::string_view value, std::string_view wanted) {
    return err(key, "=", value, ": the value must be ", wanted);
}

Result<void> parse_bool(std::string_view key, std::string_view value, bool& out) {
    if (value == "true" || value == "1" || value == "on") {
        out = true;
    } else if (value == "false" || value == "0" || value == "off") {
        out = false;
    } else {
        return bad_value(key, value, "true or false");
    }
    return {};
}

template <typename E>
Result<void> parse_enum(std::string_view key, std::string_view value,
                        std::span<const std::string_view> names, E& out) {
    for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == value) {
            out = E(i);
            return {};
        }
    }
    return bad_value(key, value, "one of " + joined(names, ", "));
}

// A whole number in [lo, hi]; `wanted` says which in an error.
Result<void> parse_count(std::string_view key, std::string_view value, uint32_t lo, uint32_t hi,
                         std::string_view wanted, uint32_t& out) {
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size() || v < lo || v > hi) {
        return bad_value(key, value, wanted);
    }
    out = v;
    return {};
}

std::string bool_name(bool b) {
    return b ? "true" : "false";
}

// One setting: its key, what it takes, what it does, and how it is read and written.
struct Setting {
    std::string_view key;
    std::string_view values;
    std::string_view about;
    std::string (*get)(const Tuning&);
    Result<void> (*set)(Tuning&, std::string_view key, std::string_view value);
};

const Setting kSettings[] = {
    {"cuda_graphs", "true|false", "CUDA: replay a decode step as a CUDA graph",
     [](const Tuning& t) { return bool_name(t.cuda_graphs); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_bool(k, v, t.cuda_graphs);
     }},
    {"prompt_cublas", "true|false", "CUDA: prompt batches on cuBLAS's GEMM where it loads",
     [](const Tuning& t) { return bool_name(t.prompt_cublas); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_bool(k, v, t.prompt_cublas);
     }},
    {"prompt_mmq", "off|experts|all",
     "CUDA: prompt products on the int8 tensor-core GEMM: none, routed experts, every one",
     [](const Tuning& t) { return std::string(tuning_name(t.prompt_mmq)); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_enum(k, v, kPromptMmqNames, t.prompt_mmq);
     }},
    {"pdl", "off|at_end|at_start",
     "CUDA: programmatic dependent launch; the kernel after a matvec launches at its end or start",
     [](const Tuning& t) { return std::string(tuning_name(t.pdl)); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_enum(k, v, kPdlNames, t.pdl);
     }},
    {"qkv_parts", "true|false", "CUDA decode: q, k and v matvecs in one launch",
     [](const Tuning& t) { return bool_name(t.qkv_parts); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_bool(k, v, t.qkv_parts);
     }},
    {"q8_rows_per_warp", "1|2", "CUDA decode: weight rows per warp of the one-token int8 matvec",
     [](const Tuning& t) { return std::to_string(t.q8_rows_per_warp); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_count(k, v, 1, 2, "1 or 2", t.q8_rows_per_warp);
     }},
    {"cpu_path", "best|scalar|avx2|avx512", "CPU: the kernels' instruction-set path",
     [](const Tuning& t) { return std::string(tuning_name(t.cpu_path)); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_enum(k, v, kCpuPathNames, t.cpu_path);
     }},
    {"attention_by_positions", "true|false",
     "CPU decode: attention split over positions (false: over query heads)",
     [](const Tuning& t) { return bool_name(t.attention_by_positions); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_bool(k, v, t.attention_by_positions);
     }},
    {"gpu_expert_prefetch", "0|1|2|...",
     "GPU expert cache: guesses of the next layer's experts copied ahead per layer",
     [](const Tuning& t) { return std::to_string(t.gpu_expert_prefetch); },
     [](Tuning& t, std::string_view k, std::string_view v) {
         return parse_count(k, v, 0, UINT32_MAX, "a whole number", t.gpu_expert_prefetch);
     }},
};

}  // namespace

std::string_view tuning_name(PromptMmq m) {
    return kPromptMmqNames[size_t(m)];
}

std::string_view tuning_name(Pdl p) {
    return kPdlNames[size_t(p)];
}

std::string_view tuning_name(CpuPathChoice p) {
    return kCpuPathNames[size_t(p)];
}

Result<void> set_tuning(Tuning& t, std::string_view key, std::string_view value) {
    for (const Setting& s : kSettings) {
        if (s.key == key) return s.set(t, key, value);
    }
    std::vector<std::string_view> keys;
    for (const Setting& s : kSettings) keys.push_back(s.key);
    return err("unknown tuning key '", key, "' (the keys: ", joined(keys, ", "), ")");
}

Result<void> set_tuning(Tuning& t, std::string_view assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string_view::npos) {
        return err("'", assignment, "' is not key=value");
    }
    return set_tuning(t, assignment.substr(0, eq), assignment.substr(eq + 1));
}

std::vector<TuningEntry> tuning_entries(const Tuning& t) {
    std::vector<TuningEntry> out;
    for (const Setting& s : kSettings) out.push_back({s.key, s.get(t), s.values, s.about});
    return out;
}

std::string tuning_line(const Tuning& t) {
    std::string out;
    for (const TuningEntry& e : tuning_entries(t)) {
        if (!out.empty()) out += ' ';
        out += std::string(e.key) + "=" + e.value;
    }
    return out;
}

}  // namespace strata
