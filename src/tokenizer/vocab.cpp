#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "tokenizer/pretokenize.h"

namespace strata {

std::string_view token_type_name(TokenType t) {
    switch (t) {
        case TokenType::Undefined:
            return "undefined";
        case TokenType::Normal:
            return "normal";
        case TokenType::Unknown:
            return "unknown";
        case TokenType::Control:
            return "control";
        case TokenType::UserDefined:
            return "user-defined";
        case TokenType::Unused:
            return "unused";
        case TokenType::Byte:
            return "byte";
    }
    return "undefined";
}

TokenId Vocab::find(std::string_view text) const {
    return ids_.find(text, [this](TokenId id) -> std::string_view { return token(id).text; });
}

bool Vocab::is_end_of_generation(TokenId id) const {
    return std::binary_search(eog_.begin(), eog_.end(), id);
}

namespace {

// Texts that mark the end of a turn in the chat formats llama.cpp knows; such a token ends
// generation and is treated as a control token whatever its type in the file. <|return|> and
// <|call|> end an assistant turn in OpenAI's Harmony format (gpt-oss); [EOT] and [EOS] are Kimi
// K2's.
constexpr std::array<std::string_view, 11> kEndOfGenerationTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",  "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>",      "<|return|>", "<|call|>", "[EOT]",         "[EOS]",
};
// Harmony's framing tokens. A reply is several messages, "<|channel|>analysis<|message|>..
// <|end|><|start|>assistant<|channel|>final<|message|>..<|return|>", so these must reach the
// reply parser as text (user-defined, as llama.cpp makes them), and <|end|>, which closes each
// message, must not end generation there.
constexpr std::array<std::string_view, 4> kHarmonyFramingTexts = {"<|channel|>", "<|message|>",
                                                                  "<|start|>", "<|constrain|>"};
// Tool-call and reasoning markup that the converter types as control tokens (their text looks
// like "<|..|>" or "<｜..｜>"), but that the reply parser must see as text: DeepSeek V3's and Kimi
// K2's tool-call framing, and Kimi's <think> and </think>.
constexpr std::array<std::string_view, 12> kReplyMarkupTexts = {
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<think>",
    "</think>",
};
// Also ends generation when the file types it as a control token (Llama 3's end of text).
constexpr std::string_view kEndOfTextControl = "<|end_of_text|>";

struct SpecialKey {
    const char* key;
    TokenId SpecialTokenIds::*field;
};

// tokenizer.ggml.*_token_id keys (GGUF spells "seperator"); the last three are older names of
// the fill-in-the-middle keys.
constexpr std::array<SpecialKey, 17> kSpecialKeys = {{
    {"tokenizer.ggml.bos_token_id", &SpecialTokenIds::bos},
    {"tokenizer.ggml.eos_token_id", &SpecialTokenIds::eos},
    {"tokenizer.ggml.eot_token_id", &SpecialTokenIds::eot},
    {"tokenizer.ggml.eom_token_id", &SpecialTokenIds::eom},
    {"tokenizer.ggml.unknown_token_id", &SpecialTokenIds::unk},
    {"tokenizer.ggml.seperator_token_id", &SpecialTokenIds::sep},
    {"tokenizer.ggml.padding_token_id", &SpecialTokenIds::pad},
    {"tokenizer.ggml.mask_token_id", &SpecialTokenIds::mask},
    {"tokenizer.ggml.fim_pre_token_id", &SpecialTokenIds::fim_pre},
    {"tokenizer.ggml.fim_suf_token_id", &SpecialTokenIds::fim_suf},
    {"tokenizer.ggml.fim_mid_token_id", &SpecialTokenIds::fim_mid},
    {"tokenizer.ggml.fim_pad_token_id", &SpecialTokenIds::fim_pad},
    {"tokenizer.ggml.fim_rep_token_id", &SpecialTokenIds::fim_rep},
    {"tokenizer.ggml.fim_sep_token_id", &SpecialTokenIds::fim_sep},
    {"tokenizer.ggml.prefix_token_id", &SpecialTokenIds::fim_pre},
    {"tokenizer.ggml.suffix_token_id", &SpecialTokenIds::fim_suf},
    {"tokenizer.ggml.middle_token_id", &SpecialTokenIds::fim_mid},
}};

// Special tokens that files often leave out, found by their text (first match by id wins).
struct TextDetected {
    TokenId SpecialTokenIds::*field;
    std::vector<std::string_view> texts;
};

const std::vector<TextDetected>& text_detected() {
    static const std::vector<TextDetected> list = {
        {&SpecialTokenIds::eot,
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
          "<\xEF\xBD\x9C"
          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek
          "[EOT]"}},                                             // Kimi K2
        {&SpecialTokenIds::eom, {"<|eom_id|>"}},
        {&SpecialTokenIds::fim_pre,
         {"<|fim_prefix|>", "<fim-prefix>",
          "<\xEF\xBD\x9C"
          "fim\xE2\x96\x81"
          "begin\xEF\xBD\x9C>",
          "<PRE>", "<|code_prefix|>"}},  // the <|code_..|> ones: GLM-4.5
        {&SpecialTokenIds::fim_suf,
         {"<|fim_suffix|>", "<fim-suffix>",
          "<\xEF\xBD\x9C"
          "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
          "<SUF>", "<|code_suffix|>"}},
        {&SpecialTokenIds::fim_mid,
         {"<|fim_middle|>", "<fim-middle>",
          "<\xEF\xBD\x9C"
          "fim\xE2\x96\x81"
          "end\xEF\xBD\x9C>",
          "<MID>", "<|code_middle|>"}},
        {&SpecialTokenIds::fim_pad, {"<|fim_pad|>", "<fim-pad>", "<PAD>"}},
        {&SpecialTokenIds::fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}},
        {&SpecialTokenIds::fim_sep, {"<|file_sep|>"}},
    };
    return list;
}

