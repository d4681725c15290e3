// The resident store: every tensor of the model loaded once into owned memory, so that after
// load no byte comes from the disk. It is the store of the "resident" mode and the reference the
// streaming stores are checked against (same views, same results).
//
// The tensor data section is read with direct I/O in large requests kept in flight together
// (DirectReader), with a progress line showing GB/s, so loading runs at the disk's speed and
// leaves no copy in the page cache.
//
// `map` is the naive approach strata is compared against (`strata bench --baseline`): the whole
// file memory-mapped, no plan, the kernel's page cache deciding what stays in memory. The views
// and the forward pass are the same; only where the bytes come from differs.
#pragma once

#include <cstdio>
#include <memory>
#include <vector>

#include "io/aligned_buffer.h"
#include "model/model_info.h"
#include "store/weight_store.h"

namespace strata {

struct ResidentLoadOptions {
    bool progress = false;  // print a progress line while loading
    std::FILE* progress_out = stderr;
};

class ResidentStore final : public WeightStore {
  public:
    // Reads every tensor of `info` (a runnable model). The store keeps its own copy of what it
    // needs from `info`; `info` may go away afterwards.
    static Result<std::unique_ptr<ResidentStore>> load(const ModelInfo& info,
                                                       const ResidentLoadOptions& options = {});
    // Maps the whole file read-only instead; pages are read on first touch by the kernel.
    static Result<std::unique_ptr<ResidentStore>> map(const ModelInfo& info);
    ~ResidentStore() override;

    const LayerView& globals() const override { return globals_; }
    Result<const LayerView*> acquire_layer(int layer) override;
    void release_layer(int) override {}
    Result<ExpertView> acquire_expert(int layer, int expert) override;
    void release_expert(int, int) override {}
    const StoreStats& stats() const override { return stats_; }
    void reset_stats() override { stats_ = {}; }
    std::string mode_name() const override { return mapping_ ? "mmap" : "resident"; }

    uint64_t loaded_bytes() const { return loaded_bytes_; }
    double load_seconds() const { return load_seconds_; }

  private:
    ResidentStore() = default;
    Result<void> bind(const ModelInfo& info);

    AlignedBuffer data_;       // the file's tensor data section (loaded)
    void* mapping_ = nullptr;  // or the whole file, memory-mapped
    size_t mapping_bytes_ = 0;
    const std::byte* base_ = nullptr;  // where file offset data_offset_ is in memory
    uint64_t data_offset_ = 0;
    LayerView globals_;
    std::vector<LayerView> layers_;
    // experts_[layer][expert]; empty for dense layers
    std::vector<std::vector<ExpertView>> experts_;
    std::vector<uint64_t> layer_bytes_;
    StoreStats stats_;
    uint64_t loaded_bytes_ = 0;
    double load_seconds_ = 0;
};

}  // namespace strata
