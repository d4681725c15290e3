// Hostile templates fail cleanly, quickly and with an error that says which limit they hit:
// deep nesting, runaway loops and recursion, output and memory bombs, reference cycles.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "jinja_test_helpers.h"

namespace strata::test {
namespace {

// Generous for a shared machine; each case takes well under a second when bounded.
constexpr double kMaxSeconds = 10.0;

std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

void expect_bounded_failure(const std::string& source, const std::string& message,
                            const jinja::RenderOptions& options = {}) {
    SCOPED_TRACE(source.substr(0, 200));
    const auto start = std::chrono::steady_clock::now();
    auto out = render_template(source, kJinjaTestContext, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(out.ok()) << "rendered " << out->size() << " bytes";
    EXPECT_NE(out.error().message.find(message), std::string::npos) << out.error().message;
    EXPECT_TRUE(names_location(out.error().message)) << out.error().message;
    EXPECT_LT(seconds, kMaxSeconds);
}

TEST(JinjaLimits, DeepNestingIsASyntaxErrorNotAStackOverflow) {
    expect_bounded_failure("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}",
                           "nests more than");
    expect_bounded_failure("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}",
                           "nests more than");
    expect_bounded_failure("{{ " + repeat("not ", 100000) + "x }}", "nests more than");
    expect_bounded_failure("{{ " + repeat("-", 100000) + "1 }}", "nests more than");
    expect_bounded_failure(repeat("{% if true %}", 5000) + repeat("{% endif %}", 5000),
                           "nests more than");
    expect_bounded_failure("{{ 1 " + repeat("if 1 else 1 ", 50000) + "}}", "nests more than");
}

TEST(JinjaLimits, NestingWithinTheLimitStillWorks) {
    auto out = render_template("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}" +
                               repeat("{% if true %}", 40) + "x" + repeat("{% endif %}", 40));
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "1x");
}

TEST(JinjaLimits, RunawayLoopsStop) {
    expect_bounded_failure("{{ range(1000000000)|length }}", "range too big");
    expect_bounded_failure(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "loops ran more than 1000000 iterations");
}

TEST(JinjaLimits, RunawayRecursionStops) {
    expect_bounded_failure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                           "macro calls nest deeper than 100");
    expect_bounded_failure(
        "{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) "
        "}}",
        "macro calls nest deeper than 100");
    // Recursion through deeply nested statements reaches the evaluation depth limit first.
    expect_bounded_failure("{% macro f(n) %}" + repeat("{% if true %}", 60) + "{{ f(n) }}" +
                               repeat("{% endif %}", 60) + "{% endmacro %}{{ f(0) }}",
                           "nests deeper than 500 levels while rendering");
}

TEST(JinjaLimits, MemoryBombsStop) {
    expect_bounded_failure("{{ 'x' * 1000000000 }}", "passes the limit");
    expect_bounded_failure("{{ [0] * 1000000000 }}", "passes the limit");
    expect_bounded_failure(
        "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}",
        "passes the limit");
    expect_bounded_failure("{{ (',' * 10000000).split(',')|length }}", "split would make more");
    expect_bounded_failure("{% for c in 'x' * 2000000 %}{% endfor %}", "iterating over a string");
    expect_bounded_failure("{{ [1]|batch(1000000000)|list }}", "passes the list limit");
    expect_bounded_failure("{% for i in range(100000) %}{{ 'x' * 1000000 }}{% endfor %}",
                           "produced more than");
}

TEST(JinjaLimits, ExpensiveWorkStops) {
    expect_bounded_failure(
        "{% set big = range(100000)|list %}{% for i in range(100000) %}{% set y = big|sort %}"
        "{% endfor %}",
        "more work than the render limit allows");
    expect_bounded_failure(
        "{% set big = range(100000)|list %}{% for i in range(100000) %}{{ 'x' in big }}"
        "{% endfor %}",
        "more work than the render limit allows");
}

TEST(JinjaLimits, RepeatedScansOfLargeStringsStop) {
    // Each of these reads a 2 MB string once per iteration.
    for (const char* body : {"{{ big|length }}", "{{ big[5] }}", "{{ big.find('x') }}",
                             "{{ big|wordcount }}", "{% for c in big %}{% break %}{% endfor %}"}) {
        expect_bounded_failure("{% set big = 'é' * 1000000 %}{% for i in range(100000) %}" +
                                   std::string(body) + "{% endfor %}",
                               "more work than the render limit allows");
    }
}

TEST(JinjaLimits, LongConversationsStayWellWithinTheLimits) {
    // 20000 turns through a template that takes messages|length inside its loop.
    nlohmann::ordered_json context;
    context["messages"] = nlohmann::ordered_json::array();
    for (int i = 0; i < 20000; ++i) {
        context["messages"].push_back(
            {{"role", i % 2 ? "assistant" : "user"},
             {"content", "turn " + std::to_string(i) + repeat(" word", 50)}});
    }
    auto t = jinja::Template::parse(
        "{% for m in messages %}{% set last = messages|length - 1 %}<{{ m.role }}>{{ "
        "m.content|trim }}"
        "{% if loop.index0 == last %}!{% endif %}{% endfor %}",
        "test.jinja");
    ASSERT_TRUE(t.ok()) << t.error().message;
    auto out = t->render(context);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_GT(out->size(), 20000u * 250);
}

TEST(JinjaLimits, DeepValuesAndCyclesFailOrPrintWithoutCrashing) {
    expect_bounded_failure(
        "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}"
        "{% endfor %}",
        "nested more than 256 levels");
    // A list that contains itself: usable, but printing it is refused rather than endless.
    auto out = render_template("{% set l = [] %}{{ l.append(l) }}{{ l|length }}{{ l[0]|length }}");
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "None11");
    expect_bounded_failure("{% set l = [] %}{{ l.append(l) }}{{ l }}", "nested more than");
    expect_bounded_failure("{% set l = [] %}{{ l.append(l) }}{{ l|tojson }}", "nested too deeply");
    out = render_template(
        "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}");
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "True");
    // A chain of lists linked by append, 100000 long: destroying it must not recurse that deep.
    out = render_template(
        "{% set ns = namespace(cur=[]) %}{% set root = ns.cur %}{% for i in range(100000) %}"
        "{% set next = [] %}{% set _ = ns.cur.append(next) %}{% set ns.cur = next %}{% endfor %}"
        "{{ root|length }}");
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "1");
}