bool contains_text(const std::vector<std::string_view>& list, std::string_view text) {
    return std::find(list.begin(), list.end(), text) != list.end();
}

}  // namespace

class VocabLoader {
  public:
    explicit VocabLoader(const GgufFile& file) : file_(file) {}

    Result<Vocab> load() {
        STRATA_TRY(read_model());
        STRATA_TRY(read_tokens());
        STRATA_TRY(read_merges());
        read_special_ids();
        detect_special_by_text();
        collect_end_of_generation();
        check_bos_eos();
        order_special_tokens();
        apply_name_based_attributes();
        return std::move(v_);
    }

  private:
    std::string where() const { return file_.path.empty() ? "tokenizer" : file_.path; }
    void warn(std::string message) { v_.warnings_.push_back(std::move(message)); }

    Result<void> read_model() {
        const auto model = file_.get_string("tokenizer.ggml.model");
        if (!model) {
            return err(where(), ": the file has no tokenizer (tokenizer.ggml.model is missing)");
        }
        v_.model_name_ = *model;
        const std::string supported =
            "; strata supports 'llama' (SentencePiece) and 'gpt2' (byte-level BPE) vocabularies";
        if (*model == "llama") {
            v_.kind_ = VocabKind::SentencePiece;
            v_.special_.bos = 1;
            v_.special_.eos = 2;
            v_.special_.unk = 0;
            v_.add_bos_ = true;
            v_.add_space_prefix_ = true;
        } else if (*model == "gpt2") {
            v_.kind_ = VocabKind::BytePair;
            // llama.cpp's defaults for BPE files that name no BOS/EOS.
            v_.special_.bos = 11;
            v_.special_.eos = 11;
            STRATA_TRY(read_pre_tokenizer());
        } else if (*model == "bert") {
            return err(where(), ": tokenizer 'bert' (WordPiece) is not supported yet", supported);
        } else if (*model == "t5") {
            return err(where(), ": tokenizer 't5' (Unigram) is not supported yet", supported);
        } else if (*model == "rwkv") {
            return err(where(), ": tokenizer 'rwkv' (RWKV world) is not supported yet", supported);
        } else if (*model == "no_vocab" || *model == "none") {
            return err(where(), ": the file has no vocabulary (tokenizer.ggml.model = '", *model,
                       "')");
        } else {
            return err(where(), ": unknown tokenizer model '", *model, "'", supported);
        }
        if (const auto prefix = file_.get_bool("tokenizer.ggml.add_space_prefix")) {
            v_.add_space_prefix_ = *prefix;
        }
        return {};
    }

