// The JSON matcher: a stack of frames per thread, one frame per open JSON element.
//
// The frames and their fields are described in json_constraint_frames.h. A number or a literal
// that could end and cannot take the next byte is popped and the byte is given to its parent;
// since no JSON value can be followed by a byte that would also extend it, this greedy rule
// loses nothing.
#include "constrain/json_constraint.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "constrain/json_constraint_frames.h"
#include "constrain/json_constraint_schema.h"
#include "util/utf8.h"

namespace strata {

using namespace json_frames;

namespace {

// What a frame did with a byte. Refeed: the frame was replaced or popped; the new top frame
// must look at the same byte.
enum class Step { Reject, Accept, Refeed };

bool is_ws(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(uint8_t c) {
    return c >= '0' && c <= '9';
}
int hex_value(uint8_t c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

Step take_ws(Frame& f, uint8_t c) {
    if (!is_ws(c) || f.ws >= kMaxWhitespace) return Step::Reject;
    ++f.ws;
    return Step::Accept;
}

void finish_top(const JsonGrammar& g, Stack& st) {
    st.pop_back();
    after_child(g, st.back());
}

void push_value(Stack& st, uint32_t node, uint8_t ws = 0) {
    Frame v = make_frame(kValue, node);
    v.ws = ws;
    st.push_back(v);
}

bool step_stack(const JsonGrammar& g, Stack& st, uint8_t c, Threads& forks);

Step start_value(const JsonGrammar& g, Stack& st, uint8_t c, Threads& forks) {
    Frame& f = st.back();
    if (is_ws(c)) return take_ws(f, c);
    const uint32_t id = g.resolve(f.node);
    const JsonNode& n = g.nodes[id];
    switch (n.kind) {
        case JsonNode::Kind::Union: {
            if (n.alternatives.empty()) return Step::Reject;
            // Every alternative but the first goes on as its own thread.
            for (size_t i = 1; i < n.alternatives.size(); ++i) {
                Stack copy = st;
                copy.back().node = n.alternatives[i];
                if (step_stack(g, copy, c, forks)) forks.push_back(std::move(copy));
            }
            f.node = n.alternatives[0];
            return Step::Refeed;
        }
        case JsonNode::Kind::Literals:
            f = make_frame(kLiteral, id);
            f.b = static_cast<uint32_t>(n.literals.size());
            return Step::Refeed;
        case JsonNode::Kind::Alias:
        case JsonNode::Kind::Typed:
            break;
    }
    const bool room = st.size() < kMaxStackDepth;
    if (c == '{' && (n.types & kTypeObject) && room) {
        f = make_frame(kObject, id, kOpen);
        return Step::Accept;
    }
    if (c == '[' && (n.types & kTypeArray) && room) {
        f = make_frame(kArray, id, kArrayOpen);
        return Step::Accept;
    }
    if (c == '"' && (n.types & kTypeString)) {
        f = make_frame(kString, id, kNormal);
        return Step::Accept;
    }
    if ((c == '-' || is_digit(c)) && (n.types & (kTypeInteger | kTypeNumber))) {
        f = make_frame(kNumber, id, kStart);
        f.flags = (n.types & kTypeNumber) ? 0 : 1;
        return Step::Refeed;
    }
    if ((c == 't' || c == 'f') && (n.types & kTypeBoolean)) {
        f = make_frame(kLiteral, g.bool_literals);
        f.b = 2;
        return Step::Refeed;
    }
    if (c == 'n' && (n.types & kTypeNull)) {
        f = make_frame(kLiteral, g.null_literal);
        f.b = 1;
        return Step::Refeed;
    }
    return Step::Reject;
}

Step step_object(const JsonGrammar& g, Stack& st, uint8_t c) {
    Frame& f = st.back();
    const JsonNode& n = g.nodes[f.node];
    switch (f.phase) {
        case kOpen:
        case kNeedKey:
            if (c == '}' && f.phase == kOpen && object_may_close(n, f.a)) {
                finish_top(g, st);
                return Step::Accept;
            }
            if (c != '"') return take_ws(f, c);
            if (n.has_properties) {
                if (f.a >= n.properties.size()) return Step::Reject;
                f.phase = kKey;
                f.b = f.a;
                f.c = 1;  // every key starts with the quote
                return Step::Accept;
            }
            if (n.additional == kNoNode) return Step::Reject;
            f.phase = kKeyString;
            st.push_back(make_frame(kString, g.key_string, kNormal));
            return Step::Accept;
        case kKey: {
            const std::string& matched = n.properties[f.b].key;
            const uint32_t pos = f.c;
            const uint32_t last = last_candidate(n, f.b);
            for (uint32_t k = f.b; k <= last; ++k) {
                const std::string& key = n.properties[k].key;
                if (key.size() <= pos || static_cast<uint8_t>(key[pos]) != c) continue;
                if (key.compare(0, pos, matched, 0, pos) != 0) continue;
                f.b = k;
                f.c = pos + 1;
                if (f.c == key.size()) {
                    f.phase = kColon;
                    f.a = k + 1;
                    f.ws = 0;
                }
                return Step::Accept;
            }
            return Step::Reject;
        }
        case kColon: {
            if (c != ':') return take_ws(f, c);
            f.phase = kMember;
            const uint32_t value = n.has_properties ? n.properties[f.b].node : n.additional;
            push_value(st, value);
            return Step::Accept;
        }
        case kAfterValue:
            if (c == ',' && (!n.has_properties || f.a < n.properties.size())) {
                f.phase = kNeedKey;
                f.ws = 0;
                return Step::Accept;
            }
            if (c == '}' && object_may_close(n, f.a)) {
                finish_top(g, st);
                return Step::Accept;
            }
            return take_ws(f, c);
        default:
            return Step::Reject;
    }
}

Step step_array(const JsonGrammar& g, Stack& st, uint8_t c) {
    Frame& f = st.back();
    const JsonNode& n = g.nodes[f.node];
    if (is_ws(c)) return take_ws(f, c);
    if (c == ']' && f.a >= n.min_items) {
        finish_top(g, st);
        return Step::Accept;
    }
    if (f.phase == kArrayOpen) {
        const uint32_t item = n.item_node(0);
        if (item == kNoNode) return Step::Reject;
        f.phase = kItem;
        push_value(st, item, f.ws);  // whitespace after '[' counts toward the value's gap
        return Step::Refeed;
    }
    if (f.phase == kArrayAfterValue && c == ',') {
        const uint32_t item = n.item_node(f.a);
        if (item == kNoNode) return Step::Reject;
        f.phase = kItem;
        push_value(st, item);
        return Step::Accept;
    }
    return Step::Reject;
}

// Starts one code point if maxLength leaves room for it.
bool count_char(const JsonNode& n, Frame& f) {
    if (f.a >= n.max_length) return false;
    ++f.a;
    return true;
}

Step step_string(const JsonGrammar& g, Stack& st, uint8_t c) {
    Frame& f = st.back();
    const JsonNode& n = g.nodes[f.node];
    switch (f.phase) {
        case kNormal:
            if (c == '"') {
                if (f.a < n.min_length) return Step::Reject;
                finish_top(g, st);
                return Step::Accept;
            }
            if (c < 0x20 || !count_char(n, f)) return Step::Reject;
            if (c == '\\') {
                f.phase = kEscape;
            } else if (c >= 0x80) {
                // UTF-8 lead byte: continuation bytes left, and the range of the next one
                // (narrower after E0, ED, F0, F4 to exclude overlongs, surrogates, > U+10FFFF).
                const uint32_t len = utf8::sequence_length(c);
                if (len < 2) return Step::Reject;
                uint8_t lo = 0, hi = 0;
                utf8::second_byte_range(c, lo, hi);
                const uint32_t left = len - 1;
                f.phase = kUtf8;
                f.b = left | uint32_t(lo) << 8 | uint32_t(hi) << 16;
            }
            return Step::Accept;
        case kUtf8: {
            const uint32_t left = f.b & 0xFF, lo = (f.b >> 8) & 0xFF, hi = f.b >> 16;
            if (c < lo || c > hi) return Step::Reject;
            f.b = (left - 1) | 0x80 << 8 | 0xBF << 16;
            if (left == 1) f.phase = kNormal;
            return Step::Accept;
        }
        case kEscape:
            if (c == 'u') {
                f.phase = kUnicode;
                f.b = 0;
                f.flags = 0;
                return Step::Accept;
            }
            if (std::string_view("\"\\/bfnrt").find(static_cast<char>(c)) ==
                std::string_view::npos) {
                return Step::Reject;
            }
            f.phase = kNormal;
            return Step::Accept;
        case kUnicode: {
            const int d = hex_value(c);
            if (d < 0) return Step::Reject;
            const uint32_t digits = (f.b & 0xFF) + 1, value = (f.b >> 8) * 16 + d;
            const bool low = f.flags == 1;
            // Surrogates must pair up (parsers such as nlohmann reject lone ones): a low one
            // only right after a high one, and a high one must be followed by a low one.
            if (low && ((digits == 1 && value != 0xD) || (digits == 2 && value < 0xDC))) {
                return Step::Reject;
            }
            if (!low && digits == 2 && value >= 0xDC && value <= 0xDF) return Step::Reject;
            f.b = digits | value << 8;
            if (digits == 4) {
                const bool high = !low && value >= 0xD800 && value <= 0xDBFF;
                f.phase = high ? kSurrogateBackslash : kNormal;
                f.flags = 0;
            }
            return Step::Accept;
        }
        case kSurrogateBackslash:
            if (c != '\\') return Step::Reject;
            f.phase = kSurrogateU;
            return Step::Accept;
        case kSurrogateU:
            if (c != 'u') return Step::Reject;
            f.phase = kUnicode;
            f.b = 0;
            f.flags = 1;
            return Step::Accept;
        default:
            return Step::Reject;
    }
}

Step step_number(const JsonGrammar& g, Stack& st, uint8_t c) {
    Frame& f = st.back();
    const bool integer_only = f.flags == 1;
    auto go = [&](uint8_t phase, uint32_t digits) {
        f.phase = phase;
        f.a = digits;
        return Step::Accept;
    };
    const bool digit = is_digit(c);
    switch (f.phase) {
        case kStart:
            if (c == '-') return go(kMinus, 0);
            [[fallthrough]];
        case kMinus:
            if (c == '0') return go(kZero, 1);
            if (digit) return go(kInt, 1);
            return Step::Reject;
        case kInt:
            if (digit && f.a < kMaxIntDigits) return go(kInt, f.a + 1);
            break;
        case kDot:
            if (digit) return go(kFrac, 1);
            return Step::Reject;
        case kFrac:
            if (digit && f.a < kMaxFracDigits) return go(kFrac, f.a + 1);
            break;
        case kExp:
            if (c == '+' || c == '-') return go(kExpSign, 0);
            [[fallthrough]];
        case kExpSign:
            if (digit) return go(kExpDigits, 1);
            return Step::Reject;
        case kExpDigits:
            if (digit && f.a < kMaxExpDigits) return go(kExpDigits, f.a + 1);
            break;
        default:
            break;  // kZero: a digit after a leading zero is never allowed
    }
    if (!integer_only && c == '.' && (f.phase == kZero || f.phase == kInt)) return go(kDot, 0);
    if (!integer_only && (c == 'e' || c == 'E') &&
        (f.phase == kZero || f.phase == kInt || f.phase == kFrac)) {
        return go(kExp, 0);
    }
    if (!number_may_end(f.phase)) return Step::Reject;
    finish_top(g, st);
    return Step::Refeed;
}

Step step_literal(const JsonGrammar& g, Stack& st, uint8_t c) {
    Frame& f = st.back();
    const std::vector<std::string>& lits = g.nodes[f.node].literals;
    const uint32_t pos = f.c;
    const bool may_end = lits[f.a].size() == pos;  // the shortest sorts first
    auto first = lits.begin() + f.a + (may_end ? 1 : 0), last = lits.begin() + f.b;
    auto byte_at = [pos](const std::string& s) { return static_cast<uint8_t>(s[pos]); };
    auto lo =
        std::partition_point(first, last, [&](const std::string& s) { return byte_at(s) < c; });
    auto hi = std::partition_point(lo, last, [&](const std::string& s) { return byte_at(s) == c; });
    if (lo == hi) {
        if (!may_end) return Step::Reject;
        finish_top(g, st);
        return Step::Refeed;
    }
    f.a = static_cast<uint32_t>(lo - lits.begin());
    f.b = static_cast<uint32_t>(hi - lits.begin());
    f.c = pos + 1;
    // Done as soon as nothing could follow, so complete() turns true without a lookahead byte.
    if (f.b - f.a == 1 && lits[f.a].size() == f.c) finish_top(g, st);
    return Step::Accept;
}

Step step_root(const JsonGrammar& g, Stack& st, uint8_t c) {
    Frame& f = st.back();
    const std::string& text = f.phase == kPrefix ? g.prefix : g.suffix;
    if ((f.phase != kPrefix && f.phase != kSuffix) || static_cast<uint8_t>(text[f.a]) != c) {
        return Step::Reject;
    }
    if (++f.a < text.size()) return Step::Accept;
    if (f.phase == kSuffix) {
        f.phase = kDone;
    } else {
        f.phase = kInValue;
        push_value(st, g.root);
    }
    return Step::Accept;
}

bool step_stack(const JsonGrammar& g, Stack& st, uint8_t c, Threads& forks) {
    for (;;) {
        Step s = Step::Reject;
        switch (st.back().kind) {
            case kRoot:
                s = step_root(g, st, c);
                break;
            case kValue:
                s = start_value(g, st, c, forks);
                break;
            case kObject:
                s = step_object(g, st, c);
                break;
            case kArray:
                s = step_array(g, st, c);
                break;
            case kString:
                s = step_string(g, st, c);
                break;
            case kNumber:
                s = step_number(g, st, c);
                break;
            case kLiteral:
                s = step_literal(g, st, c);
                break;
        }
        if (s != Step::Refeed) return s == Step::Accept;
    }
}

bool stack_can_end(const JsonGrammar& g, const Stack& st) {
    const Frame& top = st.back();
    if (top.kind == kRoot) return top.phase == kDone;
    if (st.size() != 2 || !g.suffix.empty()) return false;
    if (top.kind == kNumber) return number_may_end(top.phase);
    return top.kind == kLiteral && g.nodes[top.node].literals[top.a].size() == top.c;
}

}  // namespace

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar)
    : grammar_(std::move(grammar)) {
    Stack st{make_frame(kRoot, kNoNode, grammar_->prefix.empty() ? kInValue : kPrefix)};
    if (grammar_->prefix.empty()) push_value(st, grammar_->root);
    threads_.push_back(std::move(st));
}

JsonConstraint JsonConstraint::any_object() {
    auto r = from_schema(nlohmann::ordered_json{{"type", "object"}});
    assert(r.ok());
    return std::move(r).value();
}

Result<JsonConstraint> JsonConstraint::from_schema(const nlohmann::ordered_json& schema) {
    return wrapped("", schema, "");
}

Result<JsonConstraint> JsonConstraint::wrapped(std::string prefix,
                                               const nlohmann::ordered_json& schema,
                                               std::string suffix) {
    STRATA_ASSIGN(std::shared_ptr<JsonGrammar> g, compile_json_schema(schema));
    g->prefix = std::move(prefix);
    g->suffix = std::move(suffix);
    return JsonConstraint(std::move(g));
}

bool JsonConstraint::step(const JsonGrammar& g, Threads& threads, uint8_t byte) {
    thread_local Threads forks;
    forks.clear();
    size_t alive = 0;
    for (size_t i = 0; i < threads.size(); ++i) {
        if (!step_stack(g, threads[i], byte, forks)) continue;
        if (alive != i) std::swap(threads[alive], threads[i]);
        ++alive;
    }
    if (alive == 0 && forks.empty()) return false;
    if (alive == threads.size() && forks.empty()) return true;  // the common case
    threads.resize(alive);
    for (Stack& s : forks) threads.push_back(std::move(s));
    // Alternatives that have become the same stack need following only once; past the cap,
    // later alternatives are dropped (what remains still only produces valid output).
    for (size_t i = 1; i < threads.size();) {
        const bool seen = std::find(threads.begin(), threads.begin() + static_cast<long>(i),
                                    threads[i]) != threads.begin() + static_cast<long>(i);
        if (seen || i >= kMaxThreads) {
            threads.erase(threads.begin() + static_cast<long>(i));
        } else {
            ++i;
        }
    }
    return true;
}

bool JsonConstraint::advance(std::string_view bytes) {
    Threads next = threads_;
    for (char ch : bytes) {
        if (!step(*grammar_, next, static_cast<uint8_t>(ch))) return false;
    }
    threads_ = std::move(next);
    return true;
}

bool JsonConstraint::allows(std::string_view bytes) const {
    Threads next = threads_;
    for (char ch : bytes) {
        if (!step(*grammar_, next, static_cast<uint8_t>(ch))) return false;
    }
    return true;
}

int64_t JsonConstraint::plain_string_room() const {
    // With several alternatives alive, plain text is accepted if any of them has room for it;
    // a thread elsewhere (an enum literal, say) may accept other text, so then -1.
    int64_t room = -1;
    for (const Stack& st : threads_) {
        const Frame& top = st.back();
        if (top.kind != kString || top.phase != kNormal) return -1;
        room = std::max(room, int64_t{grammar_->nodes[top.node].max_length} - top.a);
    }
    return room;
}

bool JsonConstraint::complete() const {
    return std::any_of(threads_.begin(), threads_.end(), [](const Stack& st) {
        return st.back().kind == kRoot && st.back().phase == kDone;
    });
}

bool JsonConstraint::can_end() const {
    return std::any_of(threads_.begin(), threads_.end(),
                       [&](const Stack& st) { return stack_can_end(*grammar_, st); });
}

}  // namespace strata
