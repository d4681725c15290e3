// Performance settings: how the backends compute, never what. Every field chooses between ways
// of doing the same work (kernels, launch styles, task splits, copies ahead), for comparisons and
// experiments on one machine; the defaults are the measured best, and the plan's decisions
// (where tensors live, how much memory each level gets) are not here.
//
// One value travels as data: the command line fills it (`--tune key=value`, set_tuning), the
// engine hands it to every backend it creates (BackendConfig::tuning), and each backend hands the
// fields down to the kernels and objects that use them. `strata bench` prints and records it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace strata {

// Where the CUDA backend's int8 tensor-core GEMM (backend/cuda/mmq.h) takes prompt products.
enum class PromptMmq : uint8_t {
    Off,      // nowhere: routed experts one slot at a time, other products cuBLAS or the matvec
    Experts,  // routed experts grouped by expert; other products only where cuBLAS is not used
    All,      // every prompt product it takes (more than 4 tokens), cuBLAS for the rest
};

// Programmatic dependent launch on the GPU (backend/cuda/pdl.cuh, compute capability 9.0 on):
// when the kernel behind a matvec may launch. The small kernels always let it launch as they
// start.
enum class Pdl : uint8_t {
    Off,      // every kernel starts after the one ahead has finished
    AtEnd,    // as the matvec's blocks end
    AtStart,  // as the matvec starts (its successors' blocks then wait on the SMs beside it)
};

// The CPU kernels' instruction-set path (backend/cpu/cpu_path.h).
enum class CpuPathChoice : uint8_t {
    Best,  // the best this CPU runs
    Scalar,
    Avx2,
    Avx512,
};

struct Tuning {
    // CUDA: a one-token decode step's kernels are recorded and replayed as a CUDA graph; false
    // launches them one by one (as STRATA_CUDA_PROFILE=1, which times each, does anyway).
    bool cuda_graphs = true;
    // CUDA: prompt batches (more than 8 tokens) multiply on cuBLAS's GEMM when the library can be
    // loaded; false runs them as though it could not (the int8 tensor-core GEMM for the types it
    // takes, the matvec 8 tokens at a time for the rest).
    bool prompt_cublas = true;
    // CUDA: where the int8 tensor-core GEMM takes prompt products.
    PromptMmq prompt_mmq = PromptMmq::Experts;
    // CUDA: programmatic dependent launch (measured: 8B Q4_K_M decode on an H100, 274.8 tok/s
    // off, 303.6 at the matvecs' end, 249.4 at their start).
    Pdl pdl = Pdl::AtEnd;
    // CUDA decode: a layer's q, k and v matvecs of one type and width in one launch; false: one
    // launch each.
    bool qkv_parts = true;
    // CUDA decode: weight rows per warp of the one-token int8 matvec, 1 or 2 (two keep twice the
    // loads in flight: 8B Q4_K_M on an H200, 334 tok/s against 317 with one).
    uint32_t q8_rows_per_warp = 2;
    // CPU: the kernels' instruction-set path. A path the CPU lacks falls back to the best it
    // runs, with a warning.
    CpuPathChoice cpu_path = CpuPathChoice::Best;
    // CPU decode: with more threads than KV heads, attention splits a KV head's positions over
    // tasks; false splits the query heads instead. Both give the same bits.
    bool attention_by_positions = true;
    // The GPU level of the expert cache (engine/vram_expert_cache.h): guesses of the next
    // layer's experts copied ahead per layer (at most the experts a token uses; 0: none).
    uint32_t gpu_expert_prefetch = 4;

    bool operator==(const Tuning&) const = default;
};

// Sets one field from its key and value as `--tune key=value` gives them. An unknown key or a
// value the field does not take is an error naming the keys or the values it takes.
Result<void> set_tuning(Tuning& t, std::string_view key, std::string_view value);
// The same from "key=value".
Result<void> set_tuning(Tuning& t, std::string_view assignment);

// One setting as set_tuning names it, with its value in `t` (the form set_tuning takes).
struct TuningEntry {
    std::string_view key;
    std::string value;
    std::string_view values;  // what it takes: "true|false", "off|experts|all", ...
    std::string_view about;   // one line
};
// Every setting, in a fixed order.
std::vector<TuningEntry> tuning_entries(const Tuning& t);
// "key=value key=value ...": every setting, on one line.
std::string tuning_line(const Tuning& t);

std::string_view tuning_name(PromptMmq m);
std::string_view tuning_name(Pdl p);
std::string_view tuning_name(CpuPathChoice p);

}  // namespace strata
