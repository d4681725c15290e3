// The template language, feature by feature: values and how they print, operators, undefined
// values, subscripts, statements and scoping. Every expected string is what Python's jinja2
// renders for the same template and context (see jinja_test_helpers.h).
#include <gtest/gtest.h>

#include "jinja_test_helpers.h"

namespace strata::test {
namespace {

const RenderCase kPrinting[] = {
    {"{{ 1 }}|{{ -7 }}|{{ 1.0 }}|{{ 100.0 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 1.5e-7 }}|{{ 0.0001 }}|{{ "
     "0.00001 }}|{{ -0.0 }}|{{ 0.1 + 0.2 }}|{{ 123456789012345678.0 }}",
     "1|-7|1.0|100.0|1e+16|1000000000000000.0|1.5e-07|0.0001|1e-05|-0.0|0.30000000000000004|1."
     "2345678901234568e+17"},
    {"{{ none }}|{{ n }}|{{ true }}|{{ False }}|{{ undefined_name }}|{{ e }}",
     "None|None|True|False||"},
    {"{{ [1, 'a', none, True, 1.0, {'k': \"it's\"}, ('t',), (1, 2), ()] }}",
     "[1, 'a', None, True, 1.0, {'k': \"it's\"}, ('t',), (1, 2), ()]"},
    {"{{ \"a\\nb\\\\c'\\\"\" }}|{{ [\"a\\nb\\\\c'\\\"\", 'x\\x01\\u00e9\\u2028', '\\t'] }}",
     "a\nb\\c'\"|['a\\nb\\\\c\\'\"', 'x\\x01é\\u2028', '\\t']"},
    {"{{ d }}|{{ {'a': [1, 'b'], 2: none} }}|{{ nested }}",
     "{'a': 1, 'b': 2}|{'a': [1, 'b'], 2: None}|{'k': [{'a': 'x'}, {'a': 'y', 'b': [1, {'c': "
     "None}]}]}"},
    {"{{ 1, 2 }}|{{ (1,) }}", "(1, 2)|(1,)"},
    {"{{ u8 }}|{{ [u8] }}", "Привет 👋 — 你好|['Привет 👋 — 你好']"},
    {"{{ \"a\" 'b' \"c\" }}", "abc"},
    {"{{ 1e300 * 1e10 }}|{{ -1e300 * 1e10 }}", "inf|-inf"},
};

const RenderCase kArithmetic[] = {
    {"{{ 1 + 2 }}|{{ 1 + 2.5 }}|{{ True + 1 }}|{{ 7 - 10 }}|{{ 3 * 4 }}|{{ 2 * 1.5 }}",
     "3|3.5|2|-3|12|3.0"},
    {"{{ 7 / 2 }}|{{ 6 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 // -2 }}|{{ 7.5 // 2 }}|{{ -7.5 // 2 "
     "}}",
     "3.5|3.0|3|-4|-4|3.0|-4.0"},
    {"{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 7.5 % 2 }}|{{ -7.5 % 2 }}", "1|2|-2|1.5|0.5"},
    {"{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2.0 ** 3 }}|{{ -2 ** 2 }}|{{ 2 ** 3 ** 2 }}",
     "1024|0.5|8.0|4|64"},
    {"{{ 'ab' + 'cd' }}|{{ [1] + [2, 3] }}|{{ 'ab' * 3 }}|{{ 2 * 'xy' }}|{{ [0] * 3 }}|{{ 'a' * 0 "
     "}}|{{ 'a' * -2 }}",
     "abcd|[1, 2, 3]|ababab|xyxy|[0, 0, 0]||"},
    {"{{ 'a' ~ 1 ~ none ~ undefined_name ~ True ~ 1.0 ~ [1] }}", "a1NoneTrue1.0[1]"},
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 ~ 4 }}|{{ (1 + 1) ~ (1 + 1) }}",
     "7|9|5|64|22"},
    {"{{ -xs[0] }}|{{ +3 }}|{{ - -3 }}|{{ -f }}", "-1|3|3|-1.5"},
};
const FailCase kArithmeticErrors[] = {
    {"{{ 1 + 1 ~ 1 }}", "unsupported operand type(s) for +: 'int' and 'str'"},
};

