// The /proc parsers behind peak RSS and storage-read figures, on text and on this process.
#include <gtest/gtest.h>

#include <vector>

#include "util/process_stats.h"

namespace strata {
namespace {

TEST(ProcessStats, ParsesProcSelfIo) {
    const auto io = parse_process_io(
        "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 40960\nwrite_bytes: 0\n");
    ASSERT_TRUE(io);
    EXPECT_EQ(io->rchar, 6976u);
    EXPECT_EQ(io->read_bytes, 40960u);
    EXPECT_FALSE(parse_process_io("rchar: 1\n"));
    EXPECT_FALSE(parse_process_io("rchar: x\nread_bytes: 1\n"));
}

TEST(ProcessStats, ParsesStatusKib) {
    const std::string text =
        "Name:\tstrata\nVmPeak:\t  200 kB\nVmHWM:\t    1024 kB\nVmRSS:\t 512 kB\n";
    EXPECT_EQ(parse_status_kib(text, "VmHWM"), 1024u * 1024);
    EXPECT_EQ(parse_status_kib(text, "VmRSS"), 512u * 1024);
    EXPECT_FALSE(parse_status_kib(text, "VmSwap"));
    EXPECT_FALSE(parse_status_kib("XVmHWM: 5 kB\n", "VmHWM"));  // whole keys only
}

TEST(ProcessStats, PeakFollowsAnAllocationAndResets) {
    auto before = peak_rss_bytes();
    if (!before) GTEST_SKIP() << "no /proc here";
    {
        std::vector<char> big(64u << 20, 1);
        volatile char sink = big[big.size() / 2];
        (void)sink;
        EXPECT_GE(*peak_rss_bytes(), 64u << 20);
    }
    if (!reset_peak_rss()) GTEST_SKIP() << "clear_refs is not writable here";
    EXPECT_LT(*peak_rss_bytes(), *current_rss_bytes() + (16u << 20));
}

}  // namespace
}  // namespace strata
