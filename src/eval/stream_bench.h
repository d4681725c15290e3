// What continuous batching buys: N sequences decoded together (Engine::eval_sequences, as
// `strata serve` batches concurrent requests), for each N of a list. Every sequence first gets
// its own prompt (prompt_tokens ids from a fixed seed, all prompts in one evaluation), then
// gen_tokens greedy steps in which each step evaluates one token of every sequence. Reported per
// N: the aggregate and per-stream decode speed, and the weight and disk bytes per generated
// token: a weight read serves the whole step, so with streamed weights the disk bytes per token
// fall as 1/N while the step time grows far slower.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/loaded_model.h"
#include "util/result.h"

namespace strata {

struct StreamBenchOptions {
    std::vector<uint32_t> streams;  // each <= the engine's sequences
    uint32_t prompt_tokens = 64;
    uint32_t gen_tokens = 32;
    uint32_t seed = 7;
    std::function<void(const std::string&)> progress;
};

struct StreamBenchRow {
    uint32_t streams = 0;
    double prompt_seconds = 0;  // all N prompts
    double gen_seconds = 0;     // the gen_tokens steps
    double aggregate_tps = 0;   // N * gen_tokens / gen_seconds
    double stream_tps = 0;      // gen_tokens / gen_seconds
    double weight_bytes_per_token = 0;
    double disk_bytes_per_token = 0;  // read from the model file by the store
};

Result<std::vector<StreamBenchRow>> run_stream_bench(LoadedModel& model,
                                                     const StreamBenchOptions& options);

}  // namespace strata