    Result<void> read_pre_tokenizer() {
        v_.pre_ = file_.get_string("tokenizer.ggml.pre").value_or("");
        if (v_.pre_.empty()) {
            warn(
                "tokenizer.ggml.pre is missing; using the 'default' pre-tokenizer, which may "
                "split text differently from the model's own tokenizer");
            v_.pre_ = "default";
        }
        const PreTokenizerRules* rules = find_pre_tokenizer_rules(v_.pre_);
        if (!rules) {
            return err(where(), ": unknown pre-tokenizer '", v_.pre_,
                       "' (tokenizer.ggml.pre); supported: ", supported_pre_tokenizers());
        }
        v_.ignore_merges_ = rules->ignore_merges;
        v_.add_bos_ = rules->add_bos;
        if (rules->clear_bos) v_.special_.bos = kNoToken;
        return {};
    }

    // A numeric array of exactly n items, or nullptr when the key is absent.
    Result<const Array*> numeric_array(const char* key, size_t n) {
        const Value* value = file_.find(key);
        if (!value) return static_cast<const Array*>(nullptr);
        const Array* array = value->as_array();
        if (!array) return err(where(), ": ", key, " is not an array");
        if (array->items.size() != n) {
            return err(where(), ": ", key, " has ", std::to_string(array->items.size()),
                       " entries but tokenizer.ggml.tokens has ", std::to_string(n),
                       "; the vocabulary is inconsistent");
        }
        for (const Value& item : array->items) {
            if (!item.as_float()) return err(where(), ": ", key, " holds non-numeric values");
        }
        return array;
    }

    Result<void> read_tokens() {
        const Value* value = file_.find("tokenizer.ggml.tokens");
        const Array* tokens = value ? value->as_array() : nullptr;
        if (!tokens) {
            return err(where(), ": tokenizer.ggml.tokens is ", value ? "not an array" : "missing",
                       "; the file has no usable vocabulary");
        }
        const size_t n = tokens->items.size();
        if (n == 0) return err(where(), ": tokenizer.ggml.tokens is empty");
        if (n > static_cast<size_t>(INT32_MAX)) {
            return err(where(), ": tokenizer.ggml.tokens has too many entries");
        }
        STRATA_ASSIGN(const Array* scores, numeric_array("tokenizer.ggml.scores", n));
        STRATA_ASSIGN(const Array* types, numeric_array("tokenizer.ggml.token_type", n));

        v_.tokens_.resize(n);
        v_.ids_.reserve(n);
        size_t n_empty = 0, n_duplicate = 0;
        for (size_t i = 0; i < n; ++i) {
            const std::string* text = tokens->items[i].as_string();
            if (!text) return err(where(), ": tokenizer.ggml.tokens holds non-string values");
            TokenInfo& t = v_.tokens_[i];
            t.text = *text;
            if (t.text.empty()) {  // llama.cpp's placeholder, so that every token has a text
                t.text = "[EMPTY_" + std::to_string(i) + "]";
                ++n_empty;
            }
            if (scores) t.score = static_cast<float>(*scores->items[i].as_float());
            if (types) {
                const int64_t type = types->items[i].as_int().value_or(0);
                t.type =
                    type >= 1 && type <= 6 ? static_cast<TokenType>(type) : TokenType::Undefined;
            }
            const bool replaced = v_.ids_.insert_or_assign(
                t.text, static_cast<TokenId>(i),
                [this](TokenId id) -> std::string_view { return v_.token(id).text; });
            if (replaced) ++n_duplicate;
        }
        if (n_empty) warn(std::to_string(n_empty) + " tokens have an empty text");
        if (n_duplicate) {
            warn(std::to_string(n_duplicate) +
                 " token texts occur more than once; text lookups use the highest id");
        }
        return {};
    }

