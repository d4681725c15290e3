// How much RAM this process may use: /proc/meminfo, lowered by a cgroup v2 memory.max on the way
// from this process's cgroup to the root (containers and systemd slices set one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "profile/hardware_profile.h"
#include "util/result.h"

namespace strata {

// Fills total, available, system_total and cgroup_limit; the bandwidth fields stay zero.
Result<MemoryProfile> detect_system_memory();

// Parsers, separate so they can be tested on text: "MemTotal:  24576000 kB" lines, and a
// memory.max value ("max" or a byte count).
struct MemInfo {
    uint64_t total = 0, available = 0;
};
Result<MemInfo> parse_meminfo(const std::string& text);
std::optional<uint64_t> parse_cgroup_limit(const std::string& text);
// A value from a cgroup memory.stat ("anon 123\nfile 456\n..."); 0 when absent.
uint64_t memory_stat_value(const std::string& text, const std::string& key);

}  // namespace strata
