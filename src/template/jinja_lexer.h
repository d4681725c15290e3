// Splits a template into text and tag tokens, applying Jinja2's whitespace control exactly as
// Hugging Face configures it (trim_blocks and lstrip_blocks on):
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` all after it;
//   - trim_blocks: the first newline after `%}` or `#}` is removed (`+%}` keeps it);
//   - lstrip_blocks: spaces and tabs between the start of a line and `{%` or `{#` are removed
//     (`{%+` keeps them); never before `{{`;
//   - `{% raw %}...{% endraw %}` is passed through as text;
//   - newlines are normalised to "\n" and one trailing newline of the template is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace strata::jinja {

enum class TokenType : uint8_t {
    Text,
    VariableBegin,  // {{
    VariableEnd,    // }}
    BlockBegin,     // {%
    BlockEnd,       // %}
    Name,
    String,
    Integer,
    Float,
    Operator,
    Eof,
};

struct Token {
    TokenType type = TokenType::Eof;
    std::string text;  // text, name, decoded string literal, or operator spelling
    int64_t int_value = 0;
    double float_value = 0.0;
    uint32_t offset = 0;  // byte offset in the normalised source
};

// Maps byte offsets of the normalised source to 1-based line and column (in code points).
class SourceMap {
  public:
    SourceMap() = default;
    explicit SourceMap(std::string_view source);
    std::string location(uint32_t offset) const;  // "12:5"

  private:
    std::string source_;
    std::vector<uint32_t> line_starts_;
};

// Newlines to "\n", one trailing newline removed (Jinja2's keep_trailing_newline=False).
std::string normalize_template_source(std::string_view source);

// Tokenises normalised source. Errors read "LINE:COL: message".
Result<std::vector<Token>> tokenize(std::string_view source, const SourceMap& map);

}  // namespace strata::jinja
