// The resident arena: the tensors a store keeps in memory for the whole run, read once at open
// into one owned buffer, with views bound for each of them. The one resident loader of strata:
// resident mode is an arena holding every tensor, a streaming layout an arena holding the rest.
//
// Consecutive resident tensors of the file form a run, and a run is read as one widened range
// straight into its place (direct I/O, 32 MiB requests several in flight, a progress line in
// GB/s), so loading runs at the disk's speed, copies nothing and leaves nothing in the page
// cache. Every tensor sits at the same offset modulo the disk block as in the file.
//
// `map` is the naive approach strata is compared against (`strata bench --baseline`): the whole
// file memory-mapped, the kernel's page cache deciding what stays in memory.
#pragma once

#include <cstdio>
#include <vector>

#include "gpu/gpu.h"
#include "io/aligned_buffer.h"
#include "model/model_info.h"
#include "store/read_set.h"
#include "store/tensor_views.h"

namespace strata {

struct ResidentLoadOptions {
    bool progress = false;  // print a progress line while loading
    std::FILE* progress_out = stderr;
};

// Where the arena's bytes live: host RAM, or a GPU's memory (the plan's GPU tier). A device
// arena reads through a few pinned staging chunks, each copied to the GPU while the disk fills
// the next, so loading still runs at the disk's speed and the host holds only the chunks.
inline constexpr uint64_t kDeviceStagingChunk = 16u << 20;
inline constexpr size_t kDeviceStagingChunks = 4;
// Pinned host memory a device arena's load holds (the plan counts it while loading).
inline constexpr uint64_t kDeviceStagingBytes =
    kDeviceStagingChunks * (kDeviceStagingChunk + (1u << 20));

class Arena {
  public:
    // Reads every tensor i of `info` with held[i] into a new arena.
    static Result<Arena> load(const ModelInfo& info, const std::vector<bool>& held,
                              StreamReader& reader, const ResidentLoadOptions& options);
    // The same into the memory of GPU `device`; the views say where (MemoryKind::Device).
    static Result<Arena> load_to_device(const ModelInfo& info, const std::vector<bool>& held,
                                        StreamReader& reader, const ResidentLoadOptions& options,
                                        int device);
    // Maps the whole file read-only instead; every tensor is held, read on first touch.
    static Result<Arena> map(const ModelInfo& info);

    Arena() = default;
    Arena(Arena&& o) noexcept;
    Arena& operator=(Arena&& o) noexcept;
    ~Arena();

    const BoundViews& views() const { return views_; }
    uint64_t weight_bytes() const { return weight_bytes_; }  // tensor bytes held
    bool mapped() const { return mapping_ != nullptr; }
    double load_seconds() const { return load_seconds_; }
    // Page-locks the arena's host memory for as long as it lives, so that a GPU copies its
    // tensors at full bus speed (a GPU run that ships RAM's experts to the GPU per prompt batch).
    // Nothing for an arena on a GPU or mapped.
    Result<void> pin_for_gpu();

  private:
    AlignedBuffer buffer_;
    gpu::HostPin pin_;  // declared after buffer_: unpinned before it is freed
    gpu::DeviceBuffer device_buffer_;
    void* mapping_ = nullptr;
    size_t mapping_bytes_ = 0;
    BoundViews views_;
    uint64_t weight_bytes_ = 0;
    double load_seconds_ = 0;
};

}  // namespace strata
