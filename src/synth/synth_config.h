// What `strata synth` writes: architecture and shape (usually a named preset plus overrides),
// tensor type, seed, vocabulary source and thread count, and the checks that reject shapes no
// engine could run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/hparams.h"
#include "synth/weight_format.h"
#include "util/result.h"

namespace strata {

struct SynthConfig {
    // Architecture and shape. n_vocab is ignored: it follows the vocabulary. Optional dimensions
    // left at 0 get llama.cpp's defaults (see with_layout_defaults()).
    ModelHparams hparams;
    // Type of the weight matrices, or a llama-quantize mix (norms etc. stay F32).
    WeightFormat weights = TensorType::F16;
    uint64_t seed = 1;
    std::string vocab_from;  // GGUF whose tokenizer.* keys are copied; empty: built-in vocabulary
    // Replaces the vocabulary's tokenizer.chat_template (tests of templates with tools or
    // thinking on a small model); empty: keep it.
    std::string chat_template;
    unsigned threads = 0;  // worker threads; 0: one per hardware thread
    // Output bytes generated per job (whole rows, at least one). Bounds memory at about
    // (threads + 2) x chunk_bytes; never changes the bytes written.
    uint64_t chunk_bytes = 16ull << 20;
};

struct SynthPreset {
    std::string_view name;
    std::string_view description;
};

// Every preset, in the order `strata synth --help` lists them.
std::vector<SynthPreset> synth_presets();
// The shape of a preset (arch, name and sizes); nullopt for an unknown name.
std::optional<ModelHparams> synth_preset(std::string_view name);

// A shape cut to `n_layer` layers (`strata synth --layers`, a cut of a full-size model): the
// leading dense layers are kept while a layer with experts is left after them, else all but the
// last.
ModelHparams cut_to_layers(ModelHparams hp, uint32_t n_layer);

// Checks an architecture and shape as given (before defaults are applied). The error names the
// command-line flag to change, e.g. "--kv-heads 3 does not divide --heads 8".
Result<void> validate_synth_shape(const ModelHparams& hp);

}  // namespace strata
