// The streaming reply splitter (see reply_parser.h). Each stage keeps what it has not settled in
// held_, which stays small except inside a tool-call block (a block is decoded whole) and in
// Llama/Mistral replies that are calls (decided only at the end).
//
// Cuts are made only at tag boundaries and around ASCII whitespace, and the joiner stage passes
// on whole characters only, so no stage can cut a UTF-8 character in two: a tag is valid UTF-8,
// so where it matches (or partly matches) in valid text is a character boundary.
#include "reply/reply_parser.h"

#include <span>
#include <utility>

#include "session/stop_strings.h"
#include "util/utf8.h"

namespace strata {

namespace {

size_t leading_space(std::string_view s) {
    size_t n = 0;
    while (n < s.size() && is_json_space(s[n])) ++n;
    return n;
}

// Length of s without its trailing whitespace.
size_t without_trailing_space(std::string_view s) {
    size_t n = s.size();
    while (n > 0 && is_json_space(s[n - 1])) --n;
    return n;
}

// How much of `held` can go out now: everything before a possible start of `marker` at its end.
size_t settled_before(const std::string& marker, std::string_view held) {
    const size_t partial = first_partial_marker(std::span<const std::string>(&marker, 1), held);
    return partial == std::string_view::npos ? held.size() : partial;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ThinkingSplitter::ThinkingSplitter(std::string open, std::string close, bool starts_inside)
    : open_(std::move(open)), close_(std::move(close)), starts_inside_(starts_inside) {}

void ThinkingSplitter::feed(std::string_view text, bool at_end, std::string& content,
                            std::string& thinking) {
    held_.append(text);
    for (;;) {
        switch (state_) {
            case State::BeforeOpen: {
                // The reply may open with the tag after some whitespace; a prompt that ends inside
                // the reasoning may still have the model repeat the tag, which is then skipped.
                const size_t space = leading_space(held_);
                const std::string_view rest = std::string_view(held_).substr(space);
                if (rest.starts_with(open_)) {
                    held_.erase(0, space + open_.size());
                    state_ = State::Thinking;
                    break;
                }
                if (!at_end && std::string_view(open_).starts_with(rest)) return;
                state_ = starts_inside_ ? State::Thinking : State::Content;
                break;
            }
            case State::Thinking: {
                if (at_thinking_start_) {
                    held_.erase(0, leading_space(held_));
                    if (held_.empty()) return;
                    at_thinking_start_ = false;
                }
                const size_t close_at = held_.find(close_);
                if (close_at != std::string::npos) {
                    thinking.append(held_, 0, without_trailing_space(held_.substr(0, close_at)));
                    held_.erase(0, close_at + close_.size());
                    state_ = State::AfterClose;
                    break;
                }
                if (at_end) {  // the reasoning never closed (cut off by a limit): keep it all
                    thinking += held_;
                    held_.clear();
                    return;
                }
                // Trailing whitespace waits: it is dropped if the close tag follows.
                const size_t cut = without_trailing_space(
                    std::string_view(held_).substr(0, settled_before(close_, held_)));
                thinking.append(held_, 0, cut);
                held_.erase(0, cut);
                return;
            }
            case State::AfterClose:
                held_.erase(0, leading_space(held_));
                if (held_.empty()) return;
                state_ = State::Content;
                break;
            case State::Content:
                content += held_;
                held_.clear();
                return;
        }
    }
}

// ---------------------------------------------------------------------------------------------

ToolCallSplitter::ToolCallSplitter(ToolCallFormat format, nlohmann::ordered_json tools)
    : format_(format), tools_(std::move(tools)) {
    switch (format) {
        case ToolCallFormat::None:
            state_ = State::Passthrough;
            break;
        case ToolCallFormat::Hermes:
        case ToolCallFormat::QwenXml:
        case ToolCallFormat::GlmXml:
            open_ = kHermesOpen;
            close_ = kHermesClose;
            break;
        case ToolCallFormat::DeepSeek:
            open_ = kDeepSeekCallsBegin;
            close_ = kDeepSeekCallsEnd;
            break;
        case ToolCallFormat::KimiK2:
            open_ = kKimiSectionBegin;
            close_ = kKimiSectionEnd;
            break;
        case ToolCallFormat::Harmony:  // ReplyParser hands the whole reply to HarmonySplitter
            state_ = State::Passthrough;
            break;
        case ToolCallFormat::Llama3Json:
            open_ = kPythonTag;
            break;
        case ToolCallFormat::MistralToolCalls:
            open_ = kMistralCalls;
            break;
    }
}

void ToolCallSplitter::feed(std::string_view text, bool at_end, std::string& content,
                            std::vector<ToolCall>& calls) {
    held_.append(text);
    for (;;) {
        switch (state_) {
            case State::Text:
                if (!text_state(at_end, content)) return;
                break;
            case State::Block:
                if (!block_state(at_end, content, calls)) return;
                break;
            case State::Passthrough:
                content += held_;
                held_.clear();
                return;
        }
    }
}

bool ToolCallSplitter::text_state(bool at_end, std::string& content) {
    if (format_ == ToolCallFormat::Llama3Json) {
        // Only a reply that is a call from its first character is one.
        const std::string_view rest = std::string_view(held_).substr(leading_space(held_));
        if (rest.starts_with('{') || rest.starts_with(open_)) {
            state_ = State::Block;
        } else if (!at_end && std::string_view(open_).starts_with(rest)) {
            return false;  // only whitespace or a piece of <|python_tag|> so far
        } else {
            state_ = State::Passthrough;
        }
        return true;
    }
    if (after_call_) {
        held_.erase(0, leading_space(held_));
        if (held_.empty()) return false;
        after_call_ = false;
    }
    const size_t open_at = held_.find(open_);
    if (open_at != std::string::npos) {
        content.append(held_, 0, open_at);
        held_.erase(0, open_at);
        state_ = State::Block;
        return true;
    }
    const size_t cut = at_end ? held_.size() : settled_before(open_, held_);
    content.append(held_, 0, cut);
    held_.erase(0, cut);
    return false;
}

bool ToolCallSplitter::block_state(bool at_end, std::string& content,
                                   std::vector<ToolCall>& calls) {
    if (close_.empty()) {  // the calls run to the end of the reply
        if (!at_end) return false;
        const auto decoded = format_ == ToolCallFormat::Llama3Json ? parse_llama3_calls(held_)
                                                                   : parse_mistral_calls(held_);
        if (decoded) {
            calls.insert(calls.end(), decoded->begin(), decoded->end());
        } else {
            content += held_;
        }
        held_.clear();
        return false;
    }
    const size_t close_at = held_.find(close_, open_.size());
    if (close_at == std::string::npos) {
        if (at_end) {  // never closed: not a call, unless a section holds complete calls
            const auto decoded = is_section_format()
                                     ? decode_block(std::string_view(held_).substr(open_.size()))
                                     : std::nullopt;
            if (decoded) {
                calls.insert(calls.end(), decoded->begin(), decoded->end());
            } else {
                content += held_;
            }
            held_.clear();
        }
        return false;
    }
    const size_t end = close_at + close_.size();
    const auto decoded =
        decode_block(std::string_view(held_).substr(open_.size(), close_at - open_.size()));
    if (decoded) {
        calls.insert(calls.end(), decoded->begin(), decoded->end());
        after_call_ = true;
    } else {
        content.append(held_, 0, end);  // as Ollama does: unparsable markup is returned as text
    }
    held_.erase(0, end);
    state_ = State::Text;
    return true;
}

std::optional<std::vector<ToolCall>> ToolCallSplitter::decode_block(std::string_view body) const {
    std::optional<ToolCall> call;
    switch (format_) {
        case ToolCallFormat::DeepSeek:
            return parse_deepseek_calls(body);
        case ToolCallFormat::KimiK2:
            return parse_kimi_calls(body);
        case ToolCallFormat::QwenXml:
            call = parse_qwen_xml_call(body, tools_);
            break;
        case ToolCallFormat::GlmXml:
            call = parse_glm_call(body, tools_);
            break;
        default:
            call = parse_hermes_call(body);
            break;
    }
    if (!call) return std::nullopt;
    return std::vector<ToolCall>{std::move(*call)};
}

// ---------------------------------------------------------------------------------------------

ReplyParser::ReplyParser(ReplyFormat format, bool parse_tools, bool separate_thinking,
                         nlohmann::ordered_json tools)
    : split_thinking_(separate_thinking && !format.think_open.empty() &&
                      !format.think_close.empty()),
      split_tools_(parse_tools && format.tools != ToolCallFormat::None),
      thinking_(format.think_open, format.think_close, format.starts_in_thinking),
      tools_(format.tools, std::move(tools)) {
    if (format.tools == ToolCallFormat::Harmony) {
        harmony_.emplace(parse_tools, separate_thinking);
    }
}

ReplyDelta ReplyParser::feed(std::string_view text) {
    return step(text, false);
}

ReplyDelta ReplyParser::finish() {
    return step({}, true);
}

ReplyDelta ReplyParser::step(std::string_view text, bool at_end) {
    // Stage 1: whole characters only; at the end an unfinished one goes out as it is.
    std::string whole = std::exchange(unfinished_char_, {});
    whole.append(text);
    if (!at_end) {
        const size_t tail = utf8::unfinished_tail(whole);
        unfinished_char_ = whole.substr(whole.size() - tail);
        whole.resize(whole.size() - tail);
    }

    ReplyDelta delta;
    if (harmony_) {
        harmony_->feed(whole, at_end, delta);
        return delta;
    }
    std::string content;
    if (split_thinking_) {
        thinking_.feed(whole, at_end, content, delta.thinking);
    } else {
        content = std::move(whole);
    }
    if (split_tools_) {
        tools_.feed(content, at_end, delta.content, delta.tool_calls);
    } else {
        delta.content = std::move(content);
    }
    return delta;
}

}  // namespace strata
