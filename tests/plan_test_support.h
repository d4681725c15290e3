// Helpers for the plan tests: a hand-built hardware profile with round figures, and the
// description of a synthetic model of any preset built from its header alone (no weights are
// written, so a 60 GB shape costs nothing).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "gguf/tensor_type.h"
#include "model/model_info.h"
#include "plan/budget.h"
#include "profile/hardware_profile.h"
#include "synth/generator.h"

namespace strata::test {

// 64 GiB of RAM (48 available) read at 10 GB/s, no GPU, one disk (index 0) reading 1.5 GB/s with
// 1 MiB blocks at queue depth 8, 4 KiB blocks.
inline HardwareProfile plan_profile() {
    HardwareProfile p;
    p.measured_at = "2025-01-31T12:00:00Z";
    p.memory.total = p.memory.system_total = 64ull << 30;
    p.memory.available = 48ull << 30;
    p.memory.read_bandwidth = 10e9;
    p.memory.threads = 2;
    p.memory.buffer = 1ull << 30;
    DiskProfile d;
    d.dir = "/models";
    d.mount_point = "/";
    d.source = "/dev/nvme0n1p1";
    d.device = "nvme0n1";
    d.method = "scratch";
    d.direct = true;
    d.block_size = 4096;
    d.reads = {{4096, 32, 0.3e9, 73000, 0, 0}, {1u << 20, 8, 1.5e9, 1430, 0, 0}};
    p.disks.push_back(d);
    return p;
}

// plan_profile() with one 80 GiB GPU, `free_bytes` of it free, read at 3 TB/s.
inline HardwareProfile plan_profile_with_gpu(uint64_t free_bytes) {
    HardwareProfile p = plan_profile();
    GpuProfile g;
    g.name = "Test GPU";
    g.memory_total = 80ull << 30;
    g.memory_free = free_bytes;
    g.read_bandwidth = 3e12;
    g.device_copy_bandwidth = 5e12;
    p.gpus.push_back(g);
    return p;
}

inline Budgets plan_budgets(uint64_t ram, uint64_t gpu) {
    Budgets b;
    b.ram = ram;
    b.gpu_mem = gpu;
    return b;
}

// The ModelInfo describe_model gives for the file `strata synth PRESET --type TYPE` would write:
// the same metadata and tensor table, offsets laid out as GgufWriter lays them out (32-byte
// aligned after a header), nothing on disk.
inline ModelInfo synthetic_model_info(const std::string& preset, const std::string& type) {
    SynthConfig config;
    config.hparams = *synth_preset(preset);
    config.weights = *weight_format_from_name(type);
    auto plan = plan_synthetic_model(config);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
    if (!plan.ok()) return {};
    GgufFile f;
    f.path = preset + "-" + type + ".gguf";
    f.metadata = plan->metadata;
    f.data_offset = 8u << 20;  // past the header and a vocabulary's metadata
    uint64_t offset = f.data_offset;
    for (size_t i = 0; i < plan->layout.size(); ++i) {
        const TensorSpec& spec = plan->layout[i];
        TensorInfo t;
        t.name = spec.name;
        t.type = plan->types[i];
        t.n_dims = static_cast<uint32_t>(spec.shape.size());
        for (size_t d = 0; d < spec.shape.size(); ++d) t.shape[d] = spec.shape[d];
        const TensorTypeInfo info = *tensor_type_info(t.type);
        t.n_bytes = t.n_elements() / info.block_size * info.type_size;
        offset =
            (offset + kGgufDefaultAlignment - 1) / kGgufDefaultAlignment * kGgufDefaultAlignment;
        t.offset = offset;
        offset += t.n_bytes;
        f.tensors.push_back(std::move(t));
    }
    f.file_size = offset;
    f.reindex();
    ModelInfo info = describe_model(std::move(f));
    EXPECT_TRUE(info.runnable()) << (info.problems.empty() ? "" : info.problems.front());
    return info;
}

}  // namespace strata::test
