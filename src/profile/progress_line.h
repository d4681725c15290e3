// Progress of a multi-step measurement on stderr: "profile [7/22] disk 64 KiB reads, queue depth
// 16". On a terminal one line is redrawn in place; otherwise (logs, CI, tests) every step prints
// a line of its own and in-step details are left out.
#pragma once

#include <cstdio>
#include <string>

namespace strata {

class ProgressLine {
  public:
    // Prints nothing when `enabled` is false.
    ProgressLine(std::FILE* out, bool enabled);
    ~ProgressLine();
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

    void set_steps(int total) { total_ = total; }
    void step(const std::string& what);
    // Appended to the current step on a terminal ("42%"); ignored otherwise.
    void detail(const std::string& text);
    // Clears the line on a terminal.
    void finish();

  private:
    void draw(const std::string& text);

    std::FILE* out_;
    bool enabled_, interactive_;
    int total_ = 0, done_ = 0;
    std::string current_;
    bool drawn_ = false;
};

}  // namespace strata
