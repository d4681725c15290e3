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
#include "synth/generator.h"
#include "synth/half_float.h"
#include "util/file.h"

namespace strata::test {

inline SynthConfig preset_config(const std::string& preset, TensorType type = TensorType::F16,
                                 uint64_t seed = 1) {
    SynthConfig c;
    c.hparams = *synth_preset(preset);
    c.type = type;
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

// The values of an F32, F16 or BF16 tensor.
inline std::vector<float> read_tensor_floats(const GgufFile& f, const TensorInfo& t) {
    auto src = FileSource::open(f.path);
    EXPECT_TRUE(src.ok());
    std::vector<uint8_t> bytes(t.n_bytes);
    EXPECT_TRUE((*src)->read_at(t.offset, bytes.data(), bytes.size()).ok());
    std::vector<float> out(t.n_elements());
    for (size_t i = 0; i < out.size(); ++i) {
        if (t.type == TensorType::F32) {
            std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        } else {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            out[i] = t.type == TensorType::F16 ? f16_to_float(h) : bf16_to_float(h);
        }
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
