// Parses template source into a Program: the statement tree plus what error messages need to
// name places in the source. Syntax errors read "NAME:LINE:COL: message".
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"
#include "util/result.h"

namespace strata::jinja {

// Statements and expressions nest at most this deep; parsing and evaluation recurse over the
// nesting, so the bound keeps a hostile template from exhausting the stack.
inline constexpr int kMaxNesting = 100;

struct Program {
    std::string name;  // shown in error messages, e.g. the template's file name
    SourceMap source_map;
    Body body;

    // "NAME:LINE:COL"
    std::string location(uint32_t offset) const { return name + ":" + source_map.location(offset); }
};

Result<std::shared_ptr<const Program>> parse_program(std::string_view source, std::string name);

}  // namespace strata::jinja
