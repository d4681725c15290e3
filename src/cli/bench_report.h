// The results of `strata bench`: one entry per configuration run (strata with its plan, and the
// memory-mapped baseline), printed as a table and appended as one JSON line to a results file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/tuning.h"
#include "eval/speed_bench.h"
#include "plan/plan.h"

namespace strata::cli {

struct BenchEntry {
    std::string label;         // "strata", "mmap baseline"
    std::string mode;          // the store's mode name
    std::optional<Plan> plan;  // strata's runs
    SpeedBenchResult result;
    double load_seconds = 0;
    std::optional<uint64_t> peak_rss;
    std::string memory_cap;  // how the run's memory was capped; empty: not capped
    uint64_t cap_peak = 0;   // the cap's own peak (page cache included)
};

struct BenchRecord {
    std::string date;  // UTC, RFC 3339
    std::string model;
    uint64_t file_bytes = 0;
    int threads = 0;
    uint32_t prompt_tokens = 0, gen_tokens = 0, depth = 0, reps = 0;
    Tuning tuning;  // the performance settings every run had (--tune)
    std::vector<BenchEntry> entries;
};

// KV-cache bytes a generated token read (the attention operator's), averaged over the run.
double kv_per_token(const BenchEntry& e);
// The plan's limit (its weights' bytes per token) with those KV reads added; nullopt without a
// plan.
std::optional<double> limit_at_context(const BenchEntry& e);
// Measured generation speed as a fraction of limit_at_context; nullopt without a plan.
std::optional<double> fraction_of_limit(const BenchEntry& e);

std::string bench_table(const BenchRecord& r);
// Where the time goes, per kind of operator, for each planned run: in the prompt, its share of
// the time and GFLOP/s; in generation, microseconds per token, the GB/s it read weights (or the
// KV cache) at, and that against the plan's measured read bandwidth of the memory the weights
// are in (RAM, or the GPU's).
std::string operator_table(const BenchRecord& r);
// The CPU kernels the planned run took: the one path --tune cpu_path forced, or the measured table
// (per weight type of the model, decode, batch and prompt: the path and its figure).
const CpuKernelTable* planned_cpu_kernels(const BenchRecord& r);
std::string cpu_kernels_text(const BenchRecord& r);
// Every performance setting as --tune takes it ({"cuda_graphs": "true", ...}), so that runs with
// different settings can be told apart; bench_json's "tuning", and `run --json`'s.
nlohmann::ordered_json tuning_json(const Tuning& t);
nlohmann::ordered_json bench_json(const BenchRecord& r);
// Appends `record` as one line (JSON Lines) to `path`, creating the file and its directory.
Result<void> append_bench_json(const std::string& path, const nlohmann::ordered_json& record);

}  // namespace strata::cli
