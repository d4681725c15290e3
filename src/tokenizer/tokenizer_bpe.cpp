// Byte-level BPE merging (tokenizer.ggml.model = "gpt2").
#include <algorithm>

#include "tokenizer/merge_encoders.h"
#include "util/utf8.h"

namespace strata {

namespace {

// GPT-2's bytes_to_unicode: bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ')
// map to the same code point; the remaining 68 bytes map, in byte order, to U+0100 onwards.
struct ByteUnicodeMap {
    std::array<std::string, 256> utf8;  // byte -> UTF-8 of its character
    std::array<int16_t, 0x144> byte;    // code point -> byte, -1 when not in the map

    ByteUnicodeMap() {
        byte.fill(-1);
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable =
                (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
            utf8::append(utf8[static_cast<size_t>(b)], cp);
            byte[cp] = static_cast<int16_t>(b);
        }
    }
};

const ByteUnicodeMap& byte_unicode_map() {
    static const ByteUnicodeMap map;
    return map;
}

// Heap order: lowest rank on top, then the leftmost pair.
bool lower_priority(const BpeScratch::Pair& a, const BpeScratch::Pair& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t byte) {
    return byte_unicode_map().utf8[byte];
}

int unicode_to_byte(char32_t cp) {
    const ByteUnicodeMap& m = byte_unicode_map();
    return cp < m.byte.size() ? m.byte[cp] : -1;
}

int32_t BpeEncoder::symbol_id(const Vocab& vocab, std::string_view text) const {
    const TokenId id = vocab.find(text);
    if (id != kNoToken) return id;
    const auto it = extra_symbols_.find(text);
    return it == extra_symbols_.end() ? -1 : it->second;
}

BpeEncoder BpeEncoder::build(const Vocab& vocab) {
    BpeEncoder enc;
    enc.n_vocab_ = static_cast<int32_t>(vocab.size());
    auto intern = [&](const std::string& text) {
        const int32_t id = enc.symbol_id(vocab, text);
        if (id >= 0) return id;
        const auto extra = static_cast<int32_t>(enc.n_vocab_ + enc.extra_symbols_.size());
        enc.extra_symbols_.emplace(text, extra);
        return extra;
    };
    const auto& merges = vocab.merges();
    enc.merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [left, right] = merges[rank];
        const int32_t l = intern(left);
        const int32_t r = intern(right);
        const int32_t result = intern(left + right);
        // The first occurrence of a pair keeps its rank, as in the reference.
        enc.merges_.insert_if_absent(l, r, Merge{static_cast<int32_t>(rank), result});
    }
    for (int b = 0; b < 256; ++b) {
        enc.byte_symbols_[static_cast<size_t>(b)] =
            enc.symbol_id(vocab, byte_to_unicode(static_cast<uint8_t>(b)));
    }
    return enc;
}

void BpeEncoder::push_pair(BpeScratch& s, int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return;
    const int32_t l = s.symbols[static_cast<size_t>(left)].id;
    const int32_t r = s.symbols[static_cast<size_t>(right)].id;
    if (l < 0 || r < 0) return;
    const Merge* m = merges_.find(l, r);
    if (!m) return;
    s.queue.push_back({m->rank, left, right, l, r, m->result});
    std::push_heap(s.queue.begin(), s.queue.end(), lower_priority);
}

void BpeEncoder::encode(const Vocab& vocab, std::string_view piece, std::vector<TokenId>& out,
                        BpeScratch& s) const {
    if (piece.empty()) return;
    const ByteUnicodeMap& map = byte_unicode_map();
    s.word.clear();
    for (char c : piece) s.word += map.utf8[static_cast<uint8_t>(c)];

    if (vocab.ignore_merges()) {
        const TokenId whole = vocab.find(s.word);
        if (whole != kNoToken) {
            out.push_back(whole);
            return;
        }
    }

    // One symbol per input byte, i.e. per character of the encoded word.
    s.symbols.clear();
    uint32_t start = 0;
    for (size_t i = 0; i < piece.size(); ++i) {
        const auto b = static_cast<uint8_t>(piece[i]);
        const auto length = static_cast<uint32_t>(map.utf8[b].size());
        const auto index = static_cast<int32_t>(i);
        s.symbols.push_back({byte_symbols_[b], start, length, index - 1, index + 1});
        start += length;
    }
    s.symbols.back().next = -1;

    s.queue.clear();
    for (int32_t i = 1; i < static_cast<int32_t>(s.symbols.size()); ++i) push_pair(s, i - 1, i);

    while (!s.queue.empty()) {
        std::pop_heap(s.queue.begin(), s.queue.end(), lower_priority);
        const BpeScratch::Pair pair = s.queue.back();
        s.queue.pop_back();
        BpeScratch::Symbol& l = s.symbols[static_cast<size_t>(pair.left)];
        BpeScratch::Symbol& r = s.symbols[static_cast<size_t>(pair.right)];
        // Stale when either side has been merged since the pair was queued.
        if (l.length == 0 || r.length == 0 || l.id != pair.left_id || r.id != pair.right_id) {
            continue;
        }
        l.id = pair.result;
        l.length += r.length;
        r.length = 0;
        l.next = r.next;
        if (r.next >= 0) s.symbols[static_cast<size_t>(r.next)].prev = pair.left;
        push_pair(s, l.prev, pair.left);
        push_pair(s, pair.left, l.next);
    }

    for (int32_t i = 0; i != -1; i = s.symbols[static_cast<size_t>(i)].next) {
        const BpeScratch::Symbol& sym = s.symbols[static_cast<size_t>(i)];
        if (sym.id >= 0 && sym.id < n_vocab_) {
            out.push_back(sym.id);
            continue;
        }
        // Not a token: each byte of the encoded text, where a one-byte token exists.
        for (char c : std::string_view(s.word).substr(sym.start, sym.length)) {
            const TokenId id = vocab.find(std::string_view(&c, 1));
            if (id != kNoToken) out.push_back(id);
        }
    }
}

}  // namespace strata
