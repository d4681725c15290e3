// The CUDA backend: the blocks of a transformer layer computed on one GPU from weights in its
// memory, activations and the KV cache in its memory too. Every operation is enqueued on one
// stream and returns at once; the host waits only where it needs a result (logits, router
// logits, the hidden state leaving the GPU).
#pragma once

#include <memory>

#include "backend/backend.h"
#include "util/result.h"

namespace strata {

// A CUDA backend on GPU `device`, sized for `config`; an error when the GPU is missing, its
// memory cannot hold the activations and KV cache, or the KV type does not suit the model.
Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendConfig& config, int device);

}  // namespace strata