const RenderCase kComparisonAndLogic[] = {
    {"{{ 1 == 1.0 }}|{{ True == 1 }}|{{ 'a' == 1 }}|{{ none == none }}|{{ undefined_name == "
     "undefined_name }}|{{ undefined_name == none }}|{{ [1, 2] == [1, 2] }}|{{ (1, 2) == [1, 2] "
     "}}|{{ d == {'b': 2, 'a': 1} }}",
     "True|True|False|True|True|False|True|False|True"},
    {"{{ 1 != 2 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 1 <= 1 }}|{{ 2 >= 3 }}|{{ [1, 2] < [1, 3] "
     "}}|{{ 'a' < 'b' }}|{{ 'B' < 'a' }}",
     "True|True|False|True|False|True|True|True"},
    {"{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ none or none }}|{{ [] or {} }}|{{ not 0 "
     "}}|{{ not 'a' }}|{{ not not xs }}",
     "x|y||None|{}|True|False|True"},
    {"{{ 'a' in 'abc' }}|{{ 'z' not in 'abc' }}|{{ 1 in xs }}|{{ 'a' in d }}|{{ 'zz' in d }}|{{ "
     "none in xs }}|{{ 'x' in undefined_name }}|{{ 1.0 in xs }}",
     "True|True|True|True|False|False|False|True"},
    {"{{ 'yes' if xs else 'no' }}|{{ 'yes' if empty else 'no' }}|{{ 'x' if false }}|{{ 1 if 0 else "
     "2 if 0 else 3 }}",
     "yes|no||3"},
    {"{{ not 1 == 2 }}|{{ not xs is defined }}|{{ 1 + 1 == 2 and 'ok' }}", "True|False|ok"},
};

const RenderCase kUndefined[] = {
    {"{{ missing }}|{{ missing is defined }}|{{ missing is undefined }}|{{ d.zz }}|{{ d.zz is "
     "defined }}|{{ xs[10] }}|{{ s[100] }}|{{ none.x }}|{{ none['x'] }}|{{ xs.x }}|{{ 'abc'.x }}",
     "|False|True||False||||||"},
    {"{{ missing|length }}|{{ missing|trim }}|{{ missing|upper }}|{{ missing|list }}|{{ "
     "missing|join(',') }}|{{ missing|first }}|{{ missing is iterable }}|{{ missing ~ 'x' }}|{% "
     "for i in missing %}x{% endfor %}",
     "0|||[]|||True|x|"},
    {"{{ missing|default('dflt') }}|{{ d.zz|default('dflt') }}|{{ missing|d }}|{{ missing or 'alt' "
     "}}|{{ 'no' if missing else 'yes' }}",
     "dflt|dflt||alt|yes"},
};
const FailCase kUndefinedErrors[] = {
    {"{{ missing.attr }}", "'missing' is undefined"},
    {"{{ d.zz.y }}", "'dict object' has no attribute 'zz'"},
    {"{{ xs.x.y }}", "'list object' has no attribute 'x'"},
    {"{{ missing + 1 }}", "'missing' is undefined"},
    {"{{ missing() }}", "'missing' is undefined"},
    {"{{ missing['a'] }}", "'missing' is undefined"},
    {"{{ missing < 1 }}", "'missing' is undefined"},
    {"{{ missing|tojson }}", "Undefined is not JSON serializable"},
    {"{{ missing|int }}", "'missing' is undefined"},
};

