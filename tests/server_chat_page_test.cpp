// strata serve's chat page (/ui/): served from the binary beside Ollama's API without changing
// it, self-contained (nothing fetched from elsewhere), and working in a real browser: headless
// Chromium loads it, the page sends a message through its own Send button, and the answer it
// streamed must be on the page, equal to what /api/chat answers non-streamed, with the final
// chunk's figures under it.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "server_test_support.h"

namespace strata::test {
namespace {

class ChatPage : public SharedServerTest<ChatPage> {};

TEST_F(ChatPage, ServedAtUiBesideTheHealthAnswer) {
    auto page = srv_->get("/ui/");
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200);
    EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_TRUE(page->body.starts_with("<!doctype html>"));
    EXPECT_NE(page->body.find("<title>strata chat</title>"), std::string::npos);
    // The page may talk to this server only.
    EXPECT_NE(page->get_header_value("Content-Security-Policy").find("connect-src 'self'"),
              std::string::npos);

    auto c = srv_->client();
    auto bare = c.Get("/ui");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->status, 301);
    EXPECT_EQ(bare->get_header_value("Location"), "/ui/");
    auto head = c.Head("/ui/");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);

    auto health = srv_->get("/");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->body, "Ollama is running");
}

TEST_F(ChatPage, PageLoadsNothingFromElsewhere) {
    const std::string page = srv_->get("/ui/")->body;
    // No external script, style sheet, font, image or frame: everything is inline, so the page
    // works on a machine with no network.
    for (const char* ref : {"src=", "href=", "url(", "@import", "http://", "https://"}) {
        EXPECT_EQ(page.find(ref), std::string::npos) << ref;
    }
}

