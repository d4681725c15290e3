#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "util/utf8.h"

namespace strata {

namespace {

// The reference's expressions, written as llama.cpp writes them (its \s means White_Space, $ the
// end of the piece); compile() translates them for PCRE2.

// GPT-2's expression, reused as one step by many pre-tokenizers.
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3's expression with the case-insensitive group spelled out.
constexpr std::string_view kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: Llama 3's expression with single digits.
constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: Qwen2's expression with combining marks (\p{M}) kept inside words, so that Indic,
// Thai or decomposed Latin text is not cut at every accent.
constexpr std::string_view kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Cased letters as DeepSeek LLM lists them (Unicode Lu/Ll/Lt of its time).
constexpr std::string_view kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
// ASCII and full-width punctuation, curly quotes, CJK punctuation up to the ideographic stop.
constexpr std::string_view kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
// CJK ideographs (U+4E00..U+9FA5), U+0800..U+4E00, Hangul syllables and up to U+D7FF.
constexpr std::string_view kDeepseekCjk =
    R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// Words up to whitespace or one of .,!?… and their CJK, Devanagari and Arabic counterparts.
constexpr std::string_view kBloom =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";
// Mistral's Tekken: case-aware words, written with lookaheads the way llama.cpp rewrites them
// ([^a-z] among letters stands for "upper case").
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// OpenAI's o200k (GPT-4o, gpt-oss): case-aware words with their combining marks, as the model's
// own tokenizer.json writes it (only the case-insensitive contractions are spelled out). Here
// strata departs from llama.cpp on purpose: llama.cpp's lookahead rewrite (as for Tekken) drops
// \p{M} and treats every non-ASCII letter as both cases, so it cuts Devanagari, Thai or Khmer
// words at each vowel sign and joins "aÉ". Likewise a pre-token that is a token is kept whole
// (ignore_merges), as tiktoken does before merging: o200k has words such as "दुनिया" that its
// merges do not rebuild. With both, strata's ids are the model's tokenizer's, which
// tests/external/compare_tokenizers.mjs checks; llama.cpp's differ on such text.
constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek V3: ASCII punctuation before letters, words with their marks, symbol runs.
constexpr std::string_view kDeepseekV3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Kimi K2 (tiktoken): o200k's case-aware words with their marks, but Han ideographs are never
// part of a word: a run of them is a piece of its own, matched first. The model's expression
// writes the word classes as intersections ([\p{Lu}..\p{M}&&[^\p{Han}]]); here each letter is
// preceded by a negative lookahead instead. Han is the Script property: PCRE2's bare \p{Han}
// would take Script_Extensions, which adds CJK punctuation such as "。".
// Here strata departs from llama.cpp on purpose, as for o200k: llama.cpp's hand-written splitter
// for "kimi-k2" takes a word as any run of letters without marks or case changes, so it cuts
// Devanagari or decomposed Latin at each mark, and keeps no whole-token pre-token. Case changes
// do not matter for the ids (no token spans one), marks do; tests/external checks strata against
// the model's expression (compare_tokenizers.mjs) and against llama.cpp where the two agree
// (compare_pretokenizers_llama_cpp.mjs).
constexpr std::string_view kKimiK2 =
    R"(\p{sc=Han}+)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*)"
    R"((?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+)"
    R"((?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::vector<PreTokenizerRules>& all_rules() {
    static const std::vector<PreTokenizerRules> rules = {
        {.names = {"default"},
         .patterns = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
        {.names = {"llama3", "llama-v3", "llama-bpe", "falcon3"},
         .patterns = {kLlama3},
         .ignore_merges = true,
         .add_bos = true},
        {.names = {"dbrx", "smaug-bpe"}, .patterns = {kLlama3}},
        // GLM-4 and GLM-4.5/4.6/4.7 (glm4moe): Llama 3's expression; the vocabulary has no BOS (the
        // chat template writes [gMASK]<sop> itself).
        {.names = {"chatglm-bpe", "glm4"}, .patterns = {kLlama3}, .clear_bos = true},
        {.names = {"deepseek-llm"},
         .patterns = {R"([\r\n])", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kDeepseekCjk,
                      R"(\p{N}+)"}},
        {.names = {"deepseek-coder"},
         .patterns = {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
        {.names = {"deepseek-v3"},
         .patterns = {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
                      kDeepseekV3}},
        {.names = {"falcon"}, .patterns = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
        {.names = {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                   "minerva-7b"},
         .patterns = {R"(\p{N})", kGpt2}},
        {.names = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
                   "jina-v2-de", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"},
         .patterns = {kGpt2}},
        {.names = {"qwen2", "stablelm2", "megrez", "deepseek-r1-qwen"}, .patterns = {kQwen2}},
        {.names = {"qwen35"}, .patterns = {kQwen35}},
        {.names = {"poro-chat", "bloom", "gpt3-finnish"}, .patterns = {kBloom}},
        {.names = {"viking"}, .patterns = {kBloom, R"(\p{N})"}},
        {.names = {"tekken"}, .patterns = {kTekken}, .ignore_merges = true, .add_bos = true},
        {.names = {"chameleon"},
         .patterns = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                      "([\\t\\n]|    |  )", R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
         .add_bos = true},
        {.names = {"gpt-4o"}, .patterns = {kGpt4o}, .ignore_merges = true},
        {.names = {"kimi-k2"}, .patterns = {kKimiK2}, .ignore_merges = true},
    };
    return rules;
}

// Unicode White_Space, which is what the reference means by \s.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites a reference expression for PCRE2 (see the header).
std::string to_pcre2(std::string_view expr) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < expr.size(); ++i) {
        const char c = expr[i];
        if (c == '\\' && i + 1 < expr.size()) {
            const char e = expr[++i];
            if (e == 's') {
                out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
            } else if (e == 'S') {
                assert(!in_class && "\\S inside a class has no White_Space rewrite");
                out += "[^" + std::string(kWhiteSpace) + "]";
            } else {
                out += c;
                out += e;
            }
        } else if (c == '[' && !in_class) {
            in_class = true;
            out += c;
        } else if (c == ']' && in_class) {
            in_class = false;
            out += c;
        } else if (c == '$' && !in_class) {
            out += "\\z";
        } else {
            out += c;
        }
    }
    return out;
}

struct CodeDeleter {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeDeleter>;

// Per-thread match state: the match data and a JIT stack larger than the default 32 KiB, which
// lookahead-heavy expressions (tekken, gpt-4o) can exhaust on long words.
class MatchScratch {
  public:
    MatchScratch()
        : data_(pcre2_match_data_create(64, nullptr)),
          context_(pcre2_match_context_create(nullptr)),
          jit_stack_(pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr)) {
        if (context_ && jit_stack_) pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
    }
    ~MatchScratch() {
        pcre2_jit_stack_free(jit_stack_);
        pcre2_match_context_free(context_);
        pcre2_match_data_free(data_);
    }
    MatchScratch(const MatchScratch&) = delete;
    MatchScratch& operator=(const MatchScratch&) = delete;

    pcre2_match_data* data() const { return data_; }
    pcre2_match_context* context() const { return context_; }

  private:
    pcre2_match_data* data_;
    pcre2_match_context* context_;
    pcre2_jit_stack* jit_stack_;
};

MatchScratch& scratch() {
    thread_local MatchScratch s;
    return s;
}

// Byte length of the code point at s[i] in valid UTF-8.
size_t code_point_length(const char* s, size_t i) {
    const auto b = static_cast<uint8_t>(s[i]);
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// Valid UTF-8 for the expressions, with a way back to the original byte offsets: each invalid
// byte becomes U+FFFD (3 bytes).
struct SanitizedText {
    std::string text;
    std::vector<size_t> original_offset;  // per byte of text, plus one for its end

    explicit SanitizedText(std::string_view in) {
        text.reserve(in.size() + 16);
        original_offset.reserve(in.size() + 17);
        size_t i = 0;
        while (i < in.size()) {
            const utf8::Decoded d = utf8::decode(in, i);
            if (d.valid) {
                text.append(in.substr(i, d.len));
                for (uint32_t k = 0; k < d.len; ++k) original_offset.push_back(i + k);
                i += d.len;
            } else {
                text.append(utf8::kReplacementUtf8);
                for (int k = 0; k < 3; ++k) original_offset.push_back(i);
                i += 1;
            }
        }
        original_offset.push_back(in.size());
    }
};

}  // namespace

const PreTokenizerRules* find_pre_tokenizer_rules(std::string_view pre) {
    for (const PreTokenizerRules& r : all_rules()) {
        for (std::string_view name : r.names) {
            if (name == pre) return &r;
        }
    }
    return nullptr;
}

std::string supported_pre_tokenizers() {
    std::string out;
    for (const PreTokenizerRules& r : all_rules()) {
        for (std::string_view name : r.names) {
            if (!out.empty()) out += ", ";
            out += name;
        }
    }
    return out;
}

struct PreTokenizer::Compiled {
    std::vector<CodePtr> steps;
    bool jit = false;
};

PreTokenizer::PreTokenizer(std::unique_ptr<Compiled> compiled) : compiled_(std::move(compiled)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

bool PreTokenizer::uses_jit() const {
    return compiled_->jit;
}

Result<PreTokenizer> PreTokenizer::create(std::string_view pre) {
    const PreTokenizerRules* rules = find_pre_tokenizer_rules(pre);
    if (!rules) {
        return err("unknown pre-tokenizer '", pre,
                   "' (tokenizer.ggml.pre); supported: ", supported_pre_tokenizers());
    }
    uint32_t have_jit = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &have_jit);

    auto compiled = std::make_unique<Compiled>();
    compiled->jit = have_jit != 0;
    for (std::string_view expr : rules->patterns) {
        const std::string pattern = to_pcre2(expr);
        int error_code = 0;
        PCRE2_SIZE error_offset = 0;
        CodePtr code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr));
        if (!code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error_code, message, sizeof message);
            return err("pre-tokenizer '", pre, "': expression ", pattern,
                       " does not compile at offset ", std::to_string(error_offset), ": ",
                       reinterpret_cast<const char*>(message));
        }
        if (compiled->jit && pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE) != 0) {
            compiled->jit = false;  // the interpreter gives the same matches, only slower
        }
        compiled->steps.push_back(std::move(code));
    }
    return PreTokenizer(std::move(compiled));
}

