#include "util/progress.h"

#include <unistd.h>

#include "util/units.h"

namespace strata {

namespace {

constexpr auto kInteractiveInterval = std::chrono::milliseconds(250);
constexpr auto kLogInterval = std::chrono::seconds(5);

}  // namespace

std::string format_progress(uint64_t done, uint64_t total, double seconds) {
    std::string s = format_bytes(done, true) + " of " + format_bytes(total, true);
    char buf[96];
    const double pct =
        total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
    std::snprintf(buf, sizeof buf, " (%.1f%%)", pct);
    s += buf;
    if (seconds > 0 && done > 0) {
        const double rate = static_cast<double>(done) / seconds;  // bytes per second
        std::snprintf(buf, sizeof buf, ", %.2f GB/s", rate / 1e9);
        s += buf;
        if (done < total) {
            std::snprintf(buf, sizeof buf, ", %.1f s left",
                          static_cast<double>(total - done) / rate);
            s += buf;
        }
    }
    return s;
}

ByteProgress::ByteProgress(std::FILE* out, std::string label, uint64_t total, bool enabled,
                           bool interactive)
    : out_(out),
      label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      interactive_(interactive),
      start_(Clock::now()),
      last_(start_) {}

ByteProgress::~ByteProgress() {
    finish();
}

bool ByteProgress::is_terminal(std::FILE* f) {
    return ::isatty(::fileno(f)) == 1;
}

void ByteProgress::update(uint64_t done) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ <
        (interactive_ ? Clock::duration(kInteractiveInterval) : Clock::duration(kLogInterval))) {
        return;
    }
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const std::string line = label_ + ": " + format_progress(done, total_, seconds);
    if (interactive_) {
        // Pad with spaces so a shorter line fully covers the previous one.
        std::fprintf(out_, "\r%-100s", line.c_str());
    } else {
        std::fprintf(out_, "%s\n", line.c_str());
    }
    std::fflush(out_);
    drawn_ = true;
}

void ByteProgress::finish() {
    if (enabled_ && interactive_ && drawn_) {
        std::fprintf(out_, "\r%-100s\r", "");
        std::fflush(out_);
    }
    enabled_ = false;
}

}  // namespace strata
