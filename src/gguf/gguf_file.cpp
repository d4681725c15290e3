#include "gguf/gguf_file.h"

namespace strata {

uint64_t TensorInfo::row_bytes() const {
    auto info = tensor_type_info(type);
    if (!info) return 0;
    return shape[0] / info->block_size * info->type_size;
}

std::string TensorInfo::shape_string() const {
    std::string s = "[";
    for (uint32_t i = 0; i < n_dims; ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

const Value* GgufFile::find(std::string_view key) const {
    auto it = key_index_.find(std::string(key));
    return it == key_index_.end() ? nullptr : &metadata[it->second].value;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
    const Value* v = find(key);
    if (!v || !v->as_string()) return std::nullopt;
    return *v->as_string();
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_int() : std::nullopt;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_uint() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_float() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_bool() : std::nullopt;
}

const Array* GgufFile::get_array(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_array() : nullptr;
}

void GgufFile::reindex() {
    key_index_.clear();
    tensor_index_.clear();
    for (size_t i = 0; i < metadata.size(); ++i) key_index_.emplace(metadata[i].key, i);
    for (size_t i = 0; i < tensors.size(); ++i) tensor_index_.emplace(tensors[i].name, i);
}

}  // namespace strata
