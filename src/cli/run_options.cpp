#include "cli/run_options.h"

#include <cstdio>

namespace strata::cli {

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
    cmd.add_option("--threads,-t", f.threads, "Compute threads (default: physical cores)");
    cmd.add_option("--ctx,-c", f.ctx,
                   "Context size in tokens (default: the model's, at most 4096)");
    cmd.add_option("--batch", f.batch, "Prompt tokens evaluated together (default 512)");
    cmd.add_option("--kv-type", f.kv_type, "KV cache type: f16 (default) or q8_0");
    cmd.add_option("--dump", f.dump_dir,
                   "Write named per-layer activations to this directory (also STRATA_DUMP)");
}

Result<ModelLoadOptions> model_load_options(const EngineFlags& f, bool progress) {
    ModelLoadOptions o;
    o.progress = progress;
    o.engine.threads = f.threads;
    o.engine.n_ctx = f.ctx;
    if (f.batch == 0) return err("--batch must be at least 1");
    o.engine.max_batch = f.batch;
    auto kv = engine::parse_kv_type(f.kv_type);
    if (!kv) return err("--kv-type: " + kv.error().message);
    o.engine.kv_type = *kv;
    o.engine.dump_dir = f.dump_dir;
    return o;
}

void add_sampling_flags(CLI::App& cmd, SamplerParams& p) {
    cmd.add_option("--temperature,--temp", p.temperature, "Sampling temperature; 0 is greedy")
        ->capture_default_str();
    cmd.add_option("--top-k", p.top_k, "Keep the k most likely tokens; 0 is off")
        ->capture_default_str();
    cmd.add_option("--top-p", p.top_p, "Keep the most likely tokens up to this probability mass")
        ->capture_default_str();
    cmd.add_option("--min-p", p.min_p, "Drop tokens below this fraction of the top probability")
        ->capture_default_str();
    cmd.add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens; 1 is off")
        ->capture_default_str();
    cmd.add_option("--presence-penalty", p.presence_penalty, "Subtracted once per repeated token")
        ->capture_default_str();
    cmd.add_option("--frequency-penalty", p.frequency_penalty,
                   "Subtracted per occurrence of a repeated token")
        ->capture_default_str();
    cmd.add_option("--repeat-last-n", p.penalty_last_n,
                   "Tokens the penalties look back over; -1 the whole context")
        ->capture_default_str();
    cmd.add_option("--seed", p.seed, "Random seed (the same seed repeats the same answer)");
}

void fail(const std::string& message) {
    std::fprintf(stderr, "strata: %s\n", message.c_str());
    throw CLI::RuntimeError(1);
}

}  // namespace strata::cli
