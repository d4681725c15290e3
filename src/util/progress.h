// A one-line progress report for long byte-producing jobs (writing a model, copying, ...):
// bytes done of total, rate in GB/s and time left. On a terminal the line is redrawn in place at
// most 4 times per second; otherwise (logs, CI) a plain line is printed every few seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace strata {

// "1.20 GB of 2.47 GB (48.6%), 1.85 GB/s, 0.7 s left" (decimal units, like disk vendors).
std::string format_progress(uint64_t done, uint64_t total, double seconds);

class ByteProgress {
  public:
    // Nothing is printed when `enabled` is false. `interactive`: redraw one line with '\r'.
    ByteProgress(std::FILE* out, std::string label, uint64_t total, bool enabled, bool interactive);
    ~ByteProgress();
    ByteProgress(const ByteProgress&) = delete;
    ByteProgress& operator=(const ByteProgress&) = delete;

    void update(uint64_t done);
    // Ends the line (when one was drawn); later updates print nothing.
    void finish();

    static bool is_terminal(std::FILE* f);

  private:
    using Clock = std::chrono::steady_clock;

    std::FILE* out_;
    std::string label_;
    uint64_t total_;
    bool enabled_, interactive_;
    bool drawn_ = false;
    Clock::time_point start_, last_;
};

}  // namespace strata
