// Debug dump: named activations written to a directory so any layer can be diffed against a
// reference run (STRATA_DUMP=DIR or `--dump DIR`).
//
// Names follow the reference engine's graph callback names, with the layer after a dash:
// attn_norm-3, Qcur-3, Kcur-3, Vcur-3, kqv_out-3, ffn_inp-3, ffn_norm-3, ffn_out-3, l_out-3,
// result_norm, result_output. Every eval call gets a sequence number; its tensors are written as
// raw little-endian float32 files "<seq>.<name>.f32" (rows = tokens of the call, row-major), and
// one line per tensor is appended to "index.tsv": seq, name, rows, cols, first position, file.
// Reopening a directory continues its index and numbering.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "util/result.h"

namespace strata::engine {

class DebugDump {
  public:
    DebugDump() = default;  // disabled
    // Creates the directory if needed; an error when it cannot be written.
    static Result<DebugDump> open(const std::string& dir);
    ~DebugDump();
    DebugDump(DebugDump&& o) noexcept { *this = std::move(o); }
    DebugDump& operator=(DebugDump&& o) noexcept;
    DebugDump(const DebugDump&) = delete;
    DebugDump& operator=(const DebugDump&) = delete;

    bool enabled() const { return index_ != nullptr; }
    // Starts the tensors of a new eval call whose first token sits at position pos0.
    void begin_call(int64_t pos0);
    // layer < 0: a name without a layer suffix.
    void write(std::string_view name, int layer, const float* data, int64_t rows, int64_t cols);

  private:
    std::string dir_;
    std::FILE* index_ = nullptr;
    int64_t seq_ = -1;
    int64_t pos0_ = 0;
};

}  // namespace strata::engine
