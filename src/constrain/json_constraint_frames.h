// Parse stack frames of JsonConstraint, shared by the matcher (json_constraint.cpp) and the
// completion writer (json_constraint_completion.cpp).
//
// Frame fields by kind (node is a JsonGrammar node index):
//   Root    phase Prefix/InValue/Suffix/Done; a = bytes of prefix or suffix matched
//   Value   a value of `node` is expected next (only whitespace seen so far)
//   Object  phase Open ('{' seen), NeedKey (',' seen), Key (inside a listed key), KeyString
//           (inside a free key, a String frame above), Colon, Member (value frame above),
//           AfterValue; a = index of the next listed property that may come; b = the property
//           being matched (Key: the lowest candidate matching so far); c = key bytes matched
//   Array   phase Open, Item (value frame above), AfterValue; a = items finished
//   String  phase Normal/Escape/Unicode/SurrogateBackslash/SurrogateU/Utf8; a = code points so
//           far; b = Unicode: hex digits seen | value << 8, Utf8: bytes left | next byte's
//           lowest << 8 | highest << 16; flags = 1 while the \u is a low surrogate
//   Number  phase (see NumberPhase); a = digits in the current part; flags = 1: integer only
//   Literal one of node.literals; [a, b) = the literals still possible (sorted, so they share
//           the c bytes matched so far)
#pragma once

#include <cassert>
#include <cstdint>

#include "constrain/json_constraint.h"
#include "constrain/json_constraint_schema.h"

namespace strata::json_frames {

using Frame = JsonConstraint::Frame;
using Stack = JsonConstraint::Stack;
using Threads = JsonConstraint::Threads;

constexpr uint8_t kMaxWhitespace = 2;
constexpr size_t kMaxStackDepth = 128;
constexpr size_t kMaxThreads = 16;
constexpr uint32_t kMaxIntDigits = 16, kMaxFracDigits = 16;
// Two exponent digits keep every number inside the range of a double (parsers reject 1e999).
constexpr uint32_t kMaxExpDigits = 2;

enum FrameKind : uint8_t { kRoot, kValue, kObject, kArray, kString, kNumber, kLiteral };
enum RootPhase : uint8_t { kPrefix, kInValue, kSuffix, kDone };
enum ObjectPhase : uint8_t { kOpen, kNeedKey, kKey, kKeyString, kColon, kMember, kAfterValue };
enum ArrayPhase : uint8_t { kArrayOpen, kItem, kArrayAfterValue };
enum StringPhase : uint8_t { kNormal, kEscape, kUnicode, kSurrogateBackslash, kSurrogateU, kUtf8 };
enum NumberPhase : uint8_t { kStart, kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };

inline Frame make_frame(FrameKind kind, uint32_t node, uint8_t phase = 0) {
    return Frame{node, 0, 0, 0, kind, phase, 0, 0};
}

inline bool object_may_close(const JsonNode& n, uint32_t next) {
    return !n.has_properties || n.next_required[next] == n.properties.size();
}

// The last listed property that may come next when the lowest candidate is `from`: a required
// one cannot be skipped.
inline uint32_t last_candidate(const JsonNode& n, uint32_t from) {
    const uint32_t r = n.next_required[from];
    return r < n.properties.size() ? r : static_cast<uint32_t>(n.properties.size() - 1);
}

// Moves a parent frame past its finished child.
inline void after_child(const JsonGrammar& g, Frame& parent) {
    switch (parent.kind) {
        case kRoot:
            parent.phase = g.suffix.empty() ? kDone : kSuffix;
            parent.a = 0;
            break;
        case kObject:
            parent.phase = parent.phase == kKeyString ? kColon : kAfterValue;
            break;
        case kArray:
            ++parent.a;
            parent.phase = kArrayAfterValue;
            break;
        default:
            assert(false && "frame kind has no children");
    }
    parent.ws = 0;
}

inline bool number_may_end(uint8_t phase) {
    return phase == kZero || phase == kInt || phase == kFrac || phase == kExpDigits;
}

}  // namespace strata::json_frames
