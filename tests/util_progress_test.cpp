// The progress line: its wording and that it stays quiet when disabled or updated too often.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "util/progress.h"

namespace strata {
namespace {

std::string contents(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    char buf[256];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    return s;
}

TEST(Progress, FormatsBytesRateAndTimeLeft) {
    EXPECT_EQ(format_progress(1200000000, 2400000000, 0.6),
              "1.20 GB of 2.40 GB (50.0%), 2.00 GB/s, 0.6 s left");
    // Done: no time left shown; no rate before any time has passed.
    EXPECT_EQ(format_progress(2400000000, 2400000000, 1.2),
              "2.40 GB of 2.40 GB (100.0%), 2.00 GB/s");
    EXPECT_EQ(format_progress(0, 1000, 0.0), "0 B of 1.00 kB (0.0%)");
}

TEST(Progress, PrintsNothingWhenDisabledOrUpdatedFasterThanItsInterval) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    {
        ByteProgress off(f, "writing", 100, /*enabled=*/false, /*interactive=*/true);
        for (int i = 0; i <= 100; ++i) off.update(i);
        // Enabled, but every update comes well within the first redraw interval.
        ByteProgress on(f, "writing", 100, /*enabled=*/true, /*interactive=*/false);
        for (int i = 0; i <= 100; ++i) on.update(i);
    }
    EXPECT_EQ(contents(f), "");
    std::fclose(f);
}

}  // namespace
}  // namespace strata
