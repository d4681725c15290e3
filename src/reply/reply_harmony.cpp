// The Harmony reply splitter (see reply_parser.h). held_ keeps what is not settled: a header
// until its <|message|>, and in a body only a tail that may still begin an end marker. A call's
// body is collected whole in body_ and decoded when the message ends.
#include <array>
#include <span>

#include "reply/reply_parser.h"
#include "session/stop_strings.h"

namespace strata {

namespace {

// A header that grows past this without reaching <|message|> is not one.
constexpr size_t kMaxHeaderBytes = 512;

// What ends a message body: its own end markers, or the start of the next message when the
// model leaves out <|end|>.
const std::array<std::string, 4>& body_ends() {
    static const std::array<std::string, 4> ends = {
        std::string(kHarmonyEnd), std::string(kHarmonyCall), std::string(kHarmonyReturn),
        std::string(kHarmonyStart)};
    return ends;
}

size_t leading_space(std::string_view s) {
    size_t n = 0;
    while (n < s.size() && is_json_space(s[n])) ++n;
    return n;
}

// The word after `key` in a header ("analysis" after "<|channel|>", "functions.f" after "to="):
// up to whitespace or the next tag.
std::string word_after(std::string_view header, std::string_view key) {
    const size_t at = header.find(key);
    if (at == std::string_view::npos) return {};
    size_t begin = at + key.size();
    while (begin < header.size() && header[begin] == ' ') ++begin;
    size_t end = begin;
    while (end < header.size() && !is_json_space(header[end]) && header[end] != '<') ++end;
    return std::string(header.substr(begin, end - begin));
}

}  // namespace

HarmonySplitter::HarmonySplitter(bool parse_tools, bool keep_thinking)
    : parse_tools_(parse_tools), keep_thinking_(keep_thinking) {}

void HarmonySplitter::feed(std::string_view text, bool at_end, ReplyDelta& out) {
    held_.append(text);
    for (;;) {
        const bool moved =
            state_ == State::Header ? header_state(at_end, out) : body_state(at_end, out);
        if (!moved) return;
    }
}

bool HarmonySplitter::header_state(bool at_end, ReplyDelta& out) {
    const std::string_view rest = std::string_view(held_).substr(leading_space(held_));
    if (rest.empty()) {
        if (at_end) held_.clear();
        return false;
    }
    const bool is_header = rest.starts_with(kHarmonyStart) || rest.starts_with(kHarmonyChannel);
    const bool may_be_header = kHarmonyStart.starts_with(rest) || kHarmonyChannel.starts_with(rest);
    if (!is_header && !may_be_header) {  // text with no header: an answer all the same
        sink_ = Sink::Content;
        state_ = State::Body;
        return true;
    }
    const size_t message_at = held_.find(kHarmonyMessage);
    if (message_at == std::string::npos) {
        if (at_end || held_.size() > kMaxHeaderBytes) {  // never became a header: give it back
            out.content += held_;
            held_.clear();
            sink_ = Sink::Content;
            state_ = State::Body;
            return !at_end;
        }
        return false;
    }
    header_ = held_.substr(0, message_at + kHarmonyMessage.size());
    held_.erase(0, header_.size());
    const std::string_view header = std::string_view(header_).substr(0, message_at);
    recipient_ = word_after(header, "to=");
    const std::string channel = word_after(header, kHarmonyChannel);
    if (!recipient_.empty() && parse_tools_) {
        sink_ = Sink::Call;
    } else if (channel == "analysis") {
        sink_ = keep_thinking_ ? Sink::Thinking : Sink::Drop;
    } else {
        sink_ = Sink::Content;
    }
    state_ = State::Body;
    return true;
}

bool HarmonySplitter::body_state(bool at_end, ReplyDelta& out) {
    auto emit = [&](std::string_view text) {
        switch (sink_) {
            case Sink::Content:
                out.content.append(text);
                break;
            case Sink::Thinking:
                out.thinking.append(text);
                break;
            case Sink::Call:
                body_.append(text);
                break;
            case Sink::Drop:
                break;
        }
    };
    size_t end_at = std::string::npos, marker_size = 0;
    for (const std::string& marker : body_ends()) {
        const size_t at = held_.find(marker);
        if (at < end_at) {
            end_at = at;
            // The next message's <|start|> stays for the header.
            marker_size = marker == kHarmonyStart ? 0 : marker.size();
        }
    }
    if (end_at != std::string::npos) {
        emit(std::string_view(held_).substr(0, end_at));
        held_.erase(0, end_at + marker_size);
        end_message(out);
        return true;
    }
    if (at_end) {
        emit(held_);
        held_.clear();
        end_message(out);
        return false;
    }
    const auto& ends = body_ends();
    const size_t partial =
        first_partial_marker(std::span<const std::string>(ends.data(), ends.size()), held_);
    const size_t settled = partial == std::string_view::npos ? held_.size() : partial;
    emit(std::string_view(held_).substr(0, settled));
    held_.erase(0, settled);
    return false;
}

void HarmonySplitter::end_message(ReplyDelta& out) {
    if (sink_ == Sink::Call) {
        std::optional<ToolCall> call = parse_harmony_call(recipient_, body_);
        if (call) {
            out.tool_calls.push_back(std::move(*call));
        } else {
            out.content += header_ + body_;
        }
    }
    header_.clear();
    recipient_.clear();
    body_.clear();
    sink_ = Sink::Content;
    state_ = State::Header;
}

}  // namespace strata
