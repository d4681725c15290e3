// TokenMask: which tokens of a vocabulary a JsonConstraint accepts, found by walking a byte trie
// of the token strings depth-first while advancing a copy of the automaton one byte per edge.
// A rejected edge rules out its whole subtree at once, and since tokens are numbered in trie
// order that subtree is one contiguous range of `order`.
//
// Inside a JSON string nearly every token is allowed, so the walk would visit nearly the whole
// trie. Tokens that are plain string text (complete UTF-8, no quote, backslash or control byte)
// are accepted there whenever maxLength leaves room for their characters, so only the trie of
// the other tokens is walked.
#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>

#include "constrain/json_constraint.h"
#include "constrain/json_constraint_schema.h"
#include "util/utf8.h"

namespace strata {

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Whether the bytes are whole UTF-8 characters that may appear unescaped inside a JSON string;
// if so, code_points is how many.
bool plain_string_text(std::string_view s, uint32_t& code_points) {
    code_points = 0;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<uint8_t>(s[i]);
        if (c < 0x20 || c == '"' || c == '\\') return false;
        const utf8::Decoded d = utf8::decode(s, i);
        if (!d.valid) return false;
        i += d.len;
        ++code_points;
    }
    return true;
}

}  // namespace

void TokenMask::Trie::build(const std::vector<std::string>& bytes, std::vector<uint32_t> ids) {
    std::sort(ids.begin(), ids.end(), [&](uint32_t x, uint32_t y) {
        return bytes[x] != bytes[y] ? bytes[x] < bytes[y] : x < y;
    });
    order = std::move(ids);
    nodes.assign(1, TrieNode{});
    depth = 0;
    for (uint32_t id : order) depth = std::max(depth, bytes[id].size());
    // Node `index` covers order[l, r), all sharing their first d bytes.
    auto fill = [&](auto& self, uint32_t index, uint32_t l, uint32_t r, size_t d) -> void {
        uint32_t m = l;
        while (m < r && bytes[order[m]].size() == d) ++m;
        nodes[index].tokens_begin = l;
        nodes[index].tokens_end = m;
        nodes[index].subtree_end = r;
        std::vector<std::pair<uint32_t, uint32_t>> groups;  // [begin, end) per next byte
        for (uint32_t i = m; i < r;) {
            uint32_t j = i;
            while (j < r && bytes[order[j]][d] == bytes[order[i]][d]) ++j;
            groups.emplace_back(i, j);
            i = j;
        }
        const auto first = static_cast<uint32_t>(nodes.size());
        nodes[index].first_child = first;
        nodes[index].child_count = static_cast<uint32_t>(groups.size());
        nodes.resize(nodes.size() + groups.size());
        for (size_t k = 0; k < groups.size(); ++k) {
            nodes[first + k].byte = static_cast<uint8_t>(bytes[order[groups[k].first]][d]);
            self(self, first + static_cast<uint32_t>(k), groups[k].first, groups[k].second, d + 1);
        }
    };
    fill(fill, 0, 0, static_cast<uint32_t>(order.size()), 0);
}

TokenMask::TokenMask(std::vector<std::string> token_bytes, std::vector<bool> is_end_of_generation)
    : vocab_size_(token_bytes.size()) {
    assert(is_end_of_generation.size() == token_bytes.size());
    std::vector<uint32_t> all, not_plain;
    for (uint32_t id = 0; id < token_bytes.size(); ++id) {
        if (is_end_of_generation[id]) {
            end_tokens_.push_back(id);
        } else if (token_bytes[id].empty()) {
            empty_tokens_.push_back(id);
        } else {
            all.push_back(id);
            uint32_t code_points = 0;
            if (plain_string_text(token_bytes[id], code_points)) {
                plain_by_length_.emplace_back(code_points, id);
            } else {
                not_plain.push_back(id);
            }
        }
    }
    std::sort(plain_by_length_.begin(), plain_by_length_.end(), std::greater<>());
    all_.build(token_bytes, std::move(all));
    not_plain_.build(token_bytes, std::move(not_plain));
}

void TokenMask::walk(const Trie& trie, const JsonGrammar& g, uint32_t node, size_t depth,
                     std::vector<JsonConstraint::Threads>& states, std::span<float> logits) const {
    const TrieNode& parent = trie.nodes[node];
    for (uint32_t i = 0; i < parent.child_count; ++i) {
        const uint32_t child_index = parent.first_child + i;
        const TrieNode& child = trie.nodes[child_index];
        JsonConstraint::Threads& state = states[depth + 1];
        state = states[depth];
        if (!JsonConstraint::step(g, state, child.byte)) {
            for (uint32_t k = child.tokens_begin; k < child.subtree_end; ++k) {
                logits[trie.order[k]] = kMasked;
            }
            continue;
        }
        if (child.child_count > 0) walk(trie, g, child_index, depth + 1, states, logits);
    }
}