    Result<void> read_merges() {
        if (v_.kind_ != VocabKind::BytePair) return {};
        const Value* value = file_.find("tokenizer.ggml.merges");
        const Array* merges = value ? value->as_array() : nullptr;
        if (!merges) {
            return err(where(), ": tokenizer.ggml.merges is ", value ? "not an array" : "missing",
                       "; a byte-level BPE vocabulary cannot be used without its merges");
        }
        v_.merges_.reserve(merges->items.size());
        size_t n_malformed = 0;
        for (const Value& item : merges->items) {
            const std::string* text = item.as_string();
            if (!text) return err(where(), ": tokenizer.ggml.merges holds non-string values");
            // "left right"; the search starts at 1 so that a left part may be a space.
            const size_t space = text->find(' ', 1);
            if (space == std::string::npos) {
                ++n_malformed;
                v_.merges_.emplace_back();  // keeps the ranks of the following merges
                continue;
            }
            v_.merges_.emplace_back(text->substr(0, space), text->substr(space + 1));
        }
        if (n_malformed) {
            warn(std::to_string(n_malformed) + " merges are not of the form 'left right'; ignored");
        }
        return {};
    }

    void read_special_ids() {
        const auto n = static_cast<uint64_t>(v_.tokens_.size());
        for (const SpecialKey& k : kSpecialKeys) {
            const Value* value = file_.find(k.key);
            if (!value) continue;
            const std::optional<uint64_t> id = value->as_uint();
            if (!id) continue;  // negative: "none"
            if (*id < n) {
                v_.special_.*k.field = static_cast<TokenId>(*id);
            } else if (*id != UINT32_MAX) {  // UINT32_MAX is how files write "none"
                warn(std::string(k.key) + " = " + std::to_string(*id) +
                     " is not a token id (the vocabulary has " + std::to_string(n) +
                     " tokens); ignored");
            }
        }
        if (const auto add = file_.get_bool("tokenizer.ggml.add_bos_token")) v_.add_bos_ = *add;
        if (const auto add = file_.get_bool("tokenizer.ggml.add_eos_token")) v_.add_eos_ = *add;

        // Defaults that do not fit a small vocabulary mean "none".
        SpecialTokenIds& s = v_.special_;
        for (TokenId* id :
             {&s.bos, &s.eos, &s.eot, &s.eom, &s.unk, &s.pad, &s.sep, &s.mask, &s.fim_pre,
              &s.fim_suf, &s.fim_mid, &s.fim_pad, &s.fim_rep, &s.fim_sep}) {
            if (!v_.contains(*id)) *id = kNoToken;
        }
    }

    void make_control(TokenId id) { v_.tokens_[static_cast<size_t>(id)].type = TokenType::Control; }

    void detect_special_by_text() {
        for (const TextDetected& d : text_detected()) {
            TokenId& field = v_.special_.*d.field;
            if (field != kNoToken) continue;
            for (size_t i = 0; i < v_.tokens_.size(); ++i) {
                if (contains_text(d.texts, v_.tokens_[i].text)) {
                    field = static_cast<TokenId>(i);
                    make_control(field);
                    break;
                }
            }
        }
    }

