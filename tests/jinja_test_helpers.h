// Shared by the template-language tests: a fixed context and table-driven checks. The expected
// strings in the tables are what Python's jinja2 3.1 renders for the same template and context
// (configured as Hugging Face configures it: trim_blocks, lstrip_blocks, loop controls, tojson
// with ensure_ascii=False).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/jinja_template.h"

namespace strata::test {

// The variables every table case can read.
inline constexpr std::string_view kJinjaTestContext = R"JSON({
  "xs": [1, 2, 3], "d": {"a": 1, "b": 2}, "s": "hello", "n": null, "f": 1.5, "t": true,
  "u8": "Привет 👋 — 你好",
  "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
               {"role": "assistant", "content": "yo",
                "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}],
  "nested": {"k": [{"a": "x"}, {"a": "y", "b": [1, {"c": null}]}]}, "empty": [], "e": ""
})JSON";

struct RenderCase {
    const char* source;
    const char* expected;
};

struct FailCase {
    const char* source;
    const char* message;  // must appear in the error
};

inline Result<std::string> render_template(std::string_view source,
                                           std::string_view context_json = kJinjaTestContext,
                                           const jinja::RenderOptions& options = {}) {
    STRATA_ASSIGN(auto t, jinja::Template::parse(source, "test.jinja"));
    return t.render(nlohmann::ordered_json::parse(context_json), options);
}

// Errors start with "test.jinja:LINE:COL: ".
inline bool names_location(const std::string& message) {
    const std::string prefix = "test.jinja:";
    if (message.rfind(prefix, 0) != 0) return false;
    size_t i = prefix.size();
    for (int part = 0; part < 2; ++part) {
        const size_t digits = i;
        while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
        if (i == digits || i >= message.size() || message[i] != ':') return false;
        ++i;
    }
    return true;
}

template <size_t N>
void expect_renders(const RenderCase (&cases)[N]) {
    for (const auto& c : cases) {
        SCOPED_TRACE(c.source);
        auto out = render_template(c.source);
        ASSERT_TRUE(out.ok()) << out.error().message;
        EXPECT_EQ(*out, c.expected);
    }
}

template <size_t N>
void expect_fails(const FailCase (&cases)[N]) {
    for (const auto& c : cases) {
        SCOPED_TRACE(c.source);
        auto out = render_template(c.source);
        ASSERT_FALSE(out.ok()) << "rendered: " << *out;
        EXPECT_NE(out.error().message.find(c.message), std::string::npos)
            << "error: " << out.error().message;
        EXPECT_TRUE(names_location(out.error().message)) << out.error().message;
    }
}

}  // namespace strata::test
