// Views of a model's tensors in memory: a tensor's bytes with its type, shape and the memory
// they live in, and the tensors of one layer (or one routed expert) by role. The store hands
// these out and the backends compute with them; neither needs to know how the other got them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gguf/tensor_type.h"
#include "model/tensor_role.h"

namespace strata {

// Whose memory a pointer points into. Host memory is ordinary pageable RAM; pinned host memory
// is RAM locked for DMA (a GPU copies from it at full bus speed); device memory belongs to GPU
// `device` and is not addressable from the CPU.
enum class MemoryKind : uint8_t { Host, PinnedHost, Device };
std::string_view memory_kind_name(MemoryKind k);  // "host", "pinned", "device"

struct MemoryPlace {
    MemoryKind kind = MemoryKind::Host;
    int device = 0;  // the GPU, for Device memory

    // True where the CPU can read the bytes directly.
    bool host_readable() const { return kind != MemoryKind::Device; }
    bool operator==(const MemoryPlace&) const = default;
};

// A tensor's bytes in memory with its GGUF type and shape (ggml order: ne[0] is the row length).
struct TensorView {
    TensorType type = TensorType::F32;
    const std::byte* data = nullptr;
    std::array<int64_t, 4> ne{0, 1, 1, 1};
    size_t row_bytes = 0;  // bytes of one row of ne[0] elements
    MemoryPlace where;     // whose memory `data` points into

    bool present() const { return data != nullptr; }
    int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
    // The elements of an F32 tensor, for code running where the bytes are.
    const float* f32() const { return reinterpret_cast<const float*>(data); }
};

inline constexpr size_t kTensorRoleCount = static_cast<size_t>(TensorRole::Other) + 1;

// The non-expert tensors of one layer (or, for layer -1, the tensors outside the blocks), by role.
// Routed-expert tensors are not here: they come one expert at a time through acquire_expert.
struct LayerView {
    std::array<TensorView, kTensorRoleCount> weights{};
    std::array<TensorView, kTensorRoleCount> biases{};

    const TensorView& weight(TensorRole r) const { return weights[static_cast<size_t>(r)]; }
    const TensorView& bias(TensorRole r) const { return biases[static_cast<size_t>(r)]; }
};

// One routed expert's matrices: gate and up [n_embd -> n_ff_exp], down [n_ff_exp -> n_embd],
// each a 2-D view (rows = output features); and, in families whose experts have them (gpt-oss),
// their biases: F32 rows of n_ff_exp, n_ff_exp and n_embd, absent otherwise. The biases are the
// layer's (one row per expert of ffn_*_exps.bias, held with the router); the store attaches them
// (with_expert_biases) to the matrices it hands out, wherever those lie.
struct ExpertView {
    TensorView gate, up, down;
    TensorView gate_bias, up_bias, down_bias;
};

// ev with expert e's rows of the layer's expert biases (w.bias(ExpertGate) ...; none where the
// layer has none).
inline ExpertView with_expert_biases(ExpertView ev, const LayerView& w, int e) {
    const auto row = [e](const TensorView& all) {
        if (!all.present()) return TensorView{};
        TensorView v = all;
        v.data += size_t(e) * all.row_bytes;
        v.ne = {all.ne[0], 1, 1, 1};
        return v;
    };
    ev.gate_bias = row(w.bias(TensorRole::ExpertGate));
    ev.up_bias = row(w.bias(TensorRole::ExpertUp));
    ev.down_bias = row(w.bias(TensorRole::ExpertDown));
    return ev;
}

// An expert in an expert entry (a GPU's level of the expert cache,
// Backend::reserve_expert_entries): its matrices gate, up, down and then its bias rows where it
// has them, each piece starting at a multiple of kExpertEntryAlign bytes.
inline constexpr uint64_t kExpertEntryAlign = 256;
inline uint64_t expert_entry_piece(const TensorView& v) {
    const uint64_t bytes = v.present() ? uint64_t(v.rows()) * v.row_bytes : 0;
    return (bytes + kExpertEntryAlign - 1) / kExpertEntryAlign * kExpertEntryAlign;
}
inline uint64_t expert_entry_bytes(const ExpertView& e) {
    return expert_entry_piece(e.gate) + expert_entry_piece(e.up) + expert_entry_piece(e.down) +
           expert_entry_piece(e.gate_bias) + expert_entry_piece(e.up_bias) +
           expert_entry_piece(e.down_bias);
}

// All routed experts of a layer where they lie evenly spaced in one memory (a resident layer of
// stacked expert tensors): expert e's matrices are `first`'s views moved by e times the strides.
struct ExpertStack {
    ExpertView first;
    size_t gate_stride = 0, up_stride = 0, down_stride = 0;  // bytes between experts
    int n_expert = 0;
};

}  // namespace strata
