#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "gguf/reader.h"
#include "tokenizer/merge_encoders.h"
#include "tokenizer/pretokenize.h"

namespace strata {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"
// Below this size a text has too few repeated words for a cache of pre-tokens to pay.
constexpr size_t kCacheMinTextBytes = 4096;

// What the reference strips next to lstrip/rstrip tokens: C isspace in the C locale.
bool is_ascii_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

// SentencePiece escaping: every space becomes "▁".
void append_escaped(std::string& out, std::string_view text) {
    for (char c : text) {
        if (c == ' ') {
            out += kSpaceMarker;
        } else {
            out += c;
        }
    }
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::load(const std::string& path) {
    STRATA_ASSIGN(GgufFile file, read_gguf(path));
    return from_gguf(file);
}

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
    STRATA_ASSIGN(Vocab vocab, Vocab::from_gguf(file));
    Tokenizer t;
    t.vocab_ = std::move(vocab);
    if (t.vocab_.kind() == VocabKind::SentencePiece) {
        t.spm_ = std::make_unique<SpmEncoder>(t.vocab_);
    } else {
        STRATA_ASSIGN(PreTokenizer pre, PreTokenizer::create(t.vocab_.pre_tokenizer()));
        t.pre_ = std::make_unique<PreTokenizer>(std::move(pre));
        t.bpe_ = std::make_unique<BpeEncoder>(BpeEncoder::build(t.vocab_));
    }

    t.build_special_trie();
    t.build_pieces();
    return t;
}

// Trie of the special texts; a node keeps the best-ranked token ending there, and the
// best-ranked user-defined one (the only kind matched when parse_special is off).
void Tokenizer::build_special_trie() {
    special_trie_.emplace_back();
    const std::vector<TokenId>& order = vocab_.special_match_order();
    for (size_t rank = 0; rank < order.size(); ++rank) {
        const TokenInfo& info = vocab_.token(order[rank]);
        uint32_t node = 0;
        for (char c : info.text) {
            const auto byte = static_cast<uint8_t>(c);
            auto& children = special_trie_[node].children;
            const auto it = std::find_if(children.begin(), children.end(),
                                         [&](const auto& child) { return child.first == byte; });
            if (it != children.end()) {
                node = it->second;
                continue;
            }
            const auto next = static_cast<uint32_t>(special_trie_.size());
            children.emplace_back(byte, next);
            special_trie_.emplace_back();
            node = next;
        }
        TrieNode& end = special_trie_[node];
        if (end.rank < 0) end.rank = static_cast<int32_t>(rank);
        if (end.user_rank < 0 && info.type == TokenType::UserDefined) {
            end.user_rank = static_cast<int32_t>(rank);
            has_user_defined_ = true;
        }
    }
    for (const auto& [byte, node] : special_trie_[0].children) special_first_byte_[byte] = true;
}

// Same result as llama.cpp's tokenizer_st_partition, which for each special token in turn
// (longest first) splits every remaining stretch of text at its leftmost non-overlapping
// occurrences: here all occurrences are found in one pass over a trie, then taken in that order
// unless they overlap text already claimed.
void Tokenizer::partition_special(std::string_view text, bool parse_special,
                                  std::vector<Fragment>& out) const {
    out.clear();
    if (text.empty()) return;
    if (special_trie_[0].children.empty() || (!parse_special && !has_user_defined_)) {
        out.push_back({kNoToken, 0, text.size()});
        return;
    }

    struct Occurrence {
        int32_t rank;
        size_t offset;
    };
    std::vector<Occurrence> found;
    for (size_t p = 0; p < text.size(); ++p) {
        if (!special_first_byte_[static_cast<uint8_t>(text[p])]) continue;
        uint32_t node = 0;
        for (size_t q = p; q < text.size(); ++q) {
            const auto byte = static_cast<uint8_t>(text[q]);
            const auto& children = special_trie_[node].children;
            const auto it = std::find_if(children.begin(), children.end(),
                                         [&](const auto& child) { return child.first == byte; });
            if (it == children.end()) break;
            node = it->second;
            const TrieNode& n = special_trie_[node];
            const int32_t rank = parse_special ? n.rank : n.user_rank;
            if (rank >= 0) found.push_back({rank, p});
        }
    }
    if (found.empty()) {
        out.push_back({kNoToken, 0, text.size()});
        return;
    }
    std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.offset < b.offset;
    });

    // 0: free text; 1: a chosen special token; 2: whitespace stripped next to one.
    std::vector<uint8_t> claimed(text.size(), 0);
    struct Chosen {
        size_t offset, length;
        TokenId token;
    };
    std::vector<Chosen> chosen;
    const std::vector<TokenId>& order = vocab_.special_match_order();
    for (const Occurrence& o : found) {
        const TokenId id = order[static_cast<size_t>(o.rank)];
        const TokenInfo& info = vocab_.token(id);
        const size_t end = o.offset + info.text.size();
        if (std::any_of(claimed.begin() + static_cast<ptrdiff_t>(o.offset),
                        claimed.begin() + static_cast<ptrdiff_t>(end),
                        [](uint8_t c) { return c != 0; })) {
            continue;
        }
        std::fill(claimed.begin() + static_cast<ptrdiff_t>(o.offset),
                  claimed.begin() + static_cast<ptrdiff_t>(end), 1);
        chosen.push_back({o.offset, info.text.size(), id});
        if (info.lstrip) {
            for (size_t q = o.offset; q > 0 && claimed[q - 1] == 0 && is_ascii_space(text[q - 1]);
                 --q) {
                claimed[q - 1] = 2;
            }
        }
        if (info.rstrip) {
            for (size_t q = end; q < text.size() && claimed[q] == 0 && is_ascii_space(text[q]);
                 ++q) {
                claimed[q] = 2;
            }
        }
    }
    std::sort(chosen.begin(), chosen.end(),
              [](const Chosen& a, const Chosen& b) { return a.offset < b.offset; });

    auto add_text = [&](size_t begin, size_t end) {
        size_t p = begin;
        while (p < end) {
            while (p < end && claimed[p] != 0) ++p;
            const size_t start = p;
            while (p < end && claimed[p] == 0) ++p;
            if (p > start) out.push_back({kNoToken, start, p - start});
        }
    };
    size_t pos = 0;
    for (const Chosen& c : chosen) {
        add_text(pos, c.offset);
        out.push_back({c.token, c.offset, c.length});
        pos = c.offset + c.length;
    }
    add_text(pos, text.size());
}