void TokenMask::apply(const JsonConstraint& c, std::span<float> logits, bool closing) const {
    assert(logits.size() >= vocab_size_);
    // Logits past the vocabulary (padding rows of the output matrix) are never valid tokens.
    std::fill(logits.begin() + static_cast<long>(vocab_size_), logits.end(), kMasked);
    if (closing) return apply_closing(c, logits, c.shortest_completion(), -1);

    const JsonGrammar& g = *c.grammar_;
    const int64_t room = c.plain_string_room();
    const Trie& trie = room >= 0 ? not_plain_ : all_;

    // One automaton state per trie depth, kept per thread so that apply() allocates nothing
    // once warm and is safe to call concurrently.
    thread_local std::vector<JsonConstraint::Threads> states;
    if (states.size() < trie.depth + 1) states.resize(trie.depth + 1);
    states[0] = c.threads_;
    walk(trie, g, 0, 0, states, logits);

    if (room >= 0) {
        // Plain text tokens are accepted as long as maxLength leaves room for their characters.
        for (auto [length, id] : plain_by_length_) {
            if (length <= room) break;
            logits[id] = kMasked;
        }
    }
    for (uint32_t id : empty_tokens_) logits[id] = kMasked;
    if (!c.can_end()) {
        for (uint32_t id : end_tokens_) logits[id] = kMasked;
    }
}

template <typename F>
void TokenMask::along(std::string_view text, F&& f) const {
    uint32_t node = 0;
    for (char ch : text) {
        const TrieNode& parent = all_.nodes[node];
        const auto first = all_.nodes.begin() + parent.first_child;
        const auto last = first + parent.child_count;
        const auto byte = static_cast<uint8_t>(ch);
        const auto it = std::lower_bound(first, last, byte,
                                         [](const TrieNode& n, uint8_t b) { return n.byte < b; });
        if (it == last || it->byte != byte) return;
        node = static_cast<uint32_t>(it - all_.nodes.begin());
        f(*it);
    }
}

std::vector<uint32_t> TokenMask::spelling_costs(std::string_view text) const {
    // Right to left: the cost at i is one token plus the cheapest rest after any token that
    // starts text[i..]; the walk down the trie is at most as deep as the longest token.
    std::vector<uint32_t> cost(text.size() + 1, kCannotSpell);
    cost[text.size()] = 0;
    for (size_t i = text.size(); i-- > 0;) {
        size_t depth = 0;
        along(text.substr(i), [&](const TrieNode& n) {
            ++depth;
            const uint32_t rest = cost[i + depth];
            if (n.tokens_end > n.tokens_begin && rest != kCannotSpell) {
                cost[i] = std::min(cost[i], rest + 1);
            }
        });
    }
    return cost;
}

void TokenMask::apply_closing(const JsonConstraint& c, std::span<float> logits,
                              std::string_view plan, int64_t tokens_left) const {
    assert(logits.size() >= vocab_size_);
    std::fill(logits.begin() + static_cast<long>(vocab_size_), logits.end(), kMasked);
    std::vector<uint32_t> cost;
    int64_t rest_allowed = INT64_MAX;
    if (tokens_left >= 0) {
        cost = spelling_costs(plan);
        // When even the cheapest way does not fit, it is still the one that comes closest; a
        // plan the vocabulary cannot spell to the end is followed as far as it goes.
        if (cost[0] == kCannotSpell) {
            cost.clear();
        } else {
            rest_allowed = std::max<int64_t>(tokens_left, cost[0]) - 1;
        }
    }
    // The tokens along the path of the plan through the trie, with their logits.
    thread_local std::vector<std::pair<uint32_t, float>> kept;
    kept.clear();
    size_t depth = 0;
    along(plan, [&](const TrieNode& n) {
        ++depth;
        if (!cost.empty() && (cost[depth] == kCannotSpell || cost[depth] > rest_allowed)) return;
        for (uint32_t k = n.tokens_begin; k < n.tokens_end; ++k) {
            kept.emplace_back(all_.order[k], logits[all_.order[k]]);
        }
    });
    if (c.can_end()) {
        for (uint32_t id : end_tokens_) kept.emplace_back(id, logits[id]);
    }
    std::fill(logits.begin(), logits.begin() + static_cast<long>(vocab_size_), kMasked);
    for (auto [id, value] : kept) logits[id] = value;
}

}  // namespace strata
