#include "synth/vocabulary.h"

#include <cstdio>
#include <string_view>
#include <unordered_set>

#include "gguf/reader.h"

namespace strata {

namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // "▁" (U+2581), SentencePiece's space

// Frequent English words (plus a few that common prompts and code use). Each becomes "▁word".
constexpr std::string_view kWords[] = {
    "the",     "of",       "and",     "to",       "a",       "in",     "is",       "it",
    "you",     "that",     "he",      "was",      "for",     "on",     "are",      "with",
    "as",      "his",      "they",    "be",       "at",      "one",    "have",     "this",
    "from",    "or",       "had",     "by",       "not",     "word",   "but",      "what",
    "some",    "we",       "can",     "out",      "other",   "were",   "all",      "there",
    "when",    "up",       "use",     "your",     "how",     "said",   "an",       "each",
    "she",     "which",    "do",      "their",    "time",    "if",     "will",     "way",
    "about",   "many",     "then",    "them",     "would",   "like",   "so",       "these",
    "her",     "long",     "make",    "thing",    "see",     "him",    "two",      "has",
    "look",    "more",     "day",     "could",    "go",      "come",   "did",      "number",
    "no",      "most",     "people",  "my",       "over",    "know",   "water",    "than",
    "call",    "first",    "who",     "may",      "down",    "side",   "been",     "now",
    "find",    "any",      "new",     "work",     "part",    "take",   "get",      "place",
    "made",    "live",     "where",   "after",    "back",    "little", "only",     "round",
    "man",     "year",     "came",    "show",     "every",   "good",   "me",       "give",
    "our",     "under",    "name",    "very",     "through", "just",   "great",    "think",
    "say",     "help",     "line",    "turn",     "much",    "mean",   "before",   "move",
    "right",   "old",      "too",     "same",     "tell",    "does",   "set",      "three",
    "want",    "air",      "well",    "also",     "play",    "small",  "end",      "put",
    "home",    "read",     "hand",    "large",    "add",     "even",   "land",     "here",
    "must",    "big",      "high",    "such",     "why",     "ask",    "went",     "light",
    "kind",    "off",      "need",    "house",    "try",     "us",     "again",    "point",
    "mother",  "world",    "near",    "build",    "earth",   "father", "head",     "stand",
    "own",     "page",     "should",  "country",  "found",   "answer", "school",   "still",
    "learn",   "food",     "sun",     "four",     "between", "keep",   "eye",      "never",
    "last",    "let",      "thought", "city",     "tree",    "hard",   "start",    "might",
    "story",   "saw",      "far",     "sea",      "left",    "late",   "run",      "while",
    "close",   "night",    "real",    "life",     "few",     "open",   "together", "next",
    "white",   "children", "begin",   "walk",     "always",  "those",  "both",     "often",
    "until",   "river",    "second",  "book",     "took",    "room",   "friend",   "began",
    "idea",    "once",     "upon",    "hear",     "sure",    "face",   "enough",   "young",
    "ready",   "above",    "ever",    "feel",     "talk",    "soon",   "dog",      "family",
    "leave",   "song",     "door",    "question", "whole",   "king",   "best",     "hour",
    "true",    "hundred",  "step",    "early",    "morning", "love",   "person",   "money",
    "capital", "garden",   "window",  "dream",    "sky",     "stars",  "dark",     "voice",
    "def",     "return",   "print",   "import",   "class",   "else",   "none",     "self",
};

// Common word endings, without "▁": they follow a piece inside a word.
constexpr std::string_view kSuffixes[] = {"ing", "ed", "er", "es", "ly", "tion", "ent", "est"};

// Frequent sentence openings, capitalised.
constexpr std::string_view kCapitalised[] = {"The", "Once", "It",  "He",   "She",   "They",
                                             "We",  "I",    "In",  "This", "There", "What",
                                             "A",   "And",  "But", "When"};

// ChatML: each message is "<|im_start|>{role}\n{content}<|im_end|>\n".
constexpr std::string_view kChatTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeByte = 6;

class PieceList {
  public:
    void add(std::string piece) {
        if (seen_.insert(piece).second) pieces_.push_back(std::move(piece));
    }
    // "▁the" adds "▁t", "▁th", "▁the": every prefix, so pairwise merges can reach the word.
    void add_with_prefixes(std::string_view prefix, std::string_view word) {
        for (size_t n = 1; n <= word.size(); ++n)
            add(std::string(prefix) + std::string(word.substr(0, n)));
    }
    const std::vector<std::string>& pieces() const { return pieces_; }