const RenderCase kSubscriptsAndSlices[] = {
    {"{{ xs[0] }}|{{ xs[-1] }}|{{ d['a'] }}|{{ d.a }}|{{ messages[1].role }}|{{ "
     "messages[2]['tool_calls'][0].function.name }}|{{ s[1] }}|{{ s[-1] }}|{{ u8[7] }}|{{ xs.0 }}",
     "1|3|1|1|user|f|e|o|👋|1"},
    {"{{ xs[::-1] }}|{{ s[1:-1] }}|{{ s[::2] }}|{{ xs[5:] }}|{{ s[-100:2] }}|{{ xs[1:] + xs[:1] "
     "}}|{{ xs[-2:] }}|{{ s[::-2] }}|{{ xs[:-5] }}|{{ (1, 2, 3)[1:] }}",
     "[3, 2, 1]|ell|hlo|[]|he|[2, 3, 1]|[2, 3]|olh|[]|(2, 3)"},
    {"{{ u8[::-1] }}|{{ u8[2:5] }}|{{ u8|length }}", "好你 — 👋 тевирП|иве|13"},
    {"{{ {'a': 1}['a'] }}|{{ {1: 'x'}[1] }}|{{ {1: 'x'}[1.0] }}|{{ {1: 'x'}[true] }}", "1|x|x|x"},
    {"{{ d['items'] is callable }}|{{ d.items is callable }}|{{ d.get('a') }}|{{ d.get('z') }}|{{ "
     "d.get('z', 5) }}",
     "True|True|1|None|5"},
};
const FailCase kSubscriptsAndSlicesErrors[] = {
    {"{{ xs[::0] }}", "slice step cannot be zero"},
};

const RenderCase kStatements[] = {
    {"{% if xs %}a{% elif s %}b{% else %}c{% endif %}{% if empty %}a{% elif s %}b{% else %}c{% "
     "endif %}{% if empty %}a{% elif e %}b{% else %}c{% endif %}",
     "abc"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}|{% for k, v in d.items() %}{{ k "
     "}}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'ab' %}{{ c }}.{% "
     "endfor %}",
     "1234|a=1;b=2;|ab|a.b."},
    {"{% for x in empty %}x{% else %}empty{% endfor %}|{% for x in xs if x > 5 %}x{% else %}none "
     "passed{% endfor %}",
     "empty|none passed"},
    {"{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}/{{ loop.length }} {{ loop.index0 }} "
     "{{ loop.first }} {{ loop.last }} {{ loop.previtem }} {{ loop.nextitem }} {{ loop.revindex }} "
     "{{ loop.revindex0 }};{% endfor %}",
     "1/2 0 True False  4 2 1;2/2 1 False True 2  1 0;"},
    {"{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 4 "
     "%}{% break %}{% endif %}{% endfor %}",
     "134"},
    {"{% for x in 'ab' %}{% for y in 'cd' %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ "
     "loop.index }}{% endfor %}",
     "1ac 2ad 11bc 2bd 2"},
    {"{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}|{% for x in xs %}{{ loop.depth }}{% "
     "endfor %}",
     "aba|111"},
    {"{% set ns = namespace(a=1) %}{% set ns.b = 2 %}{{ ns.a }}{{ ns.b }}|{{ ns }}|{{ ns.c }}|{{ "
     "ns['a'] }}",
     "12|<Namespace {'a': 1, 'b': 2}>||1"},
    {"{% set ns = namespace(count=0) %}{% for x in xs %}{% set ns.count = ns.count + x %}{% endfor "
     "%}{{ ns.count }}",
     "6"},
    {"{% set ns = namespace() %}{% set ns.x %}abc{% endset %}{{ ns.x }}", "abc"},
    {"{% set x %}hello {{ 1 }}{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}",
     "[hello 1]ABC"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = 1, 2 %}{{ t }}", "12|(1, 2)"},
    {"{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(b=5, a=0) }} "
     "{{ m }}",
     "1-2 1-3 0-5 <Macro 'm'>"},
    {"{% macro m(a) %}[{{ a }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{{ m(1, 2, 3, k=4) }}{{ "
     "m() }}",
     "[1|(2, 3)|{'k': 4}][|()|{}]"},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro "
     "%}{{ fact(10) }}",
     "3628800"},
    {"{% macro box(title) %}<{{ title }}:{{ caller() }}>{% endmacro %}{% call box('t') %}inner {{ "
     "s }}{% endcall %}",
     "<t:inner hello>"},
    {"{% macro row(x) %}{{ caller(x * 2) }}{% endmacro %}{% call(v) row(21) %}v={{ v }}{% endcall "
     "%}",
     "v=42"},
    {"{% filter upper %}abc{{ 'd' }}{% endfilter %}|{% filter trim|upper %}  x  {% endfilter %}",
     "ABCD|X"},
    {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "3[]"},
    {"{% raw %}{{ not evaluated }}{% if %}{% endraw %}", "{{ not evaluated }}{% if %}"},
    {"a{# a comment {{ x }} #}b", "ab"},
};
const FailCase kStatementsErrors[] = {
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
     "macro 'm' takes not more than 1 argument(s)"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(z=1) }}",
     "macro 'm' takes no keyword argument 'z'"},
    {"{% for x in none %}{% endfor %}", "'NoneType' object is not iterable"},
    {"{% for x in 5 %}{% endfor %}", "'int' object is not iterable"},
    {"{% set a, b = [1] %}", "not enough values to unpack (expected 2, got 1)"},
    {"{% set a, b = [1, 2, 3] %}", "too many values to unpack (expected 2)"},
    {"{% set x = 1 %}{% set x.a = 2 %}", "not a namespace"},
};

