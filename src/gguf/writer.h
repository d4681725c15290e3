// GGUF writer (version 3), streaming: declare metadata and tensors, open, then append tensor data
// in declaration order in chunks of any size. Memory use is independent of model size, so tens of
// GB can be written quickly. The file appears under its final name only when finish() succeeds
// (written to "<path>.partial" and renamed), so an interrupted write never leaves a plausible but
// broken model behind, and an existing file is only replaced if the caller allows it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/result.h"

namespace strata {

class GgufWriter {
  public:
    GgufWriter() = default;
    ~GgufWriter();
    GgufWriter(const GgufWriter&) = delete;
    GgufWriter& operator=(const GgufWriter&) = delete;

    // Metadata in insertion order; setting an existing key replaces its value in place.
    // "general.alignment" also sets the data alignment.
    void set(const std::string& key, Value value);
    // Declares the next tensor; shape in ggml order (shape[0] = row length).
    Result<void> add_tensor(const std::string& name, TensorType type,
                            const std::vector<uint64_t>& shape);

    // Write with O_DIRECT, bypassing the page cache, where the file system supports it (else
    // silently buffered). Big outputs then cost little CPU and memory, and a model just written
    // is not left in the cache to flatter a following read benchmark. Call before open().
    void set_direct_io(bool on) { want_direct_io_ = on; }

    // Writes header, metadata and tensor table. overwrite=false refuses an existing file.
    Result<void> open(const std::string& path, bool overwrite = false);
    // Appends tensor data; padding between tensors is inserted automatically.
    Result<void> write(const void* data, size_t n);
    // Checks every tensor was written completely, flushes, and moves the file into place.
    Result<void> finish();

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::vector<MetadataEntry>& metadata() const { return metadata_; }
    uint32_t alignment() const { return alignment_; }
    // Size of the finished file (valid after the last add_tensor).
    uint64_t file_size() const;
    // Index of the tensor that the next write() feeds (tensors().size() when all are written).
    size_t current_tensor() const { return cur_tensor_; }

  private:
    Result<void> put(const void* data, size_t n);
    Result<void> pad_to(uint64_t pos);
    Result<void> flush();
    uint64_t header_bytes() const;

    std::vector<MetadataEntry> metadata_;
    std::vector<TensorInfo> tensors_;  // offsets relative to the data section
    uint32_t alignment_ = kGgufDefaultAlignment;
    std::string path_, tmp_path_;
    int fd_ = -1;
    bool want_direct_io_ = false;
    bool direct_io_ = false;  // fd_ is open with O_DIRECT
    // Write buffer, aligned for O_DIRECT; buf_len_ bytes of it are pending.
    std::unique_ptr<uint8_t, decltype(&std::free)> buf_{nullptr, &std::free};
    size_t buf_len_ = 0;
    uint64_t pos_ = 0;         // bytes written to the file so far (incl. buffered)
    uint64_t data_start_ = 0;  // absolute offset of the data section
    size_t cur_tensor_ = 0;
    uint64_t cur_written_ = 0;  // bytes of the current tensor written so far
};

// Serialised size of one metadata value (for planning and tests).
uint64_t encoded_value_size(const Value& v);

}  // namespace strata
