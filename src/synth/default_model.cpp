#include "synth/default_model.h"

#include <filesystem>

#include "profile/profile.h"
#include "synth/generator.h"
#include "synth/synth_config.h"

namespace strata {

namespace {
// Bump when the preset or the generator changes, so an old file is not reused.
constexpr const char* kDefaultModelFile = "default-tiny-v1.gguf";
}  // namespace

Result<std::string> ensure_default_model() {
    STRATA_ASSIGN(const std::string dir, profile_cache_dir());
    const std::string path = dir + "/" + kDefaultModelFile;
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return path;
    std::filesystem::create_directories(dir, ec);
    if (ec) return err("cannot create the cache directory " + dir + ": " + ec.message());
    SynthConfig config;
    config.hparams = *synth_preset("tiny");
    config.weights = TensorType::Q8_0;
    config.seed = 1;
    auto written = write_synthetic_model(config, path, /*overwrite=*/false);
    // Another strata process may have written it at the same moment: that file is as good.
    if (!written && !std::filesystem::exists(path, ec)) return written.error();
    return path;
}

}  // namespace strata
