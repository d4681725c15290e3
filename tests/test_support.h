// Shared helpers for the test suite: where the golden data is, scratch directories, running the
// strata binary.
#pragma once

#include "gpu/gpu.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace strata::test {

// ../shared/testdata resolved from the repository root, or $STRATA_TESTDATA.
std::filesystem::path testdata_dir();
// True when the golden data is present.
bool have_testdata();
// True when the golden data must be present: in CI (CI=true), where a run that skips every golden
// test for want of the data would pass while checking little.
bool testdata_required();
// What a test that needs the data says when it is missing.
std::string missing_testdata_message();
// Path of the built strata executable.
std::string strata_binary();

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

  private:
    std::filesystem::path path_;
};

struct CommandResult {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};
// Runs a shell command line, capturing stdout and stderr.
CommandResult run_command(const std::string& command_line);
// Runs the strata binary with the given (already shell-quoted) arguments, with STRATA_CACHE_DIR
// set to test_cache_dir(): commands that need the hardware profile (inspect's plan) find a fixed
// one instead of measuring the machine and writing to the user's cache.
CommandResult run_strata(const std::string& args);
// The smallest --ram strata accepts for `args` (a run or bench command line with the model and
// the flags that decide the plan), as its own error names it ("need at least 15.58 MiB"),
// rounded up; 0 when the command does not fail that way. The process's baseline is measured by
// strata, so this is the only way a test can know it.
uint64_t smallest_ram(const std::string& args);
// Runs `args` (with the model and the flags that decide the plan) under --ram at `margin` bytes
// above smallest_ram(). The process's baseline, which strata measures at every run, moves by some
// 100 KiB between runs: a run that finds the budget just too small names its own minimum, and
// the next try takes that one plus the margin. `ram` is the budget of the last try.
struct BudgetedRun {
    CommandResult result;
    uint64_t ram = 0;
};
BudgetedRun run_near_smallest_ram(const std::string& args, uint64_t margin);
// The minimum a "too small" error names ("need at least 15.58 MiB"), rounded up; 0 without one.
uint64_t named_minimum(const std::string& error);
// A directory, removed at exit, holding profile.json with test_profile(): the same fixed figures
// on every machine, with disk entries for the temp directory, the golden data and the working
// directory and an empty CPU kernel table of this machine's CPU, so nothing is measured.
const std::string& test_cache_dir();
// Single-quotes a string for the shell.
std::string shell_quote(const std::string& s);

std::string read_text_file(const std::filesystem::path& p);

}  // namespace strata::test

// In a test that needs a GPU: skipped, with the reason, where there is none (CI has none).
#define STRATA_REQUIRE_GPU()                                               \
    do {                                                                   \
        if (::strata::gpu::devices().list.empty()) {                       \
            GTEST_SKIP() << "no GPU: " << ::strata::gpu::devices().reason; \
        }                                                                  \
    } while (0)

// The first line of every test that needs the golden data: without it the test is skipped, or
// fails when the data must be present (testdata_required()).
#define STRATA_REQUIRE_TESTDATA()                                           \
    do {                                                                    \
        if (!::strata::test::have_testdata()) {                             \
            if (::strata::test::testdata_required()) {                      \
                GTEST_FAIL() << ::strata::test::missing_testdata_message(); \
            }                                                               \
            GTEST_SKIP() << ::strata::test::missing_testdata_message();     \
        }                                                                   \
    } while (0)
