// Builtin filters, `is` tests and the methods of str, list and dict. Every expected string is
// what Python's jinja2 renders for the same template and context (see jinja_test_helpers.h).
#include <gtest/gtest.h>

#include "jinja_test_helpers.h"

namespace strata::test {
namespace {

const RenderCase kStringFilters[] = {
    {"{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ '\\u3000 y\\n'|trim }}|{{ 'AbC'|lower }}|{{ "
     "'AbC'|upper }}|{{ 'ßa'|upper }}|{{ u8|upper }}|{{ u8|lower }}",
     "x|hi|y|abc|ABC|SSA|ПРИВЕТ 👋 — 你好|привет 👋 — 你好"},
    {"{{ 'hELLO wORLD'|capitalize }}|{{ s|title }}|{{ 'hello-world foo_bar o\\'neil (x) [y]'|title "
     "}}|{{ 'ÉCOLE école'|title }}",
     "Hello world|Hello|Hello-World Foo_bar O'neil (X) [Y]|École École"},
    {"{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') "
     "}}|{{ 'abc'|replace('', '-', 2) }}|{{ u8|replace('👋', ':wave:') }}",
     "bbb|bba|-a-b-c-|-a-bc|Привет :wave: — 你好"},
    {"{{ 'hello'|center(4) }}|{{ 'ab'|center(5) }}|{{ 'ab'|center(6) }}|{{ 'a'|center(4) }}|{{ "
     "'é'|center(3) }}",
     "hello|  ab |  ab  | a  | é "},
    {"{{ 'foo bar baz'|truncate(5) }}|{{ 'foo bar baz qux quux'|truncate(10, false, '!') }}|{{ "
     "'foo bar baz qux quux'|truncate(10, leeway=0) }}|{{ 'foobarbazquxquux'|truncate(10, "
     "leeway=0) }}|{{ 'hello'|truncate(3) }}|{{ 'hello world foo'|truncate(9, true) }}",
     "fo...|foo bar!|foo...|foobarb...|hello|hello ..."},
    {"{{ 'ab\\ncd\\n\\nef'|indent }}|{{ 'ab\\ncd\\n\\nef'|indent(2, true, true) }}|{{ "
     "'ab\\ncd'|indent('> ') }}|{{ 'a\\n\\nb\\r\\nc'|indent(2) }}|{{ ''|indent(first=true) }}|{{ "
     "'a\\n'|indent(2, true, true) }}",
     "ab\n    cd\n\n    ef|  ab\n  cd\n  \n  ef|ab\n> cd|a\n\n  b\n  c|    |  a\n  "},
    {"{{ 'Hello World, foo-bar baz_qux 42 é'|wordcount }}|{{ u8|wordcount }}|{{ ''|wordcount }}",
     "7|2|0"},
    {"{{ 'a<b>&\"\\''|escape }}|{{ '<x>'|e }}|{{ '<x>'|safe }}|{{ 5|string ~ 'x' }}|{{ [1, "
     "'a']|string }}|{{ none|string }}",
     "a&lt;b&gt;&amp;&#34;&#39;|&lt;x&gt;|<x>|5x|[1, 'a']|None"},
    {"{{ 'ab'|reverse }}|{{ u8|reverse }}|{{ s|length }}|{{ u8|length }}|{{ s|count }}",
     "ba|好你 — 👋 тевирП|5|13|5"},
    {"{{ '%s-%d' % ('a', 3) }}|{{ '%05.2f|%x|%r|%%|%-4s|' % (3.14159, 255, 'q', 'ab') }}|{{ "
     "'%(a)s' % {'a': 1} }}|{{ '%s' % [1] }}|{{ '%c' % 65 }}|{{ '%e' % 12345.678 }}|{{ '%+d' % 5 "
     "}}|{{ '%.3s' % 'abcdef' }}|{{ '%5.1f' % -2.25 }}",
     "a-3|03.14|ff|'q'|%|ab  ||1|[1]|A|1.234568e+04|+5|abc| -2.2"},
    {"{{ '%s and %s'|format('a', 'b') }}|{{ '%(x)s'|format(x=1) }}|{{ '%s'|format([1, 2]) }}",
     "a and b|1|[1, 2]"},
};

const RenderCase kNumberFilters[] = {
    {"{{ '3.7'|int }}|{{ 'abc'|int }}|{{ '0x1A'|int(0, 16) }}|{{ 3.9|int }}|{{ -3.9|int }}|{{ ' 12 "
     "'|int }}|{{ '1_000'|int }}|{{ '0x10'|int }}|{{ '0x10'|int(base=0) }}|{{ '1e3'|int }}|{{ "
     "true|int }}|{{ none|int }}|{{ [1]|int(7) }}|{{ '12abc'|int }}|{{ 'nan'|int }}",
     "3|0|26|3|-3|12|1000|0|16|1000|1|0|7|0|0"},
    {"{{ '5'|float }}|{{ 'x'|float }}|{{ '1e3'|float }}|{{ ' 2.5 '|float }}|{{ 3|float }}|{{ "
     "'x'|float(1.5) }}",
     "5.0|0.0|1000.0|2.5|3.0|1.5"},
    {"{{ -3|abs }}|{{ -3.5|abs }}|{{ true|abs }}", "3|3.5|1"},
    {"{{ 2.5|round }}|{{ 3|round }}|{{ 3.5|round }}|{{ -2.5|round }}|{{ 1.25|round(1) }}|{{ "
     "1.5|round }}|{{ 0.125|round(2) }}|{{ 2.675|round(2) }}|{{ 1234|round(-2) }}|{{ "
     "1250.0|round(-2) }}|{{ 1.1|round(1, 'ceil') }}|{{ 2.5|round(0, 'floor') }}|{{ "
     "3|round(method='floor') }}|{{ -0.5|round }}",
     "2.0|3|4.0|-2.0|1.2|2.0|0.12|2.67|1200|1200.0|1.1|2.0|3.0|-0.0"},
};
const FailCase kNumberFiltersErrors[] = {
    {"{{ 'a'|round }}", "doesn't define __round__ method"},
    {"{{ 1|length }}", "object of type 'int' has no len()"},
    {"{{ none|length }}", "object of type 'NoneType' has no len()"},
};

const RenderCase kSequenceFilters[] = {
    {"{{ xs|first }}|{{ xs|last }}|{{ s|first }}|{{ s|last }}|{{ []|first }}|{{ d|first }}|{{ "
     "d|last }}",
     "1|3|h|o||a|b"},
    {"{{ xs|join }}|{{ xs|join(', ') }}|{{ [1, none, missing]|join(',') }}|{{ [{'a': 'x'}, {'a': "
     "'y'}]|join(',', attribute='a') }}",
     "123|1, 2, 3|1,None,|x,y"},
    {"{{ 'abc'|list }}|{{ d|list }}|{{ xs|reverse|list }}|{{ xs|batch(2)|list }}|{{ xs|batch(2, "
     "'x')|list }}",
     "['a', 'b', 'c']|['a', 'b']|[3, 2, 1]|[[1, 2], [3]]|[[1, 2], [3, 'x']]"},
    {"{{ xs|sum }}|{{ [1.5, 2]|sum }}|{{ [{'a': 1}, {'a': 2}]|sum(attribute='a') }}|{{ "
     "[1]|sum(start=10) }}|{{ [[1], [2]]|sum(start=[]) }}",
     "6|3.5|3|11|[1, 2]"},
    {"{{ xs|max }}|{{ [2, 1]|min }}|{{ ['B', 'a']|min }}|{{ ['B', 'a']|min(case_sensitive=true) "
     "}}|{{ []|max }}|{{ [{'a': 2}, {'a': 5}]|max(attribute='a') }}",
     "3|1|a|B||{'a': 5}"},
    {"{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ ['b', 'A', 'c']|sort }}|{{ ['b', "
     "'A']|sort(case_sensitive=true) }}|{{ [{'n': 'b'}, {'n': 'A'}]|sort(attribute='n') }}|{{ "
     "[{'a': 2, 'b': 1}, {'a': 1, 'b': 2}, {'a': 1, 'b': 1}]|sort(attribute='a,b') }}",
     "[1, 2, 3]|[3, 2, 1]|['A', 'b', 'c']|['A', 'b']|[{'n': 'A'}, {'n': 'b'}]|[{'a': 1, 'b': 1}, "
     "{'a': 1, 'b': 2}, {'a': 2, 'b': 1}]"},
    {"{{ [1, 2, 2, 'a', 'A']|unique|list }}|{{ ['a', 'A']|unique(case_sensitive=true)|list }}|{{ "
     "[{'a': 1}, {'a': 1}]|unique(attribute='a')|list }}|{{ [1, 1.0, true]|unique|list }}",
     "[1, 2, 'a']|['a', 'A']|[{'a': 1}]|[1]"},
    {"{{ xs|map('string')|join('-') }}|{{ ['a', 'B']|map('upper')|list }}|{{ ['x']|map('replace', "
     "'x', 'y')|list }}|{{ [{'a': {'b': 2}}, {'a': {'b': 1}}]|map(attribute='a.b')|list }}|{{ [[1, "
     "2], [3, 4]]|map(attribute='0')|list }}|{{ [{'a': 1}, {}]|map(attribute='a', default=9)|list "
     "}}",
     "1-2-3|['A', 'B']|['y']|[2, 1]|[1, 3]|[1, 9]"},
    {"{{ xs|select('odd')|list }}|{{ xs|reject('gt', 1)|list }}|{{ [1, 2, 3, "
     "4]|select('divisibleby', 2)|list }}|{{ [0, 1, none, '']|select|list }}|{{ [0, 1, none, "
     "'']|reject|list }}",
     "[1, 3]|[1]|[2, 4]|[1]|[0, None, '']"},
    {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|{{ [{'r': "
     "1}, {}]|selectattr('r')|list }}|{{ [{'r': 1}, {}]|rejectattr('r', 'defined')|list }}|{{ "
     "messages|rejectattr('tool_calls')|map(attribute='role')|join(',') }}",
     "['hi']|[{'r': 1}]|[{}]|system,user"},
    {"{{ d|dictsort }}|{{ {'b': 1, 'A': 2}|dictsort }}|{{ {'b': 1, 'A': 2}|dictsort(true) }}|{{ "
     "{'b': 1, 'a': 2}|dictsort(by='value') }}|{{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}",
     "[('a', 1), ('b', 2)]|[('A', 2), ('b', 1)]|[('A', 2), ('b', 1)]|[('b', 1), ('a', 2)]|[('b', "
     "1), ('a', 2)]"},
    {"{{ d|items|list }}|{{ missing|items|list }}|{% for k, v in d|items %}{{ k }}{{ v }}{% endfor "
     "%}",
     "[('a', 1), ('b', 2)]|[]|a1b2"},
    {"{{ 'x'|default('y') }}|{{ missing|default('y') }}|{{ ''|default('y') }}|{{ ''|default('y', "
     "true) }}|{{ none|d('z', true) }}|{{ none|default('z') }}|{{ missing|default }}",
     "x|y||y|z|None|"},
    {"{{ 'x'|attr('upper') is callable }}|{{ d|attr('a') }}|{{ d|attr('items') is callable }}",
     "True||True"},
};
const FailCase kSequenceFiltersErrors[] = {
    {"{{ [1, 'a']|sort }}", "'<' not supported between instances of 'str' and 'int'"},
    {"{{ ['a', 'b']|sum }}", "unsupported operand type(s) for +: 'int' and 'str'"},
    {"{{ 1|first }}", "'int' object is not iterable"},
    {"{{ {'a': 1}|dictsort(by='x') }}", "You can only sort by either 'key' or 'value'"},
    {"{{ 1 | nosuchfilter }}", "no filter named 'nosuchfilter'"},
};

const RenderCase kTojson[] = {
    {"{{ [1, 2]|tojson }}|{{ {'a': 1.0, 'b': [1e100, 1.5e-7, none, true, "
     "\"x\\u00e9\\\"\\n\\t\\u0001</\"]}|tojson }}",
     "[1, 2]|{\"a\": 1.0, \"b\": [1e+100, 1.5e-07, null, true, \"xé\\\"\\n\\t\\u0001</\"]}"},
    {"{{ {'b': 1, 'a': [1, {'c': 2}]}|tojson(indent=2, sort_keys=true) }}|{{ {'a': "
     "1}|tojson(separators=(',', ':')) }}|{{ {'a': [1, 2]}|tojson(indent=2, separators=(', ', ' = "
     "')) }}",
     "{\n  \"a\": [\n    1,\n    {\n      \"c\": 2\n    }\n  ],\n  \"b\": 1\n}|{\"a\":1}|{\n  "
     "\"a\" = [\n    1, \n    2\n  ]\n}"},
    {"{{ []|tojson(indent=2) }}{{ {}|tojson(indent=2) }}{{ [[]]|tojson(indent=2) }}{{ "
     "nested|tojson(indent='\\t') }}",
     "[]{}[\n  []\n]{\n\t\"k\": [\n\t\t{\n\t\t\t\"a\": \"x\"\n\t\t},\n\t\t{\n\t\t\t\"a\": "
     "\"y\",\n\t\t\t\"b\": [\n\t\t\t\t1,\n\t\t\t\t{\n\t\t\t\t\t\"c\": "
     "null\n\t\t\t\t}\n\t\t\t]\n\t\t}\n\t]\n}"},
    {"{{ u8|tojson }}|{{ u8|tojson(ensure_ascii=true) }}|{{ '\\u2028\\x7f'|tojson }}|{{ {1: 'int "
     "key', none: 'n', true: 'b', 1.5: 'f'}|tojson }}",
     "\"Привет 👋 — 你好\"|\"\\u041f\\u0440\\u0438\\u0432\\u0435\\u0442 \\ud83d\\udc4b \\u2014 "
     "\\u4f60\\u597d\"|\" \177\"|{\"1\": \"b\", \"null\": \"n\", \"1.5\": \"f\"}"},
    {"{{ messages[2].tool_calls|tojson }}|{{ 'plain'|tojson }}|{{ 3|tojson }}|{{ none|tojson }}",
     "[{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]|\"plain\"|3|null"},
};
const FailCase kTojsonErrors[] = {
    {"{{ namespace()|tojson }}", "is not JSON serializable"},
};

const RenderCase kIsTests[] = {
    {"{{ 'x' is string }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is "
     "integer }}{{ 1.0 is float }}{{ 1 is float }}{{ none is none }}{{ d is mapping }}{{ xs is "
     "mapping }}",
     "TrueTrueTrueFalseFalseTrueFalseTrueTrueFalse"},
    {"{{ s is sequence }}{{ d is sequence }}{{ xs is sequence }}{{ 1 is sequence }}{{ xs is "
     "iterable }}{{ s is iterable }}{{ 1 is iterable }}{{ range is callable }}{{ s.upper is "
     "callable }}{{ s is callable }}",
     "TrueTrueTrueFalseTrueTrueFalseTrueTrueFalse"},
    {"{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ true is boolean }}{{ "
     "1 is boolean }}{{ missing is defined }}{{ missing is undefined }}{{ none is defined }}",
     "TrueFalseTrueFalseTrueFalseFalseTrueTrue"},
    {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is in "
     "'abc' }}{{ 2 is in xs }}{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 1 }}{{ 1 is lt 2 }}{{ "
     "1 is lessthan 2 }}{{ 2 is le 2 }}{{ 1 is gt 2 }}{{ 3 is greaterthan 2 }}{{ 1 is ge 2 }}",
     "TrueTrueTrueFalseTrueTrueTrueFalseFalseTrueTrueTrueFalseTrueFalse"},
    {"{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ 'Abc' is lower }}{{ '12' is lower }}{{ 'upper' is "
     "filter }}{{ 'odd' is test }}{{ 'nope' is filter }}{{ none is sameas none }}{{ xs is sameas "
     "xs }}{{ [1] is sameas [1] }}",
     "TrueTrueFalseFalseTrueTrueFalseTrueTrueFalse"},
    {"{{ xs is not none }}{{ missing is not defined }}{{ 5 is not divisibleby 2 }}{{ (5 is odd) "
     "and (4 is even) }}",
     "TrueTrueTrueTrue"},
};
const FailCase kIsTestsErrors[] = {
    {"{{ 1 is startingwith 1 }}", "no test named 'startingwith'"},
    {"{{ 'a' is odd }}", "needs a number"},
};

const RenderCase kMethods[] = {
    {"{{ s.upper() }}|{{ 'A'.lower() }}|{{ 'hello world'.title() }}|{{ \"o'neil mc-x\".title() "
     "}}|{{ 'hELLO'.capitalize() }}",
     "HELLO|a|Hello World|O'Neil Mc-X|Hello"},
    {"{{ 'a,b,,c'.split(',') }}|{{ '  a b  '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b "
     "c'.rsplit(' ', 1) }}|{{ '  a  b c  '.split(None, 1) }}|{{ '  a  b c  '.rsplit(None, 1) }}|{{ "
     "''.split() }}|{{ ''.split(',') }}|{{ 'a\\u3000b'.split() }}",
     "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|['a', 'b c  ']|['  a  b', "
     "'c']|[]|['']|['a', 'b']"},
    {"{{ s.startswith('he') }}|{{ s.startswith(('x', 'h')) }}|{{ s.endswith('lo') }}|{{ "
     "s.startswith('l', 2) }}|{{ s.endswith('l', 0, 4) }}",
     "True|True|True|True|True"},
    {"{{ s.find('l') }}|{{ s.rfind('l') }}|{{ s.find('z') }}|{{ s.find('l', 3) }}|{{ u8.find('👋') "
     "}}|{{ s.count('l') }}|{{ s.count('') }}|{{ s.index('e') }}",
     "2|3|-1|3|7|2|6|1"},
    {"{{ s.replace('l', 'L') }}|{{ s.replace('l', 'L', 1) }}|{{ s.strip('ho') }}|{{ '  x "
     "'.lstrip() }}|{{ '  x '.rstrip() }}|{{ 'xyx'.strip('x') }}|{{ "
     "'\\n\\n</think>\\n'.lstrip('\\n') }}",
     "heLLo|heLlo|ell|x |  x|y|</think>\n"},
    {"{{ ', '.join(['a', 'b']) }}|{{ ''.join(s|list) }}|{{ '{} and {}'.format(1, 'a') }}|{{ "
     "'{0}{0}'.format('x') }}|{{ '{name}!'.format(name='n') }}|{{ 'a{{b}}'.format() }}",
     "a, b|hello|1 and a|xx|n!|a{b}"},
    {"{{ 'abc'.removeprefix('ab') }}|{{ 'abc'.removesuffix('bc') }}|{{ 'a\\nb\\r\\nc'.splitlines() "
     "}}|{{ '123'.isdigit() }}|{{ 'ab'.isalpha() }}|{{ ' '.isspace() }}|{{ 'AB'.isupper() }}|{{ "
     "'ab'.islower() }}",
     "c|a|['a', 'b', 'c']|True|True|True|True|True"},
    {"{{ d.items()|list }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.get('a') }}|{{ "
     "d.get('zz', 'dflt') }}|{{ xs.index(2) }}|{{ xs.count(1) }}",
     "[('a', 1), ('b', 2)]|['a', 'b']|[1, 2]|1|dflt|1|1"},
    {"{% set content = '<think>\\nreason\\n</think>\\n\\nanswer' %}{{ "
     "content.split('</think>')[-1].lstrip('\\n') }}|{{ "
     "content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
     "answer|reason"},
};
const FailCase kMethodsErrors[] = {
    {"{{ ', '.join([1, 2]) }}", "sequence item 0: expected str instance, int found"},
    {"{{ 'ab'.index('z') }}", "substring not found"},
    {"{{ 'a'.split('') }}", "empty separator"},
    {"{{ s.upper(1) }}", "takes at most 0 arguments"},
};

const RenderCase kFormatting[] = {
    {"{{ '%5.1f|%-8.3e|%+g|% f|%010.2f|%G|%E|%.0f|%.0e|%g|%g|%g|%.3g|%F' % (-2.25, 12345.678, "
     "0.0001, 1.5, -3.14159, 1e20, 1.5, 2.5, 15000.0, 100000.0, 1000000.0, 1e-5, 3.14159, 1.5) }}",
     " -2.2|1.235e+04|+0.0001| "
     "1.500000|-000003.14|1E+20|1.500000E+00|2|2e+04|100000|1e+06|1e-05|3.14|1.500000"},
    {"{{ '%d|%5d|%-5d|%05d|%+d|%x|%X|%o|%#x|%#o|%i|%u' % (42, 42, 42, -42, 42, 255, 255, 8, 255, "
     "8, 3.9, 7) }}",
     "42|   42|42   |-0042|+42|ff|FF|10|0xff|0o10|3|7"},
    {"{{ '%c%c|%s|%r' % (65, 'é', none, 'x') }}", "Aé|None|'x'"},
    {"{{ 1e400 }}|{{ '1e400'|float }}|{{ '-1e400'|float }}|{{ '1e-400'|float }}|{{ '+.5'|float "
     "}}|{{ '5.'|float }}|{{ '.5e1'|float }}",
     "inf|inf|-inf|0.0|0.5|5.0|5.0"},
};
const FailCase kFormattingErrors[] = {
    {"{{ '%s %s' % ('a',) }}", "not enough arguments for format string"},
    {"{{ '%s' % ('a', 'b') }}", "not all arguments converted during string formatting"},
    {"{{ '%d' % 'a' }}", "%d format: a real number is required, not str"},
};

TEST(JinjaFilters, StringFilters) {
    expect_renders(kStringFilters);
}

TEST(JinjaFilters, PrintfStyleFormattingAndFloatParsing) {
    expect_renders(kFormatting);
    expect_fails(kFormattingErrors);
}

TEST(JinjaFilters, NumberFilters) {
    expect_renders(kNumberFilters);
    expect_fails(kNumberFiltersErrors);
}

TEST(JinjaFilters, SequenceFilters) {
    expect_renders(kSequenceFilters);
    expect_fails(kSequenceFiltersErrors);
}

TEST(JinjaFilters, ToJsonFormatsAsPythonJsonDumps) {
    expect_renders(kTojson);
    expect_fails(kTojsonErrors);
}

TEST(JinjaFilters, IsTests) {
    expect_renders(kIsTests);
    expect_fails(kIsTestsErrors);
}

TEST(JinjaFilters, StringListAndDictMethods) {
    expect_renders(kMethods);
    expect_fails(kMethodsErrors);
}

}  // namespace
}  // namespace strata::test
