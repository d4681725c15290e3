// Helpers shared by the synth tests: write a model into a temporary directory, read tensor data
// back as floats, and compare metadata values exactly.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/reader.h"
#include "quant/quant.h"
#include "synth/generator.h"
#include "util/file.h"

namespace strata::test {

inline SynthConfig preset_config(const std::string& preset, WeightFormat type = TensorType::F16,
                                 uint64_t seed = 1) {
    SynthConfig c;
    c.hparams = *synth_preset(preset);
    c.weights = type;
    c.seed = seed;
    c.threads = 2;
    return c;
}

// Writes the model and reads it back; fails the test (and returns an empty file) on error.
inline GgufFile synth_and_read(const SynthConfig& config, const std::string& path) {
    auto r = write_synthetic_model(config, path, /*overwrite=*/true);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (!r.ok()) return {};
    auto f = read_gguf(path);
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
    return f.ok() ? std::move(*f) : GgufFile{};
}

// The values of a tensor of any type the quant module reads, dequantized.
inline std::vector<float> read_tensor_floats(const GgufFile& f, const TensorInfo& t) {
    auto src = FileSource::open(f.path);
    EXPECT_TRUE(src.ok());
    std::vector<uint8_t> bytes(t.n_bytes);
    EXPECT_TRUE((*src)->read_at(t.offset, bytes.data(), bytes.size()).ok());
    std::vector<float> out(t.n_elements());
    EXPECT_TRUE(quant::is_quant_supported(t.type)) << t.name;
    if (!quant::is_quant_supported(t.type) || out.empty()) return out;
    // Row by row: a quantized row starts on a block boundary. Copied into aligned storage, as
    // dequantize_row wants its blocks aligned.
    const uint64_t row_len = t.shape[0];
    const uint64_t row_bytes = t.n_bytes / (t.n_elements() / row_len);
    std::vector<uint64_t> row(static_cast<size_t>((row_bytes + 7) / 8));
    for (uint64_t r = 0; r * row_len < out.size(); ++r) {
        std::memcpy(row.data(), bytes.data() + r * row_bytes, row_bytes);
        quant::dequantize_row(t.type, row.data(), out.data() + r * row_len,
                              static_cast<int64_t>(row_len));
    }
    return out;
}

inline std::vector<float> read_tensor_floats(const GgufFile& f, const std::string& name) {
    const TensorInfo* t = f.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? read_tensor_floats(f, *t) : std::vector<float>{};
}

// Exact equality: same type, same bits (floats compared bitwise), arrays element by element.
inline bool same_value(const Value& a, const Value& b) {
    if (a.type() != b.type()) return false;
    if (const Array* x = a.as_array()) {
        const Array* y = b.as_array();
        if (x->elem_type != y->elem_type || x->items.size() != y->items.size()) return false;
        for (size_t i = 0; i < x->items.size(); ++i) {
            if (!same_value(x->items[i], y->items[i])) return false;
        }
        return true;
    }
    if (const auto* s = a.as_string()) return *s == *b.as_string();
    if (const auto* f = std::get_if<float>(&a.v)) {
        return std::bit_cast<uint32_t>(*f) == std::bit_cast<uint32_t>(std::get<float>(b.v));
    }
    if (const auto* d = std::get_if<double>(&a.v)) {
        return std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(b.v));
    }
    return a.to_display() == b.to_display();  // integers and bools print exactly
}

}  // namespace strata::test
