#include "util/table.h"

#include <algorithm>
#include <cassert>

namespace strata {

size_t display_width(std::string_view utf8) {
    size_t n = 0;
    for (char c : utf8) {
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
    }
    return n;
}

TextTable::TextTable(std::vector<TableColumn> columns) : columns_(std::move(columns)) {
    assert(!columns_.empty());
}

void TextTable::add_row(std::vector<std::string> cells) {
    assert(cells.size() <= columns_.size());
    cells.resize(columns_.size());
    rows_.push_back(std::move(cells));
}

void TextTable::add_rule() {
    rows_.emplace_back();
}

std::string TextTable::render(std::string_view indent) const {
    const size_t n_cols = columns_.size();
    const bool has_header = std::any_of(columns_.begin(), columns_.end(),
                                        [](const TableColumn& c) { return !c.header.empty(); });
    std::vector<size_t> width(n_cols, 0);
    for (size_t c = 0; c < n_cols; ++c) {
        if (has_header) width[c] = display_width(columns_[c].header);
        for (const auto& row : rows_) {
            if (!row.empty()) width[c] = std::max(width[c], display_width(row[c]));
        }
    }

    std::string out;
    auto emit = [&](const std::vector<std::string>& cells) {
        std::string line(indent);
        for (size_t c = 0; c < n_cols; ++c) {
            const std::string& cell = cells[c];
            const size_t pad = width[c] - display_width(cell);
            if (c) line += "  ";
            if (columns_[c].align == Align::Right) {
                line.append(pad, ' ');
                line += cell;
            } else {
                line += cell;
                if (c + 1 < n_cols) line.append(pad, ' ');
            }
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line;
        out += '\n';
    };
    auto emit_rule = [&] {
        std::vector<std::string> dashes(n_cols);
        for (size_t c = 0; c < n_cols; ++c) dashes[c].assign(width[c], '-');
        emit(dashes);
    };

    if (has_header) {
        std::vector<std::string> header(n_cols);
        for (size_t c = 0; c < n_cols; ++c) header[c] = columns_[c].header;
        emit(header);
    }
    for (const auto& row : rows_) {
        if (row.empty())
            emit_rule();
        else
            emit(row);
    }
    return out;
}

}  // namespace strata
