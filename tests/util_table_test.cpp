// The text-table formatter: column widths, alignment, UTF-8 widths, rules, no trailing blanks.
#include <gtest/gtest.h>

#include "util/table.h"

namespace strata {
namespace {

TEST(TextTable, AlignsColumnsToTheWidestCell) {
    TextTable t({{"type"}, {"tensors", Align::Right}, {"bytes", Align::Right}});
    t.add_row({"Q4_K", "13", "1.21 MiB"});
    t.add_row({"F32", "5", "20 B"});
    t.add_rule();
    t.add_row({"total", "18"});
    EXPECT_EQ(t.render("  "),
              "  type   tensors     bytes\n"
              "  Q4_K        13  1.21 MiB\n"
              "  F32          5      20 B\n"
              "  -----  -------  --------\n"
              "  total       18\n");
    EXPECT_EQ(t.rows(), 4u);
}

TEST(TextTable, CountsCharactersNotBytes) {
    EXPECT_EQ(display_width("×"), 1u);
    EXPECT_EQ(display_width("8 × 1 KiB"), 9u);
    TextTable t({{"a"}, {"b"}});
    t.add_row({"Q8_0 ×15", "x"});
    t.add_row({"F32 ×7", "y"});
    EXPECT_EQ(t.render(),
              "a         b\n"
              "Q8_0 ×15  x\n"
              "F32 ×7    y\n");
}

TEST(TextTable, NoHeaderWhenHeadersAreEmptyAndNoTrailingBlanks) {
    TextTable t({{""}, {""}});
    t.add_row({"name", "tiny"});
    t.add_row({"architecture", ""});
    EXPECT_EQ(t.render(" "),
              " name          tiny\n"
              " architecture\n");
}

}  // namespace
}  // namespace strata
