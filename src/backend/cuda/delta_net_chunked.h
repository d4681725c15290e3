// The delta rule of a prompt by chunks (delta_net.cu's token-by-token kernel serves decode
// steps): the parallel form of cpu/delta_net.cpp's delta_rule_chunked, so a prompt's tokens run
// as small matrix products over chunks of kDeltaNetChunk tokens instead of one after the other.
//
// Three kernels after the convolution: the rows' preparation (q and k L2-normalised in place in
// the mixed rows, alpha replaced by the log decay A softplus(alpha + dt_bias), beta by its
// sigmoid, as the CPU does), the chunks (a block per value head and slice of 32 value dimensions,
// its slice of the state in shared memory for the whole run), and the gated output norm.
#pragma once

#include "backend/cuda/delta_net.h"

namespace strata::cuda {

// Whether this GPU has the shared memory the chunk kernel needs for head size S (it falls back to
// the token-by-token kernel where not). Asked once per head size.
bool delta_net_chunked_fits(int S);

// PRECONDITION: the convolution has run over the run's rows; delta_net_chunked_fits(shape.S).
// Replaces the q/k parts of run.mixed, run.alpha and run.beta (all consumed by this operation).
void delta_rule_chunked(const DeltaNetShape& shape, const DeltaNetTensors& w,
                        const DeltaNetRun& run, cudaStream_t s);

}  // namespace strata::cuda
