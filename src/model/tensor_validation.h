// Checks a file's tensor table against the hyper-parameters of its architecture: every tensor the
// forward pass needs is present with the shape it expects, so a file that passes can be run
// without further shape checks, and one that fails says which tensor is wrong and why.
#pragma once

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/hparams.h"

namespace strata {

struct TensorCheck {
    // Each names the file, the tensor, and the expected and actual shapes; empty when the tensor
    // table matches the hyper-parameters.
    std::vector<std::string> errors;
    // Tensors the architecture does not use (ignored when running).
    std::vector<std::string> warnings;
};

// `hp` must come from load_hparams(file). A file without tensors (vocabulary only) has nothing to
// check and passes; whether it can run is the caller's question.
TensorCheck check_tensors(const GgufFile& file, const ModelHparams& hp);

}  // namespace strata
