// The chat page `strata serve` answers at /ui/: one self-contained HTML file (inline CSS and
// script, nothing fetched from elsewhere, so it works offline) that talks to the server's own
// /api/tags and /api/chat. It lives in src/server/ui/chat.html and is compiled in at build time.
#pragma once

#include <string_view>

namespace strata::server {

// The page's bytes (UTF-8 HTML).
std::string_view chat_page_html();

// Where the page is served.
inline constexpr std::string_view kChatPagePath = "/ui/";

}  // namespace strata::server