void PreTokenizer::split(std::string_view text, std::vector<TextSpan>& pieces) const {
    pieces.clear();
    if (text.empty()) return;

    std::optional<SanitizedText> sanitized;
    if (!utf8::is_valid(text)) sanitized.emplace(text);
    const std::string_view subject = sanitized ? std::string_view(sanitized->text) : text;

    MatchScratch& s = scratch();
    std::vector<TextSpan> current{{0, subject.size()}};
    for (const CodePtr& step : compiled_->steps) {
        pieces.clear();
        for (const TextSpan& chunk : current) {
            // The chunk is the whole subject for the expression: lookaheads and \z stop at its
            // end, as in the reference.
            const auto* base = reinterpret_cast<PCRE2_SPTR>(subject.data() + chunk.offset);
            size_t pos = 0, emitted = 0;
            while (pos < chunk.length) {
                int rc = pcre2_match(step.get(), base, chunk.length, pos, PCRE2_NO_UTF_CHECK,
                                     s.data(), s.context());
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
                    rc = pcre2_match(step.get(), base, chunk.length, pos,
                                     PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.data(), s.context());
                }
                // No match, or a resource limit on pathological input: the rest of the chunk
                // stays one piece (still encoded without loss).
                if (rc < 0) break;
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data());
                const size_t start = ov[0], end = ov[1];
                if (end == start) {  // empty match: none of the expressions has one, but be safe
                    pos = start + code_point_length(subject.data() + chunk.offset, start);
                    continue;
                }
                if (start > emitted) pieces.push_back({chunk.offset + emitted, start - emitted});
                pieces.push_back({chunk.offset + start, end - start});
                emitted = pos = end;
            }
            if (emitted < chunk.length) {
                pieces.push_back({chunk.offset + emitted, chunk.length - emitted});
            }
        }
        current.swap(pieces);
    }
    pieces.swap(current);

    if (sanitized) {
        for (TextSpan& p : pieces) {
            const size_t begin = sanitized->original_offset[p.offset];
            const size_t end = sanitized->original_offset[p.offset + p.length];
            p = {begin, end - begin};
        }
    }
}

}  // namespace strata
