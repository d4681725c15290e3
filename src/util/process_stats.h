// This process's memory and I/O figures from /proc, for benchmarks and the budget invariant
// tests: peak resident memory (VmHWM, resettable), and the bytes it made the storage layer read
// (/proc/self/io read_bytes: direct I/O and page-cache misses alike, page-cache hits not).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata {

struct ProcessIo {
    uint64_t read_bytes = 0;  // fetched from storage on this process's behalf
    uint64_t rchar = 0;       // passed through read-like calls, cached or not
};

// nullopt where /proc is not readable.
std::optional<ProcessIo> process_io();
std::optional<uint64_t> peak_rss_bytes();     // VmHWM
std::optional<uint64_t> current_rss_bytes();  // VmRSS
// Starts a new peak (VmHWM := VmRSS) through /proc/self/clear_refs; false where not allowed.
bool reset_peak_rss();

// Parsers, separate so they can be tested on text.
std::optional<ProcessIo> parse_process_io(const std::string& text);
std::optional<uint64_t> parse_status_kib(const std::string& text, const std::string& key);

}  // namespace strata
