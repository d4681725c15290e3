// The built-in default model: what `strata run` runs when no model is named, so the first
// command a user tries generates text on a machine with no model file. It is the synthetic
// "tiny" llama (random weights, built-in vocabulary), written once into the cache directory;
// its text is fluent-looking noise, which is what a random model produces.
#pragma once

#include <string>

#include "util/result.h"

namespace strata {

// The path of the default model, writing it first when it is not there yet.
Result<std::string> ensure_default_model();

}  // namespace strata
