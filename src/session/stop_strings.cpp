// The streaming stop-string matcher (see stop_strings.h). Everything not yet returned is kept in
// held_, which after each call is at most the longest stop string plus a few UTF-8 bytes, so
// each call costs about (held + new text) * number of stops.
#include "session/stop_strings.h"

#include <algorithm>
#include <utility>

#include "util/utf8.h"

namespace strata {

namespace {

constexpr size_t kNone = std::string_view::npos;

struct Match {
    size_t pos = kNone;
    const std::string* stop = nullptr;
};

// The earliest complete occurrence of a stop string; at the same position, the shorter stop.
Match first_complete(const std::vector<std::string>& stops, std::string_view text) {
    Match best;
    for (const std::string& s : stops) {
        const size_t pos = text.find(s);
        if (pos == kNone) continue;
        if (pos < best.pos || (pos == best.pos && s.size() < best.stop->size())) {
            best = {pos, &s};
        }
    }
    return best;
}

}  // namespace

size_t first_partial_marker(std::span<const std::string> stops, std::string_view text) {
    size_t best = kNone;
    for (const std::string& s : stops) {
        if (s.empty()) continue;
        // Longest overlap first: that is the earliest start this stop can give.
        for (size_t len = std::min(s.size() - 1, text.size()); len > 0; --len) {
            const size_t start = text.size() - len;
            if (start >= best) break;
            if (text.substr(start) == std::string_view(s).substr(0, len)) {
                best = start;
                break;
            }
        }
    }
    return best;
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopStringMatcher::feed(std::string_view text) {
    if (stopped_) return {};
    held_.append(text);
    return release(false);
}

std::string StopStringMatcher::flush() {
    if (stopped_) return {};
    return release(true);
}

// Returns and drops the held text that is settled. At the end no more text comes, so a stop
// string that has only started can no longer complete and holds nothing back.
std::string StopStringMatcher::release(bool at_end) {
    const Match found = first_complete(stops_, held_);
    const size_t maybe = at_end ? kNone : first_partial_marker(stops_, held_);
    if (found.stop && (maybe == kNone || maybe >= found.pos)) {
        stopped_ = true;
        matched_ = *found.stop;
        std::string out = held_.substr(0, found.pos);
        held_.clear();
        return out;
    }
    // Here any stop found starts after `maybe`, which an earlier stop may still claim.
    size_t cut = std::min(maybe, held_.size());
    if (!at_end && cut == held_.size()) cut -= utf8::unfinished_tail(held_);
    std::string out = held_.substr(0, cut);
    held_.erase(0, cut);
    return out;
}

}  // namespace strata
