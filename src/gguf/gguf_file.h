// A GGUF file as read: header, metadata in file order, tensor table. No tensor data is held;
// each tensor records its absolute byte range in the file so the store can read it later.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace strata {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kMaxTensorDims = 4;

struct TensorInfo {
    std::string name;
    TensorType type = TensorType::F32;
    // ggml order: shape[0] is the contiguous (row) dimension. Unused trailing dims are 1.
    std::array<uint64_t, kMaxTensorDims> shape{1, 1, 1, 1};
    uint32_t n_dims = 0;
    uint64_t offset = 0;  // absolute offset of the first byte in the file
    uint64_t n_bytes = 0;

    uint64_t n_elements() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
    // Bytes of one row (shape[0] elements).
    uint64_t row_bytes() const;
    // "[4096, 11008]"
    std::string shape_string() const;
};

struct MetadataEntry {
    std::string key;
    Value value;
};

class GgufFile {
  public:
    std::string path;
    uint32_t version = 3;
    uint64_t file_size = 0;
    uint32_t alignment = kGgufDefaultAlignment;
    uint64_t data_offset = 0;  // absolute offset of the tensor data section
    std::vector<MetadataEntry> metadata;
    std::vector<TensorInfo> tensors;

    const Value* find(std::string_view key) const;
    const TensorInfo* find_tensor(std::string_view name) const;

    // Typed lookups; nullopt when missing or of an incompatible type.
    std::optional<std::string> get_string(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<uint64_t> get_uint(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    const Array* get_array(std::string_view key) const;

    // Rebuild the name indexes after editing metadata/tensors by hand.
    void reindex();

  private:
    std::unordered_map<std::string, size_t> key_index_;
    std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace strata
