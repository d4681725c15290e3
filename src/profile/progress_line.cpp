#include "profile/progress_line.h"

#include <unistd.h>

#include <algorithm>

namespace strata {

ProgressLine::ProgressLine(std::FILE* out, bool enabled)
    : out_(out), enabled_(enabled), interactive_(enabled && ::isatty(::fileno(out))) {}

ProgressLine::~ProgressLine() {
    finish();
}

void ProgressLine::step(const std::string& what) {
    if (!enabled_) return;
    ++done_;
    current_ = "profile [" + std::to_string(done_) + "/" + std::to_string(std::max(total_, done_)) +
               "] " + what;
    if (interactive_) {
        draw(current_);
    } else {
        std::fprintf(out_, "%s\n", current_.c_str());
        std::fflush(out_);
    }
}

void ProgressLine::detail(const std::string& text) {
    if (interactive_) draw(current_ + " " + text);
}

void ProgressLine::draw(const std::string& text) {
    // Carriage return, the text, erase to the end of the line (a shorter line leaves no tail).
    std::fprintf(out_, "\r%s\033[K", text.c_str());
    std::fflush(out_);
    drawn_ = true;
}

void ProgressLine::finish() {
    if (interactive_ && drawn_) {
        std::fprintf(out_, "\r\033[K");
        std::fflush(out_);
        drawn_ = false;
    }
}

}  // namespace strata
