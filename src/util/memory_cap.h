// Confines this process's memory, page cache included, to a limit for as long as a MemoryCap
// lives: a fresh memory cgroup (v2 memory.max, or v1 memory.limit_in_bytes) with swap off, the
// process moved into it, and moved back and the group removed on destruction.
//
// Why: `strata bench --baseline` compares strata with the naive approach, the whole file
// memory-mapped. A mapped file's pages live in the page cache, which no RAM budget of strata's
// own governs; only a cgroup limit makes the mapped baseline live within the same budget as the
// plan it is compared against, so the comparison shows what a small machine would see.
//
// Needs root (or a delegated cgroup); an error says why when the cap cannot be set up, and the
// caller decides whether to go on uncapped.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/result.h"

namespace strata {

class MemoryCap {
  public:
    static Result<std::unique_ptr<MemoryCap>> confine(uint64_t bytes);
    ~MemoryCap();
    MemoryCap(const MemoryCap&) = delete;
    MemoryCap& operator=(const MemoryCap&) = delete;

    // How the cap is set, for reports: "cgroup v1 memory.limit_in_bytes 3.00 GiB".
    const std::string& how() const { return how_; }
    uint64_t bytes() const { return bytes_; }
    // Bytes charged to the group at its peak (page cache included), when the kernel says.
    uint64_t peak_usage() const;

  private:
    MemoryCap() = default;
    std::string group_;   // the cgroup directory created
    std::string origin_;  // the cgroup directory the process came from
    std::string peak_file_;
    std::string how_;
    uint64_t bytes_ = 0;
};

}  // namespace strata
