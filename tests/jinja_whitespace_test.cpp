// Whitespace control exactly as jinja2 applies it with trim_blocks and lstrip_blocks ('-' and
// '+' modifiers, comments, raw blocks, CRLF, Unicode spaces, the dropped trailing newline), and
// syntax errors that name the line and column. Expected strings are what jinja2 renders.
#include <gtest/gtest.h>

#include "jinja_test_helpers.h"

namespace strata::test {
namespace {

const RenderCase kWhitespace[] = {
    {"a  {% if true %}  \n  b\n  {% endif %}\nc", "a    \n  b\nc"},
    {"  {{ 1 }}  {% if true %}x{% endif %}", "  1  x"},
    {"a {%+ if true %}b{% endif +%}\nc", "a b\nc"},
    {"a\n  {%- if true -%}\n  b\n  {%- endif %}\nc", "abc"},
    {"a  {# c #}\nb\n  {# c #}\nd", "a  b\nd"},
    {"x   {% raw %}\n  {{ y }} {% endraw %}\nz", "x   \n  {{ y }} z"},
    {"x\n   {% raw -%}\n  {{ y }}  \n   {%- endraw %}\nz", "x\n{{ y }}z"},
    {"{% raw %}\n  x\n  {% endraw %}\ny", "\n  x\ny"},
    {"  {% raw %}A{% endraw %}", "A"},
    {"a {{- 1 -}}   b {{+ 2 }} c", "a1b 2 c"},
    {"  {{- 1 }}", "1"},
    {"line1\n\t{% if true %}tab{% endif %}", "line1\ntab"},
    {"{% if true %}\nx{% endif -%}\n   \n   y", "xy"},
    {"{% if true +%}\nx{% endif %}", "\nx"},
    {"a {#- c -#}  b", "ab"},
    {"  {#+ c #}", "  "},
    {"a {% if true -%} {{ '  ' }} {%- endif %} b", "a    b"},
    {"{% for i in xs %}\n  {{ i }}\n{% endfor %}\n", "  1\n  2\n  3\n"},
    {"{% for i in xs %}\n  {{- i }}\n{% endfor %}", "1\n2\n3\n"},
    {"{%- for i in xs -%}\n  {{ i }}\n{%- endfor -%}\n", "123"},
    {"text\r\nwith {% if true %}\r\ncrlf{% endif %}\r\n", "text\nwith crlf"},
    {"trailing newline is dropped\n", "trailing newline is dropped"},
    {"two trailing newlines keep one\n\n", "two trailing newlines keep one\n"},
    {"{{ 'a' }}\n{{ 'b' }}\n", "a\nb"},
    {"{% if true %}  \n{% endif %}x", "  \nx"},
    {"  \t{% set x = 1 %}\n{{ x }}", "1"},
    {"a　{%- if true %}b{% endif %}", "ab"},
    {"{% if true %}　\n{% endif %}", "　\n"},
    {"  {#- c #}x", "x"},
    {"x {{ 1 }}\n  {%- if true %} y{% endif %}", "x 1 y"},
    {"{% macro m() %}\n  inner\n{% endmacro %}[{{ m() }}]", "[  inner\n]"},
    {"{% set x %}\n  captured\n{% endset %}[{{ x }}]", "[  captured\n]"},
    {"<{%- if true -%}\n\n  {{- 'x' -}}\n\n{%- endif -%}>", "<x>"},
    {"{{ {'a': {'b': 1}} }}|{{ {'a': 1}['a'] }}", "{'a': {'b': 1}}|1"},
};

const FailCase kSyntaxErrorsErrors[] = {
    {"{% if true %}",
     "unexpected end of template: expected 'elif', 'else' or 'endif' to close the 'if' at 1:1"},
    {"{{ 1 }", "unexpected '}'"},
    {"{% for %}", "expected a name"},
    {"{% if x %}{% endfor %}", "unknown tag 'endfor'"},
    {"{{ x |", "never closed"},
    {"hello\n{{ 'a' ~ }}", "2:10: expected an expression"},
    {"{{ (1 }}", "expected ')'"},
    {"{% break %}", "'break' outside a for loop"},
    {"{{ 'abc }}", "unterminated string literal"},
    {"{# no end", "missing end of comment tag"},
    {"{% raw %}never ends", "missing end of raw directive"},
    {"{% include 'x.jinja' %}", "unknown tag 'include'"},
    {"{{ a $ b }}", "unexpected character '$'"},
    {"{% set x = 1 %}{% endset %}", "unknown tag 'endset'"},
    {"{{ '\\N{BULLET}' }}", "1:5: \\N{...} escapes are not supported"},
    {"{{ d['a',] }}", "1:10: expected an expression, got ']'"},
};

TEST(JinjaWhitespace, MatchesJinja2TrimAndLstripBlocks) {
    expect_renders(kWhitespace);
}

TEST(JinjaSyntax, ErrorsNameLineAndColumn) {
    expect_fails(kSyntaxErrorsErrors);
}

}  // namespace
}  // namespace strata::test