std::vector<TokenId> Tokenizer::tokenize(std::string_view text,
                                         const TokenizeOptions& options) const {
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 2);
    std::vector<Fragment> fragments;
    partition_special(text, options.parse_special, fragments);

    if (options.add_special && vocab_.add_bos()) out.push_back(vocab_.special().bos);

    if (spm_) {
        // A space goes in front of text that starts the input or follows a special token.
        bool after_special = true;
        std::string escaped;
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                out.push_back(f.token);
                after_special = true;
                continue;
            }
            escaped.clear();
            if (vocab_.add_space_prefix() && after_special) escaped += kSpaceMarker;
            append_escaped(escaped, text.substr(f.offset, f.length));
            spm_->encode(vocab_, escaped, out);
            after_special = false;
        }
    } else {
        BpeScratch scratch;
        std::vector<TextSpan> pieces;
        // Long texts repeat their words: a pre-token's tokens depend only on its bytes, so each
        // distinct one is merged once per call. (Per call, so the Tokenizer stays immutable.)
        struct Run {
            size_t begin, count;
        };
        std::unordered_map<std::string_view, Run> seen;
        std::vector<TokenId> seen_tokens;
        const bool use_cache = text.size() >= kCacheMinTextBytes;
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                out.push_back(f.token);
                continue;
            }
            const std::string_view fragment = text.substr(f.offset, f.length);
            pre_->split(fragment, pieces);
            for (const TextSpan& p : pieces) {
                const std::string_view piece = fragment.substr(p.offset, p.length);
                if (!use_cache) {
                    bpe_->encode(vocab_, piece, out, scratch);
                    continue;
                }
                if (const auto it = seen.find(piece); it != seen.end()) {
                    const auto first =
                        seen_tokens.begin() + static_cast<ptrdiff_t>(it->second.begin);
                    out.insert(out.end(), first, first + static_cast<ptrdiff_t>(it->second.count));
                    continue;
                }
                const size_t before = out.size();
                bpe_->encode(vocab_, piece, out, scratch);
                seen.emplace(piece, Run{seen_tokens.size(), out.size() - before});
                seen_tokens.insert(seen_tokens.end(), out.begin() + static_cast<ptrdiff_t>(before),
                                   out.end());
            }
        }
    }

    if (options.add_special && vocab_.add_eos()) out.push_back(vocab_.special().eos);
    return out;
}

}  // namespace strata
