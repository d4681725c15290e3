// The device memory of the GPU level of the expert cache (Backend::reserve_expert_entries):
// fixed-size entries, each one routed expert's three matrices (and bias rows), filled from host
// memory on a
// copy stream of their own so that a load runs beside the compute stream's kernels. Each entry
// has an event that follows its last copy: a load is usable once that event has completed,
// which ready() asks without waiting. A load waits on the device for the compute stream's work
// queued before it, the last kernels that may read the entry's previous expert.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "gpu/gpu.h"
#include "model/tensor_view.h"
#include "util/result.h"

namespace strata::cuda {

class ExpertEntries {
  public:
    ExpertEntries() = default;
    ExpertEntries(const ExpertEntries&) = delete;
    ExpertEntries& operator=(const ExpertEntries&) = delete;
    ~ExpertEntries();

    Result<void> allocate(uint64_t entry_bytes, uint32_t entries, int device);
    bool allocated() const { return !events_.empty(); }
    // The copy of `from` into `entry` queued behind `compute`'s work so far; the entry's view.
    Result<ExpertView> load(uint32_t entry, const ExpertView& from, cudaStream_t compute);
    bool ready(uint32_t entry) const;
    void wait() const;
    uint64_t entry_bytes() const { return entry_bytes_; }
    // The entry holding `v` (a view load() returned), or -1 when it lies elsewhere.
    int64_t entry_of(const TensorView& v) const;
    // The entries as one stack of experts shaped like `like` (an entry's view): expert i is
    // entry i, every matrix entry_bytes after the one before.
    ExpertStack stack(const ExpertView& like) const;

  private:
    int device_ = 0;
    uint64_t entry_bytes_ = 0;
    gpu::DeviceBuffer memory_;
    cudaStream_t copies_ = nullptr;
    cudaEvent_t compute_done_ = nullptr;
    std::vector<cudaEvent_t> events_;  // per entry: after its last copy
};

}  // namespace strata::cuda
