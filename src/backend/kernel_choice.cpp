#include "backend/kernel_choice.h"

#include <algorithm>
#include <cstdio>

#include "util/table.h"

namespace strata {

using nlohmann::json;

std::string_view kernel_phase_name(KernelPhase p) {
    switch (p) {
        case KernelPhase::Decode:
            return "decode";
        case KernelPhase::Batch:
            return "batch";
        case KernelPhase::Prompt:
            return "prompt";
    }
    return "?";
}

std::optional<KernelPhase> parse_kernel_phase(std::string_view name) {
    for (const KernelPhase p : kAllKernelPhases) {
        if (kernel_phase_name(p) == name) return p;
    }
    return std::nullopt;
}

std::optional<CpuPathChoice> parse_kernel_path(std::string_view name) {
    for (const CpuPathChoice c :
         {CpuPathChoice::Scalar, CpuPathChoice::Avx2, CpuPathChoice::Avx512}) {
        if (tuning_name(c) == name) return c;
    }
    return std::nullopt;
}

const CpuKernelChoice* CpuKernelTable::find(TensorType t, KernelPhase p) const {
    for (const CpuKernelChoice& c : choices) {
        if (c.type == t && c.phase == p) return &c;
    }
    return nullptr;
}

CpuKernelTable CpuKernelTable::for_types(const std::vector<TensorType>& types) const {
    CpuKernelTable out;
    out.widest = widest;
    for (const CpuKernelChoice& c : choices) {
        if (std::find(types.begin(), types.end(), c.type) != types.end()) out.choices.push_back(c);
    }
    return out;
}

std::string kernel_figure_text(KernelPhase p, double figure) {
    char buf[48];
    if (p == KernelPhase::Prompt) {
        std::snprintf(buf, sizeof buf, "%.0f GFLOP/s", figure / 1e9);
    } else {
        std::snprintf(buf, sizeof buf, "%.1f GB/s", figure / 1e9);
    }
    return buf;
}

std::string kernel_choice_text(const CpuKernelChoice& c) {
    std::string s = std::string(tuning_name(c.path)) + " " + kernel_figure_text(c.phase, c.figure);
    std::string others;
    for (const KernelTiming& k : c.timings) {
        if (k.path == c.path) continue;
        char figure[32];
        std::snprintf(figure, sizeof figure, c.phase == KernelPhase::Prompt ? "%.0f" : "%.1f",
                      k.figure / 1e9);
        others += (others.empty() ? "" : ", ") + std::string(tuning_name(k.path)) + " " + figure;
    }
    return others.empty() ? s : s + " (" + others + ")";
}

std::string kernel_table_text(const CpuKernelTable& t, std::string_view indent) {
    if (t.empty()) return "";
    const std::string batch = "batch (2-" + std::to_string(kPromptColumns - 1) + " columns)";
    const std::string prompt = "prompt (" + std::to_string(kPromptColumns) + "+ columns)";
    TextTable table({{"weights"}, {"decode (1 column)"}, {batch}, {prompt}});
    std::vector<TensorType> types;
    for (const CpuKernelChoice& c : t.choices) {
        if (std::find(types.begin(), types.end(), c.type) == types.end()) types.push_back(c.type);
    }
    for (const TensorType type : types) {
        std::vector<std::string> cells = {std::string(tensor_type_name(type))};
        for (const KernelPhase p : kAllKernelPhases) {
            const CpuKernelChoice* c = t.find(type, p);
            cells.push_back(c ? kernel_choice_text(*c) : "-");
        }
        table.add_row(std::move(cells));
    }
    return table.render(indent);
}

json kernel_table_json(const CpuKernelTable& t) {
    json choices = json::array();
    for (const CpuKernelChoice& c : t.choices) {
        json timings = json::object();
        for (const KernelTiming& k : c.timings)
            timings[std::string(tuning_name(k.path))] = k.figure;
        choices.push_back({{"type", std::string(tensor_type_name(c.type))},
                           {"phase", std::string(kernel_phase_name(c.phase))},
                           {"path", std::string(tuning_name(c.path))},
                           {"figure", c.figure},
                           {"timings", timings}});
    }
    return {{"widest", std::string(tuning_name(t.widest))}, {"choices", choices}};
}

Result<CpuKernelTable> kernel_table_from_json(const json& j) {
    try {
        CpuKernelTable t;
        const std::string widest = j.at("widest").get<std::string>();
        if (widest != tuning_name(CpuPathChoice::Best)) {
            const auto w = parse_kernel_path(widest);
            if (!w) return err("kernel table: '", widest, "' is not a CPU path");
            t.widest = *w;
        }
        for (const json& c : j.at("choices")) {
            CpuKernelChoice choice;
            const std::string type = c.at("type").get<std::string>();
            const std::string phase = c.at("phase").get<std::string>();
            const std::string path = c.at("path").get<std::string>();
            const auto parsed_type = tensor_type_from_name(type);
            const auto parsed_phase = parse_kernel_phase(phase);
            const auto parsed_path = parse_kernel_path(path);
            if (!parsed_type) return err("kernel table: '", type, "' is not a tensor type");
            if (!parsed_phase) return err("kernel table: '", phase, "' is not a phase");
            if (!parsed_path) return err("kernel table: '", path, "' is not a CPU path");
            choice.type = *parsed_type;
            choice.phase = *parsed_phase;
            choice.path = *parsed_path;
            choice.figure = c.at("figure").get<double>();
            for (const auto& [name, figure] : c.at("timings").items()) {
                const auto timed = parse_kernel_path(name);
                if (!timed) return err("kernel table: '", name, "' is not a CPU path");
                choice.timings.push_back({*timed, figure.get<double>()});
            }
            // JSON objects keep no order: timings in path order, as they are measured.
            std::sort(choice.timings.begin(), choice.timings.end(),
                      [](const KernelTiming& a, const KernelTiming& b) { return a.path < b.path; });
            t.choices.push_back(std::move(choice));
        }
        return t;
    } catch (const json::exception& e) {
        return err("malformed kernel table: ", e.what());
    }
}

}  // namespace strata