  private:
    std::vector<std::string> pieces_;
    std::unordered_set<std::string> seen_;
};

std::vector<std::string> normal_pieces() {
    PieceList list;
    list.add(std::string(kSpace));
    for (char c = '!'; c <= '~'; ++c) list.add(std::string(1, c));
    for (std::string_view w : kWords) list.add_with_prefixes(kSpace, w);
    for (std::string_view w : kCapitalised) list.add_with_prefixes(kSpace, w);
    for (std::string_view s : kSuffixes) {
        list.add_with_prefixes("", s);
    }
    // Runs of spaces (indentation in code).
    std::string run(kSpace);
    for (int i = 2; i <= 4; ++i) {
        run += kSpace;
        list.add(run);
    }
    return list.pieces();
}

}  // namespace

SynthVocabulary builtin_vocabulary() {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0.0f, 0.0f, 0.0f};
    std::vector<int32_t> types = {kTypeUnknown, kTypeControl, kTypeControl};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.emplace_back(name);
        scores.push_back(0.0f);
        types.push_back(kTypeByte);
    }
    const std::vector<std::string> pieces = normal_pieces();
    for (size_t i = 0; i < pieces.size(); ++i) {
        tokens.push_back(pieces[i]);
        scores.push_back(-static_cast<float>(i));
        types.push_back(kTypeNormal);
    }
    const auto im_end_id = static_cast<uint32_t>(tokens.size() + 1);
    for (const char* control : {"<|im_start|>", "<|im_end|>"}) {
        tokens.emplace_back(control);
        scores.push_back(0.0f);
        types.push_back(kTypeControl);
    }

    SynthVocabulary v;
    v.source = "built-in";
    v.n_tokens = static_cast<uint32_t>(tokens.size());
    v.entries = {
        {"tokenizer.ggml.model", "llama"},
        {"tokenizer.ggml.pre", "default"},
        {"tokenizer.ggml.tokens", make_string_array(tokens)},
        {"tokenizer.ggml.scores", make_f32_array(scores)},
        {"tokenizer.ggml.token_type", make_i32_array(types)},
        {"tokenizer.ggml.bos_token_id", kBuiltinBosId},
        {"tokenizer.ggml.eos_token_id", kBuiltinEosId},
        {"tokenizer.ggml.unknown_token_id", kBuiltinUnkId},
        {"tokenizer.ggml.eot_token_id", im_end_id},
        {"tokenizer.ggml.add_bos_token", true},
        {"tokenizer.ggml.add_eos_token", false},
        {"tokenizer.chat_template", std::string(kChatTemplate)},
    };
    return v;
}

Result<SynthVocabulary> vocabulary_from_gguf(const std::string& path) {
    auto file = read_gguf(path);
    if (!file) return err("--vocab-from: ", file.error().message);
    SynthVocabulary v;
    v.source = path;
    for (const auto& e : file->metadata) {
        if (e.key.starts_with("tokenizer.")) v.entries.push_back(e);
    }
    const Array* tokens = file->get_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->elem_type != ValueType::STRING || tokens->items.empty()) {
        return err(path,
                   ": has no tokenizer.ggml.tokens string array, so there is no vocabulary "
                   "to copy (--vocab-from needs a model or vocabulary-only GGUF with a "
                   "tokenizer)");
    }
    if (tokens->items.size() > 0x7fffffffu) {
        return err(path, ": tokenizer.ggml.tokens has ", std::to_string(tokens->items.size()),
                   " entries, more than a token id can address");
    }
    v.n_tokens = static_cast<uint32_t>(tokens->items.size());
    return v;
}

}  // namespace strata
