// The stop-string matcher: the result must be the same however the text is cut into pieces
// (checked at every cut position, and on random texts against a whole-text search), nothing of
// the stop string is ever returned, text held back as a possible stop comes out once it is not
// one, and UTF-8 characters are never split in what is returned.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "session/stop_strings.h"
#include "text_cuts.h"
#include "util/utf8.h"

namespace strata {
namespace {

using Stops = std::vector<std::string>;

struct Outcome {
    std::string text;
    bool stopped = false;
    std::string matched;
    bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
    return os << "{\"" << o.text << "\", " << (o.stopped ? "stopped at \"" + o.matched + "\"" : "")
              << "}";
}

// The rule on the whole text at once: the earliest occurrence, the shorter stop on a tie.
Outcome whole_text(const Stops& stops, const std::string& text) {
    size_t best = std::string::npos;
    std::string matched;
    for (const std::string& s : stops) {
        if (s.empty()) continue;
        const size_t pos = text.find(s);
        if (pos < best || (pos == best && pos != std::string::npos && s.size() < matched.size())) {
            best = pos;
            matched = s;
        }
    }
    if (best == std::string::npos) return {text, false, ""};
    return {text.substr(0, best), true, matched};
}

Outcome streamed(const Stops& stops, const std::vector<std::string>& pieces) {
    StopStringMatcher m(stops);
    Outcome o;
    for (const std::string& p : pieces) o.text += m.feed(p);
    o.text += m.flush();
    o.stopped = m.stopped();
    o.matched = m.matched();
    return o;
}

void expect_same_at_every_cut(const Stops& stops, const std::string& text, const Outcome& expect) {
    ASSERT_EQ(whole_text(stops, text), expect);  // the test's own reference agrees
    for (const auto& pieces : test::all_cuts(text)) {
        EXPECT_EQ(streamed(stops, pieces), expect)
            << "cut as \"" << pieces[0] << "\" | \"" << (pieces.size() > 1 ? pieces[1] : "")
            << "\" | ...";
    }
}

TEST(StopStrings, SplitAtEveryPosition) {
    expect_same_at_every_cut({"<|im_end|>"}, "Hello<|im_end|>junk", {"Hello", true, "<|im_end|>"});
    expect_same_at_every_cut({"<|im_end|>"}, "no stop <|im_en here <",
                             {"no stop <|im_en here <", false, ""});
    expect_same_at_every_cut({"\n\n"}, "a\nb\n\nc", {"a\nb", true, "\n\n"});
}

TEST(StopStrings, StopsAsSoonAsTheStopCompletes) {
    const std::string text = "Hi there<END>after";
    const size_t end = text.find("<END>") + 5;
    for (size_t i = 0; i < text.size(); ++i) {  // text fed one byte at a time
        StopStringMatcher m({"<END>"});
        std::string out;
        for (size_t k = 0; k <= i; ++k) out += m.feed(text.substr(k, 1));
        EXPECT_EQ(m.stopped(), i + 1 >= end) << i;
        // What came out is always a prefix of the text before the stop.
        EXPECT_EQ(std::string("Hi there").compare(0, out.size(), out), 0) << out;
    }
}

TEST(StopStrings, HeldPrefixThatIsNotAStopComesOutLater) {
    StopStringMatcher m({"<|im_end|>"});
    EXPECT_EQ(m.feed("Hello <|im"), "Hello ");
    EXPECT_EQ(m.feed("_"), "");
    EXPECT_EQ(m.feed("start"), "<|im_start");
    EXPECT_EQ(m.feed("<"), "");
    EXPECT_EQ(m.feed("<|"), "<");  // the first "<" is settled, "<|" may still start a stop
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.flush(), "<|");
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.matched(), "");
}

TEST(StopStrings, SeveralStopsEarliestWins) {
    const Stops stops = {"User:", "###", "\n\n"};
    expect_same_at_every_cut(stops, "a\nb###c User:\n\n", {"a\nb", true, "###"});
    expect_same_at_every_cut(stops, "x User: ### ", {"x ", true, "User:"});
}

TEST(StopStrings, StopAtTheVeryStart) {
    StopStringMatcher m({"STOP"});
    EXPECT_EQ(m.feed("STOP and more"), "");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.matched(), "STOP");
    EXPECT_EQ(m.feed("ignored"), "");
    EXPECT_EQ(m.flush(), "");
    expect_same_at_every_cut({"STOP"}, "STOPx", {"", true, "STOP"});
}

