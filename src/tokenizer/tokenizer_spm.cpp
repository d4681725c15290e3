// SentencePiece-style merging (tokenizer.ggml.model = "llama").
#include <algorithm>
#include <cstdio>

#include "tokenizer/merge_encoders.h"
#include "util/utf8.h"

namespace strata {

namespace {

struct Symbol {
    uint32_t start, length;  // bytes of the text; length 0 once merged into its left neighbour
    int32_t prev, next;
};

struct Pair {
    float score;
    int32_t left, right;
    uint32_t length;  // bytes of the merged text when queued; a different sum means stale
};

// Heap order: highest score on top, then the leftmost pair.
bool lower_priority(const Pair& a, const Pair& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
}

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab) {
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        TokenId id = vocab.find(name);
        if (id == kNoToken) id = vocab.find(std::string(1, static_cast<char>(b)));
        if (id == kNoToken) id = vocab.special().unk;
        byte_tokens_[static_cast<size_t>(b)] = id;
    }
}

void SpmEncoder::encode(const Vocab& vocab, std::string_view text,
                        std::vector<TokenId>& out) const {
    if (text.empty()) return;

    // One symbol per character; an invalid byte is a character of its own.
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const uint32_t len = static_cast<uint8_t>(text[i]) < 0x80 ? 1 : utf8::decode(text, i).len;
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({static_cast<uint32_t>(i), len, index - 1, index + 1});
        i += len;
    }
    symbols.back().next = -1;

    std::vector<Pair> queue;
    auto try_pair = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        const TokenId id = vocab.find(text.substr(l.start, l.length + r.length));
        if (id == kNoToken) return;
        queue.push_back({vocab.token(id).score, left, right, l.length + r.length});
        std::push_heap(queue.begin(), queue.end(), lower_priority);
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_pair(i - 1, i);

    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end(), lower_priority);
        const Pair pair = queue.back();
        queue.pop_back();
        Symbol& l = symbols[static_cast<size_t>(pair.left)];
        Symbol& r = symbols[static_cast<size_t>(pair.right)];
        if (l.length == 0 || r.length == 0 || l.length + r.length != pair.length) continue;

        l.length += r.length;
        r.length = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = pair.left;
        try_pair(l.prev, pair.left);
        try_pair(pair.left, l.next);
    }

    // Every merged symbol is a token (a pair is queued only when it is one); single characters
    // outside the vocabulary fall back to bytes.
    for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        const std::string_view piece = text.substr(s.start, s.length);
        const TokenId id = vocab.find(piece);
        if (id != kNoToken) {
            out.push_back(id);
            continue;
        }
        for (char c : piece) {
            const TokenId byte_id = byte_tokens_[static_cast<uint8_t>(c)];
            if (byte_id != kNoToken) out.push_back(byte_id);
        }
    }
}

}  // namespace strata
