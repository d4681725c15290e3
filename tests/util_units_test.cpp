// Sizes on the command line (--ram 3G): parse_size accepts the spellings people type, in binary
// units, and refuses everything else with a message that quotes the text; format_bytes and
// format_count print what the plan and inspect show.
#include <gtest/gtest.h>

#include "util/units.h"

namespace strata {
namespace {

uint64_t size(const char* text) {
    auto r = parse_size(text);
    EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : 0;
}

std::string size_error(const char* text) {
    auto r = parse_size(text);
    EXPECT_FALSE(r.ok()) << text << " was accepted as " << (r.ok() ? *r : 0);
    return r.ok() ? "" : r.error().message;
}

TEST(UnitsParseSize, PlainBytesAndBinaryUnits) {
    EXPECT_EQ(size("4096"), 4096u);
    EXPECT_EQ(size("0"), 0u);
    EXPECT_EQ(size("12B"), 12u);
    EXPECT_EQ(size("512K"), 512u << 10);
    EXPECT_EQ(size("512M"), 512ull << 20);
    EXPECT_EQ(size("4G"), 4ull << 30);
    EXPECT_EQ(size("2T"), 2ull << 40);
    EXPECT_EQ(size("1P"), 1ull << 50);
}

TEST(UnitsParseSize, SpellingsAreBinaryWhateverTheCase) {
    for (const char* s : {"3G", "3g", "3GB", "3gb", "3GiB", "3gib", "3 G", " 3G ", "3 GiB"}) {
        EXPECT_EQ(size(s), 3ull << 30) << s;
    }
    EXPECT_EQ(size("1k"), 1024u);
    EXPECT_EQ(size("1KiB"), 1024u);
}

TEST(UnitsParseSize, FractionsRoundToWholeBytes) {
    EXPECT_EQ(size("1.5GiB"), 3ull << 29);
    EXPECT_EQ(size("0.5K"), 512u);
    EXPECT_EQ(size(".5M"), 512u << 10);
    EXPECT_EQ(size("1.0000001K"), 1024u);
}

TEST(UnitsParseSize, LargestValuesAreExactAndOverflowIsRefused) {
    EXPECT_EQ(size("18446744073709551615"), 18446744073709551615ull);
    EXPECT_EQ(size("15.9999P"), static_cast<uint64_t>(15.9999L * (1ull << 50) + 0.5L));
    EXPECT_NE(size_error("18446744073709551616").find("too large"), std::string::npos);
    EXPECT_NE(size_error("16384P").find("too large"), std::string::npos);
    EXPECT_NE(size_error("99999999999999999999999T").find("too large"), std::string::npos);
}

TEST(UnitsParseSize, BadTextIsAClearError) {
    const std::string e = size_error("3X");
    EXPECT_NE(e.find("invalid size '3X'"), std::string::npos) << e;
    EXPECT_NE(e.find("unknown unit 'X'"), std::string::npos) << e;
    EXPECT_NE(e.find("1.5GiB"), std::string::npos) << "no example in: " << e;
    EXPECT_NE(size_error("").find("empty"), std::string::npos);
    EXPECT_NE(size_error("   ").find("empty"), std::string::npos);
    EXPECT_NE(size_error("G").find("no number"), std::string::npos);
    EXPECT_NE(size_error("-1G").find("no number"), std::string::npos);
    EXPECT_NE(size_error(".G").find("no number"), std::string::npos);
    EXPECT_NE(size_error("1.2.3G").find("decimal point"), std::string::npos);
    EXPECT_NE(size_error("1.5").find("whole"), std::string::npos);
    EXPECT_NE(size_error("3GG").find("unknown unit"), std::string::npos);
    EXPECT_NE(size_error("3 Gibibytes").find("unknown unit"), std::string::npos);
    EXPECT_NE(size_error("1e9").find("unknown unit"), std::string::npos);
    EXPECT_NE(size_error("0x10").find("unknown unit"), std::string::npos);
}

TEST(UnitsFormat, BytesAndCounts) {
    EXPECT_EQ(format_bytes(0), "0 B");
    EXPECT_EQ(format_bytes(1023), "1023 B");
    EXPECT_EQ(format_bytes(1536), "1.50 KiB");
    EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
    EXPECT_EQ(format_bytes(1540, /*decimal=*/true), "1.54 kB");
    EXPECT_EQ(format_count(999), "999");
    EXPECT_EQ(format_count(1234567), "1.23 M");
}

}  // namespace
}  // namespace strata
