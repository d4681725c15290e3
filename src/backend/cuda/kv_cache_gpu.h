// The KV cache in GPU memory: every layer's keys and values, laid out for the decode read.
//
// Both keys and values are head-major, [n_head_kv][slots][head_dim]: the positions one KV head
// attends over are one contiguous run, so an attention block that takes a (head, range of
// positions) reads a single span with 16-byte loads, and a tile of positions is one bulk copy
// into shared memory (two where the range wraps, below).
//
// A layer of sliding-window attention (a query sees only the `window` positions up to its own)
// holds only window + batch positions, as a ring: position p lies in slot p % slots. A batch of
// n tokens stores its keys and values before it attends, and its first token still needs the
// window - 1 positions before it, so a ring of window + n - 1 slots or more serves any batch of
// up to n tokens. A layer of full attention has slots = n_ctx: slot p is position p. (The CPU cache
// is position-major and transposes F16 values for its matmul kernels; the layouts need not agree,
// only the sizes do.)
//
// Element types (model/kv_layout.h):
//   F16:  one half per element.
//   Q8_0: the 32-element blocks of the reference format, split in two arrays so the codes stay
//         16-byte aligned: int8 codes [n_head_kv][slots][head_dim], then fp16 scales
//         [n_head_kv][slots][head_dim / 32]. Same bytes as the blocks (34 per 32 elements).
// A recurrent layer takes recurrent_conv_bytes + recurrent_delta_bytes (its state) instead.
// Each layer's keys, then its values, take kv_row_bytes(type, n_head_kv * head_dim) * slots
// bytes rounded up to kKvLayerAlign, exactly as the plan counts them (kv_layout.h), so the
// plan's figure for the cache is what the GPU holds.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpu/gpu.h"
#include "model/hparams.h"
#include "model/kv_layout.h"
#include "util/result.h"

// cudaStream_t as the CUDA runtime declares it (driver_types.h), so code built without the CUDA
// include path (the tests) can include this header.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace strata::cuda {

// One layer's keys or values. Element (head h, position p, dimension d), in slot s = p % slots
// (GpuKvLayer), is
//   F16:  reinterpret_cast<const __half*>(data)[(h * slots + s) * head_dim + d]
//   Q8_0: int8 code data[(h * slots + s) * head_dim + d] times the fp16 scale
//         scales[(h * slots + s) * (head_dim / 32) + d / 32].
struct GpuKvPlane {
    std::byte* data = nullptr;
    uint16_t* scales = nullptr;  // Q8_0 only (fp16 bits)
    int head_dim = 0;
};

struct GpuKvLayer {
    GpuKvPlane k, v;
    int n_head_kv = 0;
    int slots = 0;      // positions held per head: n_ctx, or a sliding window's ring
    int window = 0;     // a query sees the `window` positions up to its own; 0: all before it
    bool held = false;  // false: this cache holds nothing for the layer
    // A recurrent (Gated DeltaNet) layer holds no keys or values but its state, F32 and laid out
    // as the CPU's (delta_net.h): the convolution's last inputs and the delta state, zero at
    // first. Null for attention layers and layers not held.
    float* conv_state = nullptr;
    float* delta_state = nullptr;
};

// How many positions a layer keeps (slots) and sees (window), per layer; empty vectors: every
// layer full attention over n_ctx slots. A window of 0 is full attention; a layer's slots of 0
// mean n_ctx.
struct GpuKvWindows {
    std::vector<uint32_t> window;
    std::vector<uint32_t> slots;

    uint32_t window_at(uint32_t l) const { return l < window.size() ? window[l] : 0; }
    uint32_t slots_at(uint32_t l, uint32_t n_ctx) const {
        return l < slots.size() && slots[l] > 0 ? std::min(slots[l], n_ctx) : n_ctx;
    }
};

class GpuKvCache {
  public:
    // A cache for the layers `held` marks (empty: every layer); the others take no memory.
    // `windows`: the sliding-window layers' windows and rings (none: every layer full).
    // Errors: a head size the GPU kernels cannot store (F16 needs multiples of 8, Q8_0 of 32,
    // both at most 256), a ring smaller than its window, or too little GPU memory.
    static Result<GpuKvCache> create(const ModelHparams& hp, uint32_t n_ctx, KvType type,
                                     const std::vector<bool>& held = {},
                                     const GpuKvWindows& windows = {});

    KvType type() const { return type_; }
    uint32_t n_ctx() const { return n_ctx_; }
    uint64_t bytes() const { return buffer_.size(); }
    int n_layer() const { return int(layers_.size()); }
    const GpuKvLayer& layer(int l) const { return layers_[size_t(l)]; }
    // Zeroes every recurrent layer's state (the sequence starts again), in order on stream s.
    void clear_recurrent(cudaStream_t s);

  private:
    KvType type_ = KvType::F16;
    uint32_t n_ctx_ = 0;
    std::vector<GpuKvLayer> layers_;
    std::vector<std::pair<uint64_t, uint64_t>> state_bytes_;  // recurrent layers': offset, size
    gpu::DeviceBuffer buffer_;
};

// The largest head size the GPU attention kernels take (their shared-memory tiles hold it).
inline constexpr int kGpuMaxHeadDim = 256;

}  // namespace strata::cuda
