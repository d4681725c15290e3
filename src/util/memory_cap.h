// Confines this process's memory, page cache included, to a limit for as long as a MemoryCap
// lives: a fresh memory cgroup (v2 memory.max, or v1 memory.limit_in_bytes) with swap off, the
// process moved into it, and moved back and the group removed on destruction.
//
// Why: `strata bench --baseline` compares strata with the naive approach, the whole file
// memory-mapped. A mapped file's pages live in the page cache, which no RAM budget of strata's
// own governs; only a cgroup limit makes the mapped baseline live within the same budget as the
// plan it is compared against, so the comparison shows what a small machine would see.
//
// create() makes such a group without joining it, for another process to join: a child writes
// "0" (itself) to procs_file() between fork and exec. That is how the budget tests run `strata`
// inside a group capped at exactly its --ram.
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
    // This process, moved into a new group capped at `bytes`.
    static Result<std::unique_ptr<MemoryCap>> confine(uint64_t bytes);
    // A new group capped at `bytes` that no process is in yet. The group is removed on
    // destruction, once the processes that joined it have ended.
    static Result<std::unique_ptr<MemoryCap>> create(uint64_t bytes);
    ~MemoryCap();
    MemoryCap(const MemoryCap&) = delete;
    MemoryCap& operator=(const MemoryCap&) = delete;

    // How the cap is set, for reports: "cgroup v1 memory.limit_in_bytes 3.00 GiB".
    const std::string& how() const { return how_; }
    uint64_t bytes() const { return bytes_; }
    // Bytes charged to the group at its peak (page cache included), when the kernel says.
    uint64_t peak_usage() const;
    // Processes of the group the kernel's OOM killer ended (0 where the kernel does not say).
    uint64_t oom_kills() const;
    // Writing a pid to it moves that process into the group ("0": the writer).
    std::string procs_file() const { return group_ + "/cgroup.procs"; }

  private:
    MemoryCap() = default;
    std::string group_;   // the cgroup directory created
    std::string origin_;  // the cgroup directory the process came from
    std::string peak_file_;
    std::string events_file_;  // where the OOM kill count is (memory.events, memory.oom_control)
    std::string how_;
    uint64_t bytes_ = 0;
    bool joined_ = false;  // this process moved in (confine)
};

}  // namespace strata
