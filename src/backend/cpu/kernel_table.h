// The kernel table: which instruction-set path each product takes, by the type of its weights and
// its phase (the number of activation columns: backend/kernel_choice.h). matvec and matmul
// (matmul.h) look it up on every call:
//   - a forced path (cpu_path.h: set_cpu_path, `--tune cpu_path=avx2`) takes everything;
//   - else the table's path for (type, phase), where it has one;
//   - else the best path the CPU runs (cpu_path.h: best_cpu_path), as before there was a table.
//
// The table is process state, as the forced path is (cpu_path.h says why): the CPU backend
// installs the profile's table when it is created with the default cpu_path setting and a table
// to install (cpu_backend.cpp). Entries naming a path this CPU cannot run (a table measured on
// another machine) are left out.
//
// Every path gives the same products up to float summation order, so a table changes speed, not
// results beyond that order. It does make a column's bits depend on its phase when the table
// takes different paths for them (decode on AVX2, prompts on AVX-512): with one forced path the
// bits of a column never depend on what shares its batch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "backend/cpu/cpu_path.h"
#include "backend/kernel_choice.h"
#include "gguf/tensor_type.h"

namespace strata::cpu {

// The backend's name for a path (tuning.h) and back; Best has no path.
std::optional<CpuPath> cpu_path_of(CpuPathChoice c);
CpuPathChoice cpu_path_choice(CpuPath p);

// Paths by (weight type, phase), with no timings: what dispatch needs.
class KernelTable {
  public:
    // The entries of `table` whose path `features` runs.
    static KernelTable from(const CpuKernelTable& table, const CpuFeatures& features);

    void set(TensorType t, KernelPhase p, CpuPath path);
    std::optional<CpuPath> path(TensorType t, KernelPhase p) const;
    bool empty() const;

  private:
    static constexpr size_t kTypes = strata::detail::kTensorTypeTable.size();
    static constexpr int8_t kNone = -1;
    std::array<std::array<int8_t, std::size(kAllKernelPhases)>, kTypes> paths_ = filled();

    static constexpr std::array<std::array<int8_t, std::size(kAllKernelPhases)>, kTypes> filled() {
        std::array<std::array<int8_t, std::size(kAllKernelPhases)>, kTypes> a{};
        for (auto& row : a) row.fill(kNone);
        return a;
    }
};

// The path a product of `columns` columns with weights of type t takes, by the rules above.
CpuPath choose_kernel_path(std::optional<CpuPath> forced, const KernelTable& table, CpuPath best,
                           TensorType t, int64_t columns);

// Makes `table` the process's and clears a forced path: products dispatch by it from now on.
void install_kernel_table(const KernelTable& table);
// The process's table (empty until one is installed).
KernelTable installed_kernel_table();
// The path matvec / matmul take for weights of type t and `columns` activation columns.
CpuPath kernel_path(TensorType t, int64_t columns);

}  // namespace strata::cpu
