// Feeding a reply to the reply parser whole and cut every way, for the reply parser's tests:
// the split into content, thinking and calls must not depend on how the text arrives, and every
// piece the parser returns must be valid UTF-8.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "reply/reply_parser.h"
#include "text_cuts.h"
#include "util/utf8.h"

namespace strata::test {

using json = nlohmann::ordered_json;

// What a whole reply came to: all content, all thinking, the calls as JSON for easy comparison.
struct Outcome {
    std::string content, thinking;
    json calls = json::array();
    bool operator==(const Outcome&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Outcome& o) {
    return os << "{content: " << json(o.content).dump() << ", thinking: " << json(o.thinking).dump()
              << ", calls: " << o.calls.dump() << "}";
}

inline json call(const std::string& name, json arguments) {
    return {{"name", name}, {"arguments", std::move(arguments)}};
}

struct Setup {
    ReplyFormat format;
    bool parse_tools = true;
    bool separate_thinking = true;
};

inline void add(Outcome& o, const ReplyDelta& d) {
    EXPECT_TRUE(utf8::is_valid(d.content)) << "content piece cuts a character: " << d.content;
    EXPECT_TRUE(utf8::is_valid(d.thinking)) << "thinking piece cuts a character: " << d.thinking;
    o.content += d.content;
    o.thinking += d.thinking;
    for (const ToolCall& c : d.tool_calls) {
        EXPECT_TRUE(c.arguments.is_object()) << c.arguments.dump();
        o.calls.push_back(call(c.name, c.arguments));
    }
}

inline Outcome streamed(const Setup& s, const std::vector<std::string>& pieces) {
    ReplyParser parser(s.format, s.parse_tools, s.separate_thinking);
    Outcome o;
    for (const std::string& p : pieces) add(o, parser.feed(p));
    add(o, parser.finish());
    return o;
}

// Every cut into three pieces, byte by byte, and random cuts into many pieces.
inline std::vector<std::vector<std::string>> cuts_of(const std::string& text) {
    std::vector<std::vector<std::string>> out = all_cuts(text);
    std::mt19937 rng(1234);
    for (int round = 0; round < 200; ++round) {
        std::vector<std::string> pieces;
        for (size_t at = 0; at < text.size();) {
            const size_t len = std::uniform_int_distribution<size_t>(1, 7)(rng);
            pieces.push_back(text.substr(at, len));
            at += len;
        }
        out.push_back(pieces);
    }
    return out;
}

// The reply fed whole must give `expect`, and so must every cut of it.
inline void expect_at_every_cut(const Setup& s, const std::string& reply, const Outcome& expect) {
    ASSERT_EQ(streamed(s, {reply}), expect) << "fed whole: " << reply;
    for (const auto& pieces : cuts_of(reply)) {
        const Outcome got = streamed(s, pieces);
        if (got != expect) {
            std::string shown;
            for (const std::string& p : pieces) shown += json(p).dump() + " | ";
            ADD_FAILURE() << "cut as " << shown << "\n got " << got << "\nwant " << expect;
            return;  // one failing cut says enough
        }
    }
}

}  // namespace strata::test
