// Flags shared by the commands that run a model (run, perplexity, bench): threads, context,
// KV cache type, debug dump, and the sampling flags.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "session/loaded_model.h"
#include "session/sampler.h"

namespace strata::cli {

struct EngineFlags {
    int threads = 0;
    uint32_t ctx = 0;
    uint32_t batch = 512;
    std::string kv_type = "f16";
    std::string dump_dir;
};

void add_engine_flags(CLI::App& cmd, EngineFlags& f);
// An error names the flag that is wrong.
Result<ModelLoadOptions> model_load_options(const EngineFlags& f, bool progress);

void add_sampling_flags(CLI::App& cmd, SamplerParams& p);

// Prints "strata: <message>" on stderr and exits with status 1 (through CLI11).
[[noreturn]] void fail(const std::string& message);

}  // namespace strata::cli
