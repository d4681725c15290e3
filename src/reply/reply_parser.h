// Splits a streamed reply into what the user sees (content), the model's reasoning (thinking)
// and complete tool calls, as the server's chat endpoints must return them.
//
// Text arrives a piece at a time, and a tag can be cut across pieces ("<tool" + "_call>"), so
// text that may still begin a tag is held back until the next piece settles it, like a stop
// string. Three stages run in turn, each on whole UTF-8 characters:
//   1. a character joiner holds back a character the piece cut in two;
//   2. ThinkingSplitter takes think_open..think_close at the start of the reply as thinking;
//   3. ToolCallSplitter cuts the format's call markup out of the rest and decodes the calls.
// The outcome does not depend on how the text was cut into pieces, tool-call markup never
// reaches content unless it fails to parse (then, as Ollama does, the text comes back verbatim),
// and every returned piece is valid UTF-8 when the input as a whole is.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reply/reply_calls.h"
#include "reply/reply_format.h"

namespace strata {

struct ReplyDelta {
    std::string content, thinking;
    std::vector<ToolCall> tool_calls;
};

// Reasoning at the start of the reply. Whitespace right after think_open, before think_close and
// after think_close is dropped (templates put "\n" around the tags; it is not part of the text).
class ThinkingSplitter {
  public:
    ThinkingSplitter(std::string open, std::string close, bool starts_inside);
    // Appends what is settled to `content` and `thinking`; at_end settles everything.
    void feed(std::string_view text, bool at_end, std::string& content, std::string& thinking);

  private:
    enum class State { BeforeOpen, Thinking, AfterClose, Content };
    std::string open_, close_;
    bool starts_inside_;
    State state_ = State::BeforeOpen;
    bool at_thinking_start_ = true;  // still dropping whitespace after the open tag
    std::string held_;
};

// Tool-call markup in the content stream, per format:
//   Hermes, QwenXml, GlmXml: each <tool_call>..</tool_call> block becomes a call as soon as it
//   closes.
//   DeepSeek, KimiK2: each section of calls becomes calls as soon as it closes; a section still
//   open when the reply ends counts when every call in it is complete (the model may stop right
//   after the last call).
//   MistralToolCalls: from the first [TOOL_CALLS] on, the rest of the reply is the calls.
//   Llama3Json: a reply that begins with '{' or <|python_tag|> is the calls.
// The last two are decided at the end of the reply, when the text is known to be complete.
class ToolCallSplitter {
  public:
    // tools: the request's tools (QwenXml reads the parameter types from them), or null.
    explicit ToolCallSplitter(ToolCallFormat format, nlohmann::ordered_json tools = nullptr);
    void feed(std::string_view text, bool at_end, std::string& content,
              std::vector<ToolCall>& calls);

  private:
    enum class State { Text, Block, Passthrough };
    // Each returns true when it moved to another state, which then looks at the held text.
    bool text_state(bool at_end, std::string& content);
    bool block_state(bool at_end, std::string& content, std::vector<ToolCall>& calls);
    // The calls in the text between open_ and close_, or nothing when it is not calls.
    std::optional<std::vector<ToolCall>> decode_block(std::string_view body) const;
    bool is_section_format() const {
        return format_ == ToolCallFormat::DeepSeek || format_ == ToolCallFormat::KimiK2;
    }

    ToolCallFormat format_;
    nlohmann::ordered_json tools_;
    std::string open_, close_;  // close_ empty: the block runs to the end of the reply
    State state_ = State::Text;
    bool after_call_ = false;  // dropping the whitespace between and after calls
    std::string held_;
};

// A Harmony (gpt-oss) reply: a sequence of messages, each a header up to <|message|> and a body
// up to <|end|> (or <|call|> / <|return|>, which end generation and usually never arrive as
// text). The prompt ends with "<|start|>assistant", so the first header is just
// "<|channel|>NAME"; later ones repeat "<|start|>assistant". Per message:
//   - channel analysis: thinking (dropped when thinking is off: the model cannot be told not to
//     reason, and the reasoning is not the answer);
//   - a recipient "to=functions.NAME" (in the header, before or after the channel): a tool
//     call, its body the JSON arguments, decoded when the message ends;
//   - any other channel (final, commentary preambles) and text with no header: content.
// A call that does not decode, or any header that never reaches <|message|>, is given back as
// content, verbatim.
class HarmonySplitter {
  public:
    HarmonySplitter(bool parse_tools, bool keep_thinking);
    void feed(std::string_view text, bool at_end, ReplyDelta& out);

  private:
    enum class State { Header, Body };
    enum class Sink { Content, Thinking, Call, Drop };
    // Each returns true when it moved to another state, which then looks at the held text.
    bool header_state(bool at_end, ReplyDelta& out);
    bool body_state(bool at_end, ReplyDelta& out);
    void end_message(ReplyDelta& out);

    bool parse_tools_, keep_thinking_;
    State state_ = State::Header;
    Sink sink_ = Sink::Content;
    std::string header_;     // the current message's header, for a call given back as text
    std::string recipient_;  // "functions.NAME" for a call
    std::string body_;       // a call's body so far
    std::string held_;
};

class ReplyParser {
  public:
    // parse_tools: the request had tools (otherwise call markup is plain content).
    // separate_thinking: thinking is on (otherwise the reasoning stays in content, verbatim).
    // tools: the request's tools, which some formats read parameter types from (may be null).
    ReplyParser(ReplyFormat format, bool parse_tools, bool separate_thinking,
                nlohmann::ordered_json tools = nullptr);

    ReplyDelta feed(std::string_view text);  // what is now safe to emit
    // End of generation: everything held back. A tool-call block that never closed or does not
    // parse goes out as content.
    ReplyDelta finish();

  private:
    ReplyDelta step(std::string_view text, bool at_end);

    bool split_thinking_, split_tools_;
    std::string unfinished_char_;
    ThinkingSplitter thinking_;
    ToolCallSplitter tools_;
    std::optional<HarmonySplitter> harmony_;  // set for ToolCallFormat::Harmony
};

}  // namespace strata
