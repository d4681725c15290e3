// Which CPU kernel multiplies weights of each type fastest, by the phase of the product: one
// activation column (decode), a few (several sequences decoded together, a routed expert's few
// tokens) or many (prompt batches). One instruction-set path is not the best for all three on
// every machine: on one AMD EPYC VM the AVX-512 kernels decoded a 1B Q4_K_M model at 17.9 tok/s
// and the AVX2 ones at 26.7, while AVX-512 read prompts 2.7x faster (issue 40); on 2 cores of a
// Zen 5 EPYC VM AVX-512 is faster at everything but Q8_0 decode, where the two are within 4%.
//
// The hardware profile measures the table (profile/cpu_kernel_timing.h) and keeps it with the CPU
// it was measured on; the plan takes the rows of its model's weight types (Plan::cpu_kernels); the
// engine hands them to the CPU backend (BackendConfig::cpu_kernels), which makes them the table
// its products dispatch by (backend/cpu/kernel_table.h). Plain data, so that it can travel that
// far and be printed and stored as JSON on the way.
//
// JSON (kernel_table_json):
//   {"widest": "avx512",
//    "choices": [{"type": "Q4_K", "phase": "decode", "path": "avx2", "figure": 2.71e10,
//                 "timings": {"avx2": 2.71e10, "avx512": 1.80e10}}, ...]}
// figure and timings are bytes of weights per second for decode and batch, flop/s (two per
// multiply-add) for prompt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/tuning.h"
#include "gguf/tensor_type.h"
#include "util/result.h"

namespace strata {

enum class KernelPhase : uint8_t {
    Decode,  // 1 activation column: bound by reading the weights
    Batch,   // 2 to kPromptColumns - 1: still mostly reading, the arithmetic per byte grows
    Prompt,  // kPromptColumns or more: bound by arithmetic
};
inline constexpr KernelPhase kAllKernelPhases[] = {KernelPhase::Decode, KernelPhase::Batch,
                                                   KernelPhase::Prompt};
inline constexpr int64_t kPromptColumns = 16;

// The phase of a product of `columns` activation columns.
constexpr KernelPhase kernel_phase(int64_t columns) {
    return columns <= 1 ? KernelPhase::Decode
                        : (columns < kPromptColumns ? KernelPhase::Batch : KernelPhase::Prompt);
}
// The columns a phase is timed with: 1, 4 (a batched decode of a few sequences) and 64.
constexpr int64_t kernel_phase_timed_columns(KernelPhase p) {
    return p == KernelPhase::Decode ? 1 : (p == KernelPhase::Batch ? 4 : 64);
}

std::string_view kernel_phase_name(KernelPhase p);  // "decode", "batch", "prompt"
std::optional<KernelPhase> parse_kernel_phase(std::string_view name);
// "scalar", "avx2", "avx512" (tuning_name's names; "best" is not a path).
std::optional<CpuPathChoice> parse_kernel_path(std::string_view name);

// One path's figure: bytes of weights per second (decode, batch) or flop/s (prompt).
struct KernelTiming {
    CpuPathChoice path = CpuPathChoice::Best;
    double figure = 0;
    bool operator==(const KernelTiming&) const = default;
};

struct CpuKernelChoice {
    TensorType type = TensorType::F32;
    KernelPhase phase = KernelPhase::Decode;
    CpuPathChoice path = CpuPathChoice::Best;  // the path products of this type and phase take
    double figure = 0;                         // its figure
    std::vector<KernelTiming> timings;         // every path timed, the chosen one too
    bool operator==(const CpuKernelChoice&) const = default;
};

struct CpuKernelTable {
    // The path the types and phases not in `choices` take: the widest the CPU runs (Best: not
    // known, as in a table that was never measured).
    CpuPathChoice widest = CpuPathChoice::Best;
    std::vector<CpuKernelChoice> choices;

    bool empty() const { return choices.empty(); }
    // The choice for (t, p); null when the table has none.
    const CpuKernelChoice* find(TensorType t, KernelPhase p) const;
    // The rows of the given weight types only, in the table's order.
    CpuKernelTable for_types(const std::vector<TensorType>& types) const;
    bool operator==(const CpuKernelTable&) const = default;
};

// "27.1 GB/s" for decode and batch, "412 GFLOP/s" for prompt.
std::string kernel_figure_text(KernelPhase p, double figure);
// "avx2 27.1 GB/s (avx512 18.0)": the path taken and its figure, then the other paths'.
std::string kernel_choice_text(const CpuKernelChoice& c);
// A table of the choices, a row per weight type and a column per phase, each line starting with
// `indent`; "" when there are none.
std::string kernel_table_text(const CpuKernelTable& t, std::string_view indent);

nlohmann::json kernel_table_json(const CpuKernelTable& t);
// An error names what is missing or malformed.
Result<CpuKernelTable> kernel_table_from_json(const nlohmann::json& j);

}  // namespace strata
