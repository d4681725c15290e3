// A model ready to run: its description, tokenizer, weights in a store and a CPU engine over
// them. What `run`, `perplexity`, `bench` and the server start from.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "model/model_info.h"
#include "session/tokenizer.h"
#include "store/resident_store.h"
#include "store/streaming_store.h"

namespace strata {

struct ModelLoadOptions {
    engine::EngineOptions engine;
    bool progress = false;  // progress line on stderr while the weights load
    // Set: stream the FFN layers it names from disk (store/streaming_store.h) instead of
    // loading every tensor.
    std::optional<StreamingConfig> streaming;
    // Set: called with the model's description before any weight is read; it decides the
    // store (a plan: nullopt keeps everything resident) or refuses the model with an error.
    std::function<Result<std::optional<StreamingConfig>>(const ModelInfo&)> choose_streaming;
};

struct LoadedModel {
    ModelInfo info;
    Tokenizer tokenizer;
    std::unique_ptr<WeightStore> store;
    std::unique_ptr<engine::Engine> engine;
    double load_seconds = 0;
    uint64_t loaded_bytes = 0;

    // Reads the file, checks that strata can run it, loads its weights and sets up the engine.
    static Result<std::unique_ptr<LoadedModel>> load(const std::string& path,
                                                     const ModelLoadOptions& options = {});
};

}  // namespace strata
