// Writes a synthetic GGUF model: metadata with llama.cpp's key names, a tokenizer, and seeded
// random weights, streamed through GgufWriter with bounded memory.
//
// Weights are generated in chunks of whole rows (up to SynthConfig::chunk_bytes of output, 16 MiB
// by default) on a pool of worker threads and written strictly in file order by the calling
// thread; at most threads + 2 chunks are in flight, so memory stays below about
// (threads + 2) x 16 MiB whatever the model size. Every value depends only on (seed, tensor name,
// element index), so the file is byte-identical for any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "model/tensor_layout.h"
#include "synth/synth_config.h"
#include "synth/vocabulary.h"
#include "util/result.h"

namespace strata {

// Everything the file will contain except the weight values, decided before anything is written.
struct SynthPlan {
    ModelHparams hparams;  // with_layout_defaults() applied, n_vocab from the vocabulary
    std::vector<TensorSpec> layout;
    std::vector<TensorType> types;        // per tensor of layout
    std::vector<MetadataEntry> metadata;  // in file order, tokenizer included
    std::string vocab_source;
};

// Validates the configuration and resolves the vocabulary, shape, tensor types and metadata.
Result<SynthPlan> plan_synthetic_model(const SynthConfig& config);

// The general.* and <arch>.* keys describing a model, named as llama.cpp reads them.
// `hp` must have with_layout_defaults() applied.
std::vector<MetadataEntry> model_metadata(const ModelHparams& hp, uint32_t file_type,
                                          uint64_t seed);

struct SynthResult {
    std::string path;
    uint64_t file_bytes = 0;
    size_t n_tensors = 0;
    uint64_t n_parameters = 0;
    double seconds = 0;  // from opening the file to moving it into place
};

// Called from the writing thread after each chunk: bytes of the file written so far, and total.
using SynthProgress = std::function<void(uint64_t done, uint64_t total)>;

// Writes the model to `path`. An existing file is replaced only when `overwrite` is set; on any
// error nothing is left at `path` (and an existing file there is untouched).
Result<SynthResult> write_synthetic_model(const SynthConfig& config, const std::string& path,
                                          bool overwrite, const SynthProgress& progress = {});
// The same with a plan made by plan_synthetic_model(config).
Result<SynthResult> write_synthetic_model(const SynthConfig& config, const SynthPlan& plan,
                                          const std::string& path, bool overwrite,
                                          const SynthProgress& progress = {});

}  // namespace strata
