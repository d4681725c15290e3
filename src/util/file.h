// Read-only access to files by absolute offset. The model file is never written (design
// invariant 3), so there is no write path here; writers own their own output files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "util/result.h"

namespace strata {

// Something with a size that can be read at any offset: a file, or bytes in memory (tests, fuzz).
class ByteSource {
  public:
    virtual ~ByteSource() = default;
    virtual uint64_t size() const = 0;
    // Reads exactly n bytes at offset; a short read is an error, never partial data.
    virtual Result<void> read_at(uint64_t offset, void* dst, size_t n) const = 0;
    // Name used in error messages (the file path).
    virtual const std::string& name() const = 0;
};

// Buffered reads; the file's cached pages are dropped when it is closed (POSIX_FADV_DONTNEED),
// so reading a model's metadata leaves nothing in the page cache.
class FileSource final : public ByteSource {
  public:
    static Result<std::unique_ptr<FileSource>> open(const std::string& path);
    ~FileSource() override;
    FileSource(const FileSource&) = delete;
    FileSource& operator=(const FileSource&) = delete;

    uint64_t size() const override { return size_; }
    Result<void> read_at(uint64_t offset, void* dst, size_t n) const override;
    const std::string& name() const override { return path_; }
    int fd() const { return fd_; }

  private:
    FileSource(std::string path, int fd, uint64_t size)
        : path_(std::move(path)), fd_(fd), size_(size) {}
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

class MemorySource final : public ByteSource {
  public:
    MemorySource(const void* data, size_t size, std::string name = "<memory>")
        : data_(static_cast<const uint8_t*>(data)), size_(size), name_(std::move(name)) {}
    uint64_t size() const override { return size_; }
    Result<void> read_at(uint64_t offset, void* dst, size_t n) const override;
    const std::string& name() const override { return name_; }

  private:
    const uint8_t* data_;
    size_t size_;
    std::string name_;
};

}  // namespace strata