    void collect_end_of_generation() {
        const SpecialTokenIds& s = v_.special_;
        std::vector<TokenId>& eog = v_.eog_;
        for (TokenId id : {s.fim_pad, s.fim_rep, s.fim_sep, s.eos, s.eot, s.eom}) {
            if (id != kNoToken) eog.push_back(id);
        }
        for (size_t i = 0; i < v_.tokens_.size(); ++i) {
            const TokenInfo& t = v_.tokens_[i];
            const auto id = static_cast<TokenId>(i);
            if (std::find(kEndOfGenerationTexts.begin(), kEndOfGenerationTexts.end(), t.text) !=
                kEndOfGenerationTexts.end()) {
                make_control(id);
                eog.push_back(id);
            } else if (t.text == kEndOfTextControl && t.type == TokenType::Control) {
                eog.push_back(id);
            }
        }
        std::sort(eog.begin(), eog.end());
        eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
        apply_reply_markup();
    }

    // See kHarmonyFramingTexts and kReplyMarkupTexts. <|end|> stays an end of generation unless
    // the vocabulary also has Harmony's own turn ends, <|return|> and <|call|> (Phi-3 ends its
    // turns with <|end|>).
    void apply_reply_markup() {
        for (std::string_view text : kHarmonyFramingTexts) make_user_defined(text);
        for (std::string_view text : kReplyMarkupTexts) make_user_defined(text);
        const TokenId end = v_.find("<|end|>");
        if (end == kNoToken || v_.find("<|return|>") == kNoToken ||
            v_.find("<|call|>") == kNoToken) {
            return;
        }
        std::vector<TokenId>& eog = v_.eog_;
        eog.erase(std::remove(eog.begin(), eog.end(), end), eog.end());
        v_.tokens_[static_cast<size_t>(end)].type = TokenType::UserDefined;
    }

    void make_user_defined(std::string_view text) {
        const TokenId id = v_.find(text);
        if (id != kNoToken) v_.tokens_[static_cast<size_t>(id)].type = TokenType::UserDefined;
    }

    void check_bos_eos() {
        if (v_.add_bos_ && v_.special_.bos == kNoToken) {
            warn("the vocabulary asks for a BOS token but has none; no BOS is added");
            v_.add_bos_ = false;
        }
        if (v_.add_eos_ && v_.special_.eos == kNoToken) {
            warn("the vocabulary asks for an EOS token but has none; no EOS is added");
            v_.add_eos_ = false;
        }
    }

    void order_special_tokens() {
        for (size_t i = 0; i < v_.tokens_.size(); ++i) {
            const TokenType t = v_.tokens_[i].type;
            if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) {
                v_.special_order_.push_back(static_cast<TokenId>(i));
            }
        }
        std::stable_sort(v_.special_order_.begin(), v_.special_order_.end(),
                         [&](TokenId a, TokenId b) {
                             return v_.token(a).text.size() > v_.token(b).text.size();
                         });
    }

    // GGUF has no per-token strip flags; llama.cpp sets them for these families by name.
    void apply_name_based_attributes() {
        const std::string pre = file_.get_string("tokenizer.ggml.pre").value_or("");
        std::string name = file_.get_string("general.name").value_or("");
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        auto token = [&](std::string_view text) -> TokenInfo* {
            const TokenId id = v_.find(text);
            return id == kNoToken ? nullptr : &v_.tokens_[static_cast<size_t>(id)];
        };
        const bool jina_v2 = pre.find("jina-v2-de") != std::string::npos ||
                             pre.find("jina-v2-es") != std::string::npos ||
                             pre.find("jina-v2-code") != std::string::npos;
        if (jina_v2) {
            if (TokenInfo* mask = token("<mask>")) mask->lstrip = true;
        } else if (name.find("phi-3") != std::string::npos ||
                   name.find("phi3") != std::string::npos) {
            for (TokenId id : v_.special_order_) v_.tokens_[static_cast<size_t>(id)].rstrip = true;
            if (TokenInfo* t = token("</s>")) t->rstrip = true;
            for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
                if (TokenInfo* t = token(text)) t->rstrip = false;
            }
        }
    }

    const GgufFile& file_;
    Vocab v_;
};

Result<Vocab> Vocab::from_gguf(const GgufFile& file) {
    return VocabLoader(file).load();
}

}  // namespace strata
