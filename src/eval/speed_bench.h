// What `strata bench` measures on a loaded model: prompt processing and generation speed over
// several repetitions, time to first token, and where the bytes came from — weight bytes per
// generated token, of which read from disk by the store, and what the process made the storage
// layer read (the kernel's I/O counters, which also see page faults of a memory-mapped file).
//
// Each repetition starts from an empty context (or from `depth` tokens of context evaluated once,
// untimed, before the first: llama-bench's -d): one batch of `prompt_tokens` token ids drawn
// from a fixed seed (content does not change dense speed), then `gen_tokens` greedy steps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/loaded_model.h"
#include "store/weight_store.h"
#include "util/result.h"

namespace strata {

struct SpeedBenchOptions {
    uint32_t prompt_tokens = 512;
    uint32_t gen_tokens = 128;
    uint32_t depth = 0;  // context tokens before each repetition's prompt (long-context speed)
    uint32_t reps = 3;
    uint32_t seed = 7;
    // One untimed repetition first (the same prompt, two generated tokens): what runs once per
    // process (a GPU's kernels loaded on first use, cuBLAS choosing its kernels for each shape,
    // the decode step's graph captured, buffers first touched) stays out of the figures.
    bool warmup = true;
    // Called now and then with a line saying where the run is ("rep 2/3: generating 40/128").
    std::function<void(const std::string&)> progress;
};

struct SpeedRep {
    double prompt_seconds = 0;
    double first_token_seconds = 0;            // prompt evaluated and the first token chosen
    double gen_seconds = 0;                    // the gen_tokens steps after the prompt
    uint64_t gen_weight_bytes = 0;             // weight bytes the generation steps used
    uint64_t gen_store_disk_bytes = 0;         // of which the store read from disk
    uint64_t gen_io_bytes = 0;                 // storage reads the process caused while generating
    uint64_t io_bytes = 0;                     // ... during the whole repetition
    double stall_seconds = 0;                  // the engine waiting for the store, whole repetition
    uint64_t prompt_shipped_bytes = 0;         // RAM's experts shipped to a GPU for the prompt
    double seconds = 0;                        // whole repetition
    std::optional<ExpertStreamStats> experts;  // the expert cache while generating
    std::optional<VramExpertStats> vram_experts;  // its GPU level, while generating
    // Each kind of operator's time, bytes and flops in the prompt and in the generation steps.
    engine::OpTable prompt_ops{}, gen_ops{};
};

struct Spread {
    double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> values);

struct SpeedBenchResult {
    std::vector<SpeedRep> reps;
    uint32_t prompt_tokens = 0, gen_tokens = 0, depth = 0;
    Spread prompt_tps, gen_tps, first_token_seconds;
    // Per generated token, averaged over the repetitions.
    double weight_bytes_per_token = 0;
    double store_disk_bytes_per_token = 0;
    double io_bytes_per_token = 0;
    double disk_gbps = 0;     // storage reads while generating / generation time, whole run
    bool io_counted = false;  // the kernel's counters were readable
    std::optional<ExpertStreamStats> experts;     // summed over the repetitions' generation
    std::optional<VramExpertStats> vram_experts;  // the same, of the GPU level
    engine::OpTable prompt_ops{}, gen_ops{};      // summed over the repetitions
};

Result<SpeedBenchResult> run_speed_bench(LoadedModel& model, const SpeedBenchOptions& options);

}  // namespace strata
