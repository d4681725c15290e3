// JsonConstraint::shortest_completion: each frame, from the top of the stack down, writes what
// it still needs once the frame above it has finished; values not started yet are written as
// the grammar's shortest text for their node.
#include <algorithm>
#include <string>

#include "constrain/json_constraint_frames.h"

namespace strata {

using namespace json_frames;

namespace {

// "," + key + ":" + value for each required property from `from` on, then '}'.
void append_object_tail(const JsonGrammar& g, const JsonNode& n, uint32_t from, bool first,
                        std::string& out) {
    for (uint32_t k = from; k < n.properties.size(); ++k) {
        const JsonProperty& p = n.properties[k];
        if (!p.required) continue;
        if (!first) out += ',';
        first = false;
        out += p.key;
        out += ':';
        g.append_min_text(p.node, out);
    }
    out += '}';
}

uint64_t object_tail_size(const JsonGrammar& g, const JsonNode& n, uint32_t from) {
    uint64_t size = 1;
    for (uint32_t k = from; k < n.properties.size(); ++k) {
        const JsonProperty& p = n.properties[k];
        if (p.required) size += 2 + p.key.size() + g.nodes[p.node].min_size;
    }
    return size;
}

// Finishes an object whose key is being matched (key bytes `pos` of candidate `from` seen), or,
// with pos == 0, one that needs a member next: the cheapest candidate key, then the rest.
void append_cheapest_member(const JsonGrammar& g, const JsonNode& n, uint32_t from, uint32_t pos,
                            std::string& out) {
    const std::string& matched = n.properties[from].key;
    uint32_t best = from;
    uint64_t best_size = UINT64_MAX;
    for (uint32_t k = from; k <= last_candidate(n, from); ++k) {
        const JsonProperty& p = n.properties[k];
        if (p.key.compare(0, pos, matched, 0, pos) != 0) continue;
        const uint64_t size =
            p.key.size() + 1 + g.nodes[p.node].min_size + object_tail_size(g, n, k + 1);
        if (size < best_size) best = k, best_size = size;
    }
    out.append(n.properties[best].key, pos);
    out += ':';
    g.append_min_text(n.properties[best].node, out);
    append_object_tail(g, n, best + 1, false, out);
}

void append_object_completion(const JsonGrammar& g, const Frame& f, std::string& out) {
    const JsonNode& n = g.nodes[f.node];
    if (!n.has_properties) {
        if (f.phase == kNeedKey) out += "\"\"";
        if (f.phase == kNeedKey || f.phase == kColon) {
            out += ':';
            g.append_min_text(n.additional, out);
        }
        out += '}';
        return;
    }
    switch (f.phase) {
        case kOpen:
            append_object_tail(g, n, f.a, true, out);
            break;
        case kNeedKey:
            append_cheapest_member(g, n, f.a, 0, out);
            break;
        case kKey:
            append_cheapest_member(g, n, f.b, f.c, out);
            break;
        case kColon:
            out += ':';
            g.append_min_text(n.properties[f.b].node, out);
            append_object_tail(g, n, f.a, false, out);
            break;
        default:
            append_object_tail(g, n, f.a, false, out);
            break;
    }
}

void append_string_completion(const JsonGrammar& g, const Frame& f, std::string& out) {
    switch (f.phase) {
        case kEscape:
            out += 'n';
            break;
        case kUnicode: {
            const uint32_t digits = f.b & 0xFF;
            if (f.flags == 1) {
                out.append(std::string_view("DC00").substr(digits));
                break;
            }
            out.append(4 - digits, '0');
            const uint32_t value = (f.b >> 8) << (4 * (4 - digits));
            if (value >= 0xD800 && value <= 0xDBFF) out += "\\uDC00";
            break;
        }
        case kSurrogateBackslash:
            out += "\\uDC00";
            break;
        case kSurrogateU:
            out += "uDC00";
            break;
        case kUtf8:
            out += static_cast<char>((f.b >> 8) & 0xFF);
            out.append((f.b & 0xFF) - 1, static_cast<char>(0x80));
            break;
        default:
            break;
    }
    const uint32_t min_length = g.nodes[f.node].min_length;
    if (f.a < min_length) out.append(min_length - f.a, 'a');
    out += '"';
}

void append_frame_completion(const JsonGrammar& g, const Frame& f, std::string& out) {
    switch (f.kind) {
        case kRoot:
            if (f.phase == kPrefix) {
                out.append(g.prefix, f.a);
                g.append_min_text(g.root, out);
                out += g.suffix;
            } else if (f.phase == kSuffix) {
                out.append(g.suffix, f.a);
            }
            break;
        case kValue:
            g.append_min_text(f.node, out);
            break;
        case kObject:
            append_object_completion(g, f, out);
            break;
        case kArray: {
            const JsonNode& n = g.nodes[f.node];
            for (uint32_t k = f.a; k < n.min_items; ++k) {
                if (k > 0) out += ',';
                g.append_min_text(n.item_node(k), out);
            }
            out += ']';
            break;
        }
        case kString:
            append_string_completion(g, f, out);
            break;
        case kNumber:
            if (!number_may_end(f.phase)) out += '0';
            break;
        case kLiteral: {
            const auto& lits = g.nodes[f.node].literals;
            const std::string* best = &lits[f.a];
            for (uint32_t i = f.a; i < f.b; ++i) {
                if (lits[i].size() < best->size()) best = &lits[i];
            }
            out.append(*best, f.c);
            break;
        }
        default:
            break;
    }
}

std::string stack_completion(const JsonGrammar& g, const Stack& st) {
    std::string out;
    for (size_t i = st.size(); i-- > 0;) {
        Frame f = st[i];
        if (i + 1 < st.size()) after_child(g, f);  // as if the frame above had finished
        append_frame_completion(g, f, out);
    }
    return out;
}

}  // namespace

std::string JsonConstraint::shortest_completion() const {
    std::string best;
    bool first = true;
    for (const Stack& st : threads_) {
        std::string s = stack_completion(*grammar_, st);
        if (first || s.size() < best.size()) best = std::move(s);
        first = false;
    }
    return best;
}

}  // namespace strata
