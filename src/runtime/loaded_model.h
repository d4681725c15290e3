// A model ready to run: its description, tokenizer, weights in a store and the engine over
// them. What `run`, `perplexity`, `bench` and the server start from.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "model/model_info.h"
#include "plan/plan.h"
#include "store/model_store.h"
#include "store/store_layout.h"
#include "tokenizer/tokenizer.h"

namespace strata {

struct ModelLoadOptions {
    engine::EngineOptions engine;
    bool progress = false;  // progress line on stderr while the weights load
    // Set, and no plan given: the store keeps the tensors where this layout says (experiments
    // and benchmarks; store/store_layout.h) instead of loading every tensor.
    std::optional<StoreLayout> layout;
    // The naive approach benchmarks compare with: the whole file memory-mapped; a plan given is
    // not followed.
    bool mapped = false;
    // No plan given and >= 0: every tensor in the memory of this GPU and every layer run there
    // (tests and benchmarks of the GPU backend; a plan decides this by itself).
    int gpu = -1;
    // Expert-stream experiments: no speculative reads, the cache policy (default: the measured
    // choice, default_cache_policy), and whether routing statistics are read from and kept in
    // the cache directory.
    bool expert_prefetch = true;
    std::optional<CachePolicy> expert_policy;
    bool expert_statistics = true;
};

// A model before any of its weights is read: its description and the tokenizer built from it.
// Front ends read it first and measure the process with it in memory, which is what the plan
// counts as the process's baseline (plan/plan.h), then load the weights with it.
struct ModelDescription {
    ModelInfo info;
    Tokenizer tokenizer;

    // Fails for a file strata cannot run (the error says why) or whose tokenizer is broken.
    static Result<ModelDescription> read(const std::string& path);
    static Result<ModelDescription> from(ModelInfo info);
};

struct LoadedModel {
    ModelInfo info;
    Tokenizer tokenizer;
    std::unique_ptr<WeightStore> store;
    std::unique_ptr<engine::Engine> engine;
    std::optional<Plan> plan;           // when the store followed one
    std::vector<std::string> warnings;  // for the front end to show (ignored statistics, ...)
    double load_seconds = 0;
    uint64_t loaded_bytes = 0;

    // Reads the file, checks that strata can run it, loads its weights and sets up the engine,
    // without a plan.
    static Result<std::unique_ptr<LoadedModel>> load(const std::string& path,
                                                     const ModelLoadOptions& options = {});
    // The same for a model whose description the caller has read (read_gguf, load_model_info),
    // usually to make its placement plan and show it before any weight is read. The plan, when
    // given, decides the store (resident, ffn-stream or expert-stream) and the engine's context
    // and KV cache type, so the memory it counted is the memory taken.
    static Result<std::unique_ptr<LoadedModel>> load(ModelInfo info, std::optional<Plan> plan,
                                                     const ModelLoadOptions& options = {});
    // The same with the tokenizer already built. With a plan, the engine's batch and threads are
    // the plan's too.
    static Result<std::unique_ptr<LoadedModel>> load(ModelDescription model,
                                                     std::optional<Plan> plan,
                                                     const ModelLoadOptions& options = {});
};

}  // namespace strata