TEST(StopStrings, OverlappingCandidates) {
    // "ab" starts first.
    expect_same_at_every_cut({"bc", "ab"}, "abc", {"", true, "ab"});
    expect_same_at_every_cut({"bc", "ab"}, "xbc", {"x", true, "bc"});
    // Same start: the shorter one.
    expect_same_at_every_cut({"abc", "ab"}, "zabcd", {"z", true, "ab"});
    StopStringMatcher same_start({"abc", "ab"});
    EXPECT_EQ(same_start.feed("zab"), "z");  // no need to wait for a "c"
    EXPECT_TRUE(same_start.stopped());
    // "bc" inside "abcd": "abcd" starts earlier, so "abc" cannot stop yet.
    expect_same_at_every_cut({"abcd", "bc"}, "abcd", {"", true, "abcd"});
    expect_same_at_every_cut({"abcd", "bc"}, "abcx", {"a", true, "bc"});
    expect_same_at_every_cut({"abcd", "bc"}, "abc", {"a", true, "bc"});
    StopStringMatcher m({"abcd", "bc"});
    EXPECT_EQ(m.feed("abc"), "");
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.feed("x"), "a");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.matched(), "bc");
    // A stop that overlaps itself.
    expect_same_at_every_cut({"aab"}, "aaab", {"a", true, "aab"});
}

TEST(StopStrings, Flush) {
    StopStringMatcher held({"</s>"});
    EXPECT_EQ(held.feed("end </"), "end ");
    EXPECT_EQ(held.flush(), "</");  // no more text: "</" was not a stop after all
    EXPECT_FALSE(held.stopped());

    StopStringMatcher settled({"abcd", "bc"});  // a found stop waiting on an earlier candidate
    EXPECT_EQ(settled.feed("abc"), "");
    EXPECT_EQ(settled.flush(), "a");
    EXPECT_TRUE(settled.stopped());
    EXPECT_EQ(settled.matched(), "bc");

    StopStringMatcher none({});
    EXPECT_EQ(none.feed("plain"), "plain");
    EXPECT_EQ(none.flush(), "");
}

TEST(StopStrings, EmptyStopsAreIgnored) {
    expect_same_at_every_cut({"", "!"}, "hey!", {"hey", true, "!"});
    expect_same_at_every_cut({""}, "hey", {"hey", false, ""});
}

TEST(StopStrings, MultibyteStop) {
    // "。\n" is E3 80 82 0A; the text has other characters starting with E3.
    const std::string text = "こんにちは。\nさようなら";
    expect_same_at_every_cut({"。\n"}, text, {"こんにちは", true, "。\n"});
    expect_same_at_every_cut({"🦙"}, "llama 🦙 llama", {"llama ", true, "🦙"});
    // "é" (C3 A9) against "è" (C3 A8): the shared lead byte is held, then released.
    expect_same_at_every_cut({"é"}, "très été", {"tr\xC3\xA8s ", true, "é"});
}

TEST(StopStrings, ReturnedPiecesAreWholeUtf8Characters) {
    const std::string text = "naïve 你好 🦙 done";
    for (const auto& pieces : test::all_cuts(text)) {
        StopStringMatcher m({"done", "🦙🦙"});
        std::string out;
        for (const std::string& p : pieces) {
            const std::string chunk = m.feed(p);
            EXPECT_TRUE(utf8::is_valid(chunk)) << chunk;
            out += chunk;
        }
        out += m.flush();
        EXPECT_EQ(out, "naïve 你好 🦙 ");
    }
    // Without stop strings an unfinished character is held too.
    StopStringMatcher m({});
    EXPECT_EQ(m.feed("a\xE4\xBD"), "a");
    EXPECT_EQ(m.feed("\xA0!"), "你!");
    EXPECT_EQ(m.feed("\xF0\x9F"), "");
    EXPECT_EQ(m.flush(), "\xF0\x9F");  // at the end, whatever is left
}

// Random texts over a small alphabet make stops overlap in every way; random cuts.
TEST(StopStrings, RandomTextsMatchWholeTextSearch) {
    std::mt19937 rng(2024);
    const auto random_string = [&](size_t max_len) {
        std::string s(rng() % (max_len + 1), 'a');
        for (char& c : s) c = static_cast<char>('a' + rng() % 3);
        return s;
    };
    for (int trial = 0; trial < 3000; ++trial) {
        Stops stops(1 + rng() % 3);
        for (std::string& s : stops) s = random_string(4);
        const std::string text = random_string(14);
        std::vector<std::string> pieces;
        for (size_t i = 0; i < text.size();) {
            const size_t len = 1 + rng() % 4;
            pieces.push_back(text.substr(i, len));
            i += len;
        }
        EXPECT_EQ(streamed(stops, pieces), whole_text(stops, text))
            << "trial " << trial << " text " << text;
    }
}

}  // namespace
}  // namespace strata
