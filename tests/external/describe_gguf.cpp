// Prints strata's reading of a GGUF file as JSON, for comparison with other GGUF readers:
//   {"tensor_data_offset", "alignment", "file_size",
//    "tensors": [{"name", "shape": [..], "type", "offset" (relative to the data section),
//                 "n_bytes"}],
//    "metadata": {key: scalar value | {"array": elem_type, "length": n}}}
// Integers are printed as decimal strings so 64-bit values survive JavaScript's numbers.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s FILE.gguf\n", argv[0]);
        return 2;
    }
    auto f = strata::read_gguf(argv[1]);
    if (!f) {
        std::fprintf(stderr, "%s\n", f.error().message.c_str());
        return 1;
    }
    nlohmann::json out;
    out["tensor_data_offset"] = std::to_string(f->data_offset);
    out["alignment"] = f->alignment;
    out["file_size"] = std::to_string(f->file_size);
    out["tensors"] = nlohmann::json::array();
    for (const auto& t : f->tensors) {
        nlohmann::json shape = nlohmann::json::array();
        for (uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(std::to_string(t.shape[d]));
        out["tensors"].push_back({{"name", t.name},
                                  {"shape", shape},
                                  {"type", static_cast<uint32_t>(t.type)},
                                  {"offset", std::to_string(t.offset - f->data_offset)},
                                  {"n_bytes", std::to_string(t.n_bytes)}});
    }
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& e : f->metadata) {
        if (const strata::Array* a = e.value.as_array()) {
            meta[e.key] = {{"array", static_cast<uint32_t>(a->elem_type)},
                           {"length", a->items.size()}};
        } else if (const std::string* s = e.value.as_string()) {
            meta[e.key] = *s;
        } else if (auto b = std::get_if<bool>(&e.value.v)) {
            meta[e.key] = *b;
        } else if (auto i = e.value.as_int()) {
            meta[e.key] = std::to_string(*i);
        } else if (auto u = e.value.as_uint()) {
            meta[e.key] = std::to_string(*u);
        } else {
            meta[e.key] = *e.value.as_float();
        }
    }
    out["metadata"] = meta;
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
}
