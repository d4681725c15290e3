// Aligned plain-text tables for terminal output. Columns are as wide as their widest cell
// (counted in characters, not bytes, so "×" and "—" line up), separated by two spaces; the last
// column is not padded, so lines carry no trailing blanks.
//
//   TextTable t({{"type"}, {"tensors", Align::Right}, {"bytes", Align::Right}});
//   t.add_row({"Q4_K", "13", "1.21 MiB"});
//   std::fputs(t.render("  ").c_str(), stdout);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

enum class Align { Left, Right };

struct TableColumn {
    std::string header;  // all headers empty: no header line
    Align align = Align::Left;
};

class TextTable {
  public:
    explicit TextTable(std::vector<TableColumn> columns);

    // Rows may have fewer cells than columns (the rest are blank); extra cells are a programmer
    // mistake.
    void add_row(std::vector<std::string> cells);
    // A line of dashes under every column, e.g. before a total row.
    void add_rule();
    size_t rows() const { return rows_.size(); }

    // Every line starts with `indent` and ends with '\n'.
    std::string render(std::string_view indent = "") const;

  private:
    std::vector<TableColumn> columns_;
    std::vector<std::vector<std::string>> rows_;  // an empty row is a rule
};

// Characters in a UTF-8 string (code points that do not continue a sequence).
size_t display_width(std::string_view utf8);

}  // namespace strata