TEST(JinjaLimits, DeepContextIsRefused) {
    const std::string deep = repeat("[", 10000) + repeat("]", 10000);
    auto t = jinja::Template::parse("{{ x }}", "test.jinja");
    ASSERT_TRUE(t.ok());
    auto out = t->render(nlohmann::ordered_json::parse("{\"x\": " + deep + "}"));
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.error().message.find("context key 'x'"), std::string::npos)
        << out.error().message;
}

TEST(JinjaLimits, LimitsAreConfigurable) {
    jinja::RenderOptions options;
    options.limits.max_output_bytes = 10;
    expect_bounded_failure("{{ 'x' * 20 }}", "produced more than 10 bytes", options);
    options = {};
    options.limits.max_loop_iterations = 5;
    expect_bounded_failure("{% for i in range(3) %}{% for j in range(3) %}{% endfor %}{% endfor %}",
                           "loops ran more than 5 iterations", options);
    options = {};
    options.limits.max_call_depth = 3;
    expect_bounded_failure(
        "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}",
        "macro calls nest deeper than 3", options);
    auto out = render_template(  // three calls in progress at most: f(2), f(1), f(0)
        "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}[{{ f(2) }}]",
        kJinjaTestContext, options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "[]");
}

}  // namespace
}  // namespace strata::test