// The first of `names` found on PATH, or "".
std::string find_on_path(std::initializer_list<const char*> names) {
    const char* path = std::getenv("PATH");
    if (!path) return "";
    const std::string dirs = path;
    for (const char* name : names) {
        for (size_t at = 0; at <= dirs.size();) {
            const size_t colon = std::min(dirs.find(':', at), dirs.size());
            const std::filesystem::path candidate =
                std::filesystem::path(dirs.substr(at, colon - at)) / name;
            if (colon > at && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
            at = colon + 1;
        }
    }
    return "";
}

std::string url_encode(const std::string& s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += char(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

// Text as Chromium serializes it into a text node or attribute, read back.
std::string html_unescape(std::string s) {
    const std::pair<const char*, const char*> entities[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&nbsp;", "\u00a0"}, {"&amp;", "&"}};
    for (const auto& [from, to] : entities) {
        for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += std::strlen(to)) {
            s.replace(at, std::strlen(from), to);
        }
    }
    return s;
}

// What the first tag starting with `open` after `from` holds, up to `close` (the elements
// looked at hold text only), or nullopt.
std::optional<std::string> element_text(const std::string& dom, const std::string& open,
                                        const std::string& close, size_t from = 0) {
    size_t at = dom.find(open, from);
    if (at == std::string::npos) return std::nullopt;
    at = dom.find('>', at);
    const size_t end = dom.find(close, at);
    if (at == std::string::npos || end == std::string::npos) return std::nullopt;
    return dom.substr(at + 1, end - at - 1);
}

// The value of the first `name="..."` after `from`, or nullopt.
std::optional<std::string> attribute(const std::string& dom, const std::string& name, size_t from) {
    const std::string open = " " + name + "=\"";
    const size_t at = dom.find(open, from);
    if (at == std::string::npos) return std::nullopt;
    const size_t end = dom.find('"', at + open.size());
    if (end == std::string::npos) return std::nullopt;
    return html_unescape(dom.substr(at + open.size(), end - at - open.size()));
}

struct BrowserRun {
    CommandResult result;
    double seconds = 0;
};

// Loads the page in headless Chromium and returns the DOM once the page says its exchange has
// ended. The page keeps a request in flight until then, so the virtual-time budget counts only
// idle time after it; the real-time limit ends a browser that hangs.
BrowserRun run_browser(const std::string& chromium, const std::string& url) {
    TempDir profile;  // Chromium's profile, caches and settings: nothing outside it
    const std::string home = shell_quote(profile.path().string());
    const std::string cmd = "HOME=" + home + " XDG_CONFIG_HOME=" + home +
                            " XDG_CACHE_HOME=" + home + " timeout -k 5 150 " +
                            shell_quote(chromium) +
                            " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage"
                            " --no-first-run --disable-extensions --disable-background-networking"
                            " --user-data-dir=" +
                            shell_quote(profile.file("profile")) +
                            " --virtual-time-budget=10000 --dump-dom " + shell_quote(url);
    const auto t0 = std::chrono::steady_clock::now();
    BrowserRun run{run_command(cmd), 0};
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return run;
}

std::string chromium_or_empty() {
    return find_on_path({"chromium", "chromium-browser"});
}
constexpr const char* kNoChromium =
    "no chromium or chromium-browser on PATH (Debian: apt-get install chromium; scripts/setup "
    "installs it)";

TEST_F(ChatPage, ChromiumShowsTheStreamedAnswer) {
    const std::string chromium = chromium_or_empty();
    if (chromium.empty()) {
        GTEST_SKIP() << kNoChromium;
    }
    const std::string model = "tiny:latest", system = "Answer in one line.";
    const std::string message = "Rivers & trees: <who> \"wins\"?";
    const std::string url = "http://127.0.0.1:" + std::to_string(srv_->port()) +
                            "/ui/?autotest=1&model=" + url_encode(model) +
                            "&system=" + url_encode(system) + "&message=" + url_encode(message) +
                            "&temperature=0&seed=42&num_predict=24";
    const BrowserRun run = run_browser(chromium, url);
    ASSERT_EQ(run.result.exit_code, 0)
        << "chromium failed or timed out after " << run.seconds << " s:\n"
        << run.result.err;
    const std::string& dom = run.result.out;
    ASSERT_NE(dom.find("data-autotest=\"done\""), std::string::npos)
        << "the page did not finish its exchange in " << run.seconds << " s; DOM:\n"
        << dom << "\nchromium:\n"
        << run.result.err;

    // The same request, answered in one piece.
    const json one = json::parse(
        srv_->post("/api/chat",
                   {{"model", model},
                    {"stream", false},
                    {"options", {{"temperature", 0}, {"seed", 42}, {"num_predict", 24}}},
                    {"messages",
                     {{{"role", "system"}, {"content", system}},
                      {{"role", "user"}, {"content", message}}}}})
            ->body);
    const std::string expected = one["message"]["content"];
    ASSERT_FALSE(expected.empty());

    const size_t user = dom.find("<article class=\"turn user\">");
    ASSERT_NE(user, std::string::npos) << dom;
    const auto asked = element_text(dom, "<div class=\"content\"", "</div>", user);
    ASSERT_TRUE(asked);
    EXPECT_EQ(html_unescape(*asked), message);

    const size_t assistant = dom.find("<article class=\"turn assistant\"");
    ASSERT_NE(assistant, std::string::npos) << dom;
    // It arrived in pieces, appended as they came.
    const auto pieces = attribute(dom, "data-pieces", assistant);
    ASSERT_TRUE(pieces) << dom;
    EXPECT_GT(std::stoi(*pieces), 1) << dom.substr(assistant, 300);
    const auto answer = element_text(dom, "<div class=\"content\"", "</div>", assistant);
    ASSERT_TRUE(answer) << dom;
    EXPECT_EQ(html_unescape(*answer), expected);

    // The final chunk's figures: tokens, speed, disk bytes per token.
    const auto stats = element_text(dom, "<p class=\"stats\"", "</p>", assistant);
    ASSERT_TRUE(stats) << dom;
    const std::string count = std::to_string(one["eval_count"].get<int>());
    EXPECT_NE(stats->find(count + " tokens at "), std::string::npos) << *stats;
    EXPECT_NE(stats->find(" tokens/s"), std::string::npos) << *stats;
    EXPECT_NE(stats->find("0 B read from disk per token"), std::string::npos) << *stats;
    EXPECT_NE(dom.find("<div id=\"error\" role=\"alert\" hidden=\"\"></div>"), std::string::npos)
        << "an error is shown:\n"
        << dom;
}

TEST_F(ChatPage, ChromiumStopsTheAnswer) {
    const std::string chromium = chromium_or_empty();
    if (chromium.empty()) {
        GTEST_SKIP() << kNoChromium;
    }
    const uint64_t gone_before = srv_->server().stats().client_gone;
    // A long answer, stopped with the page's Stop button after three pieces.
    const std::string url = "http://127.0.0.1:" + std::to_string(srv_->port()) +
                            "/ui/?autotest=1&model=tiny%3Alatest&message=Tell%20a%20story"
                            "&temperature=0&num_predict=600&stop_after=3";
    const BrowserRun run = run_browser(chromium, url);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
    const std::string& dom = run.result.out;
    ASSERT_NE(dom.find("data-autotest=\"stopped\""), std::string::npos) << dom;
    const size_t assistant = dom.find("<article class=\"turn assistant\"");
    ASSERT_NE(assistant, std::string::npos) << dom;
    EXPECT_EQ(attribute(dom, "data-pieces", assistant), "3") << dom.substr(assistant, 300);
    EXPECT_NE(dom.find("<p class=\"note\">Stopped.</p>", assistant), std::string::npos);
    EXPECT_EQ(dom.find("<p class=\"stats\"", assistant), std::string::npos);

    // What was shown begins the greedy answer (the first 24 tokens of it are enough).
    const json full = json::parse(
        srv_->post("/api/chat", {{"model", "tiny:latest"},
                                 {"stream", false},
                                 {"options", {{"temperature", 0}, {"num_predict", 24}}},
                                 {"messages", {{{"role", "user"}, {"content", "Tell a story"}}}}})
            ->body);
    const auto shown = element_text(dom, "<div class=\"content\"", "</div>", assistant);
    ASSERT_TRUE(shown);
    const std::string text = html_unescape(*shown);
    EXPECT_FALSE(text.empty());
    EXPECT_TRUE(full["message"]["content"].get<std::string>().starts_with(text)) << text;
    // The server saw the client leave and stopped generating (counted when the generation
    // ends, which is before the non-streamed request above could run).
    EXPECT_GT(srv_->server().stats().client_gone, gone_before);
}

TEST_F(ChatPage, ChromiumShowsTheServersError) {
    const std::string chromium = chromium_or_empty();
    if (chromium.empty()) {
        GTEST_SKIP() << kNoChromium;
    }
    // The tiny model's template has no thinking: asking for it is a 400 the page must show.
    const std::string url = "http://127.0.0.1:" + std::to_string(srv_->port()) +
                            "/ui/?autotest=1&model=tiny%3Alatest&message=Hi&think=true";
    const BrowserRun run = run_browser(chromium, url);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
    const std::string& dom = run.result.out;
    ASSERT_NE(dom.find("data-autotest=\"error\""), std::string::npos) << dom;
    const auto error = element_text(dom, "<div id=\"error\"", "</div>");
    ASSERT_TRUE(error) << dom;
    EXPECT_NE(error->find("does not support thinking"), std::string::npos) << *error;
    EXPECT_NE(error->find("HTTP 400"), std::string::npos) << *error;
    // Nothing came back: the failed exchange leaves no turn in the conversation.
    EXPECT_EQ(dom.find("<article class=\"turn"), std::string::npos) << dom;
}

}  // namespace
}  // namespace strata::test
