// Human-readable sizes and counts, and parsing of sizes given on the command line ("3G", "512M").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace strata {

// n rounded up to a multiple of a (a > 0).
constexpr uint64_t round_up(uint64_t n, uint64_t a) {
    return (n + a - 1) / a * a;
}

// 1536 -> "1.50 KiB"; decimal=true gives powers of 1000 ("1.54 kB").
std::string format_bytes(uint64_t bytes, bool decimal = false);
// 1234567 -> "1.23 M" (parameter counts and the like).
std::string format_count(uint64_t n);
// "12.35" for (12.345, 2): a number with a fixed count of decimals, for tables.
std::string format_fixed(double v, int digits);
// "3G", "3GiB", "3 GB", "512M", "1.5T", "4096" (bytes) -> bytes. Units are binary whatever the
// spelling (K = KB = KiB = 1024): memory budgets are given in the units RAM is sold in. Errors
// quote the text and say what is wrong with it.
Result<uint64_t> parse_size(std::string_view text);

}  // namespace strata
