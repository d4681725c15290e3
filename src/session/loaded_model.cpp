#include "session/loaded_model.h"

#include <chrono>

#include "gguf/reader.h"

namespace strata {

Result<std::unique_ptr<LoadedModel>> LoadedModel::load(const std::string& path,
                                                       const ModelLoadOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    STRATA_ASSIGN(GgufFile file, read_gguf(path));
    STRATA_ASSIGN(ModelInfo info, load_model_info(std::move(file)));
    STRATA_ASSIGN(Tokenizer tokenizer, Tokenizer::from_gguf(info.file));
    ResidentLoadOptions ro;
    ro.progress = options.progress;
    auto m = std::make_unique<LoadedModel>(LoadedModel{std::move(info), std::move(tokenizer),
                                                       nullptr, nullptr, 0, 0});
    std::optional<StreamingConfig> streaming = options.streaming;
    double planning_seconds = 0;  // a first run measures the machine here: not load time
    if (options.choose_streaming) {
        const auto tp = std::chrono::steady_clock::now();
        STRATA_ASSIGN(streaming, options.choose_streaming(m->info));
        planning_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count();
    }
    if (streaming) {
        STRATA_ASSIGN(auto store, StreamingStore::open(m->info, *streaming, ro));
        m->loaded_bytes = store->resident_bytes();
        m->store = std::move(store);
    } else {
        STRATA_ASSIGN(auto store, ResidentStore::load(m->info, ro));
        m->loaded_bytes = store->loaded_bytes();
        m->store = std::move(store);
    }
    STRATA_ASSIGN(m->engine, engine::Engine::create(*m->info.hparams, *m->store, options.engine));
    m->load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() -
        planning_seconds;
    return m;
}

}  // namespace strata