const RenderCase kScoping[] = {
    {"{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i + 10 %}{{ x }},{% endfor %}{{ x }}",
     "010,011,012,0"},
    {"{% for i in range(3) %}{{ y }}{% set y = i %}{% endfor %}[{{ y }}]", "[]"},
    {"{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "2"},
    {"{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", "2"},
    {"{% macro m() %}[{{ z }}]{% endmacro %}{% for i in [1] %}{% set z = 5 %}{{ m() }}{% endfor %}",
     "[]"},
    {"{% for i in [1] %}{% macro m() %}{{ i }}{{ q }}{% endmacro %}{% set q = 3 %}{{ m() }}{% "
     "endfor %}",
     "13"},
    {"{% set messages = messages[1:] %}{{ messages|length }}", "2"},
    {"{% for m in messages %}{% set m = m.role %}{{ m }}{% endfor %}", "systemuserassistant"},
    {"{% set x %}{% set inner = 1 %}{{ inner }}{% endset %}{{ x }}[{{ inner }}]", "1[]"},
    {"{% set inner = 0 %}{% set x %}{% set inner = 1 %}{% endset %}[{{ inner }}]", "[0]"},
    {"{% filter upper %}{% set z = 'q' %}{{ z }}{% endfilter %}[{{ z }}]", "Q[]"},
    {"{% set a = 'outer' %}{% macro m() %}{% set a = 'inner' %}{{ a }}{% endmacro %}{{ m() }}{{ a "
     "}}",
     "innerouter"},
    {"{% with %}{% set y = 1 %}{{ y }}{% endwith %}[{{ y }}]", "1[]"},
};

const RenderCase kGlobals[] = {
    {"{{ range(3)|list }}|{{ range(1, 10, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list "
     "}}|{{ range(3, 1)|list }}",
     "[0, 1, 2]|[1, 4, 7]|[5, 3, 1]|[]|[]"},
    {"{{ dict(a=1, b=2) }}|{{ dict(d, c=3) }}|{{ dict([['k', 'v']]) }}|{{ namespace(d).b }}",
     "{'a': 1, 'b': 2}|{'a': 1, 'b': 2, 'c': 3}|{'k': 'v'}|2"},
};
const FailCase kGlobalsErrors[] = {
    {"{{ range(200000)|length }}", "range too big"},
    {"{{ raise_exception('custom failure') }}", "custom failure"},
    {"{{ nosuchfn(1) }}", "'nosuchfn' is undefined"},
};

const RenderCase kUnknownNames[] = {
    {"{% if false %}{{ 1|nosuch }}{% endif %}ok", "ok"},
    {"{% if false %}{% if true %}{{ 1 is nosuchtest }}{% endif %}{% endif %}ok", "ok"},
    {"{% if 'nosuch' is filter %}{{ 1|nosuch }}{% endif %}ok", "ok"},
    {"{{ 1 if true else 2|nosuch }}", "1"},
    {"{% if false %}{% set y = 1|nosuch %}{% for x in []|nosuch %}{% endfor %}{% endif %}ok", "ok"},
    {"{{ é }}|{% set größe = 1 %}{{ größe }}|{{ d.é }}|{% for ключ in xs %}{{ ключ }}{% endfor %}",
     "|1||123"},
};

TEST(JinjaLanguage, PrintsValuesAsPythonStr) {
    expect_renders(kPrinting);
}

TEST(JinjaLanguage, Arithmetic) {
    expect_renders(kArithmetic);
    expect_fails(kArithmeticErrors);
}

TEST(JinjaLanguage, ComparisonAndLogic) {
    expect_renders(kComparisonAndLogic);
}

TEST(JinjaLanguage, UndefinedIsEmptyButFailsWhereJinja2Fails) {
    expect_renders(kUndefined);
    expect_fails(kUndefinedErrors);
}

TEST(JinjaLanguage, SubscriptsAndSlices) {
    expect_renders(kSubscriptsAndSlices);
    expect_fails(kSubscriptsAndSlicesErrors);
}

TEST(JinjaLanguage, Statements) {
    expect_renders(kStatements);
    expect_fails(kStatementsErrors);
}

TEST(JinjaLanguage, ScopesFollowJinja2) {
    expect_renders(kScoping);
}

TEST(JinjaLanguage, Globals) {
    expect_renders(kGlobals);
    expect_fails(kGlobalsErrors);
}

// jinja2 rejects unknown filters and tests when it compiles a template, except inside {% if %}
// and `a if b else c`, where it fails only if they run; loop and macro bodies are strict again.
TEST(JinjaLanguage, UnknownFiltersAndTestsFailAtLoadUnlessInsideIf) {
    expect_renders(kUnknownNames);
    const FailCase at_load[] = {
        {"{{ 1|nosuch }}", "1:6: no filter named 'nosuch'"},
        {"{{ 1 is nosuchtest }}", "1:6: no test named 'nosuchtest'"},
        {"{% for x in [] %}{{ x|nosuch }}{% endfor %}", "1:23: no filter named 'nosuch'"},
        {"{% macro m() %}{{ 1|nosuch }}{% endmacro %}", "no filter named 'nosuch'"},
        {"{% if false %}{% for x in [] %}{{ 1|nosuch }}{% endfor %}{% endif %}",
         "no filter named 'nosuch'"},
        {"{% if false %}{% filter nosuch %}a{% endfilter %}{% endif %}",
         "no filter named 'nosuch'"},
        {"{% if false %}{% set x %}{{ 1|nosuch }}{% endset %}{% endif %}",
         "no filter named 'nosuch'"},
    };
    for (const auto& c : at_load) {
        SCOPED_TRACE(c.source);
        auto t = jinja::Template::parse(c.source, "test.jinja");
        ASSERT_FALSE(t.ok());
        EXPECT_NE(t.error().message.find(c.message), std::string::npos) << t.error().message;
    }
    auto deferred = jinja::Template::parse("{% if x|nosuch %}{% endif %}", "test.jinja");
    ASSERT_TRUE(deferred.ok()) << deferred.error().message;
    auto out = deferred->render(nlohmann::ordered_json::object());
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.error().message.find("1:9: no filter named 'nosuch'"), std::string::npos)
        << out.error().message;
}

}  // namespace
}  // namespace strata::test
