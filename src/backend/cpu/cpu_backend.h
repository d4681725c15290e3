// The CPU backend: the blocks of a transformer layer computed on the host with the quantized
// matmul kernels (matmul.h) over a thread pool, activations in host vectors, the KV cache in an
// aligned host buffer. It is the reference implementation of the Backend interface: every other
// backend is tested against it, so it stays as plain as the arithmetic it does.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "util/result.h"

namespace strata {

// A CPU backend sized for `config`; an error when the KV cache cannot be allocated or its type
// does not suit the model.
Result<std::unique_ptr<Backend>> make_cpu_backend(const BackendConfig& config);

}  // namespace strata
