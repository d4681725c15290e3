// strata_bench_tokenize [--testdata DIR] [--bytes N] [--json]
//
// Tokenization speed of each vocabulary in the golden data on about 1 MB of mixed-language
// text: the 27 shared tokenizer test strings repeated, interleaved with generated prose in
// several scripts, numbers, code and whitespace runs (deterministic, so runs compare). Prints
// load time, MB/s for tokenizing the whole text at once and as ~2 KB prompts (short texts skip
// the per-call cache of repeated words, so this is the speed of the merge algorithm itself),
// tokens and bytes per token, and MB/s for detokenizing; best of several passes each. --json
// prints the same as one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

fs::path default_testdata() {
    if (const char* env = std::getenv("STRATA_TESTDATA")) return env;
    return fs::path(STRATA_SOURCE_DIR) / ".." / "shared" / "testdata";
}

// Words of several scripts for the generated part; punctuation and digits come separately.
const std::vector<std::vector<std::string>>& word_lists() {
    static const std::vector<std::vector<std::string>> lists = {
        {"the",       "model", "streams", "weights", "from",  "disk",    "when",  "memory",
         "is",        "short", "and",     "every",   "token", "reads",   "bytes", "quickly",
         "Tokenizer", "speed", "matters", "don't",   "we'll", "they've", "I'm",   "It's"},
        {"Gewichte", "werden", "gelesen", "schnell", "Speicher", "über", "größer", "Straße"},
        {"модель", "читает", "веса", "с", "диска", "когда", "памяти", "мало", "быстро"},
        {"模型", "从", "磁盘", "读取", "权重", "内存", "不足", "时", "速度", "很", "重要"},
        {"モデル", "は", "ディスク", "から", "重み", "を", "読み込みます", "メモリ", "速い"},
        {"모델은", "디스크에서", "가중치를", "읽습니다", "메모리가", "부족할", "때"},
        {"النموذج", "يقرأ", "الأوزان", "من", "القرص", "بسرعة"},
        {"🦙", "🚀", "👍🏽", "✅", "😀", "👨‍👩‍👧‍👦"},
        {"for",   "(int", "i",   "=",        "0;",       "i",          "<",      "n;",
         "++i)",  "{",    "sum", "+=",       "x[i];",    "}",          "return", "def",
         "f(x):", "->",   "::",  "#include", "<vector>", "std::string"},
    };
    return lists;
}

std::string build_corpus(const std::vector<std::string>& test_strings, size_t target_bytes) {
    std::mt19937 rng(20250220);
    const auto& lists = word_lists();
    std::string text;
    text.reserve(target_bytes + 4096);
    size_t next_test = 0;
    while (text.size() < target_bytes) {
        // One test string, then a generated paragraph.
        text += test_strings[next_test++ % test_strings.size()];
        text += '\n';
        const auto& words = lists[rng() % lists.size()];
        const size_t n_words = 20 + rng() % 60;
        for (size_t w = 0; w < n_words; ++w) {
            text += words[rng() % words.size()];
            const uint32_t r = rng() % 100;
            if (r < 6) {
                text += ", ";
            } else if (r < 9) {
                text += ". ";
            } else if (r < 12) {
                text += ' ' + std::to_string(rng() % 100000) + ' ';
            } else if (r < 14) {
                text += "\n    ";
            } else if (r < 15) {
                text += "   \t";
            } else {
                text += ' ';
            }
        }
        text += "\n\n";
    }
    return text;
}

// The text cut after the first newline past every `size` bytes: prompt-sized pieces.
std::vector<std::string_view> prompts_of(const std::string& text, size_t size) {
    std::vector<std::string_view> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', std::min(text.size(), pos + size));
        end = end == std::string::npos ? text.size() : end + 1;
        out.emplace_back(text.data() + pos, end - pos);
        pos = end;
    }
    return out;
}

// Best time of at least 3 runs and `min_total` seconds.
template <typename F>
double best_seconds(double min_total, F&& run) {
    double best = 1e30, total = 0;
    for (int pass = 0; pass < 3 || total < min_total; ++pass) {
        const auto start = Clock::now();
        run();
        const double s = seconds_since(start);
        best = std::min(best, s);
        total += s;
    }
    return best;
}

struct VocabCase {
    std::string name;
    fs::path path;
};

}  // namespace

int main(int argc, char** argv) {
    fs::path testdata = default_testdata();
    size_t target_bytes = 1 << 20;
    bool json_out = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--testdata" && i + 1 < argc) {
            testdata = argv[++i];
        } else if (a == "--bytes" && i + 1 < argc) {
            target_bytes = std::strtoull(argv[++i], nullptr, 10);
        } else if (a == "--json") {
            json_out = true;
        } else {
            std::fprintf(stderr, "usage: %s [--testdata DIR] [--bytes N] [--json]\n", argv[0]);
            return 2;
        }
    }

    std::ifstream strings_file(testdata / "inputs" / "tokenizer_strings_shared.json");
    if (!strings_file) {
        std::fprintf(stderr, "strata_bench_tokenize: no golden data at %s (use --testdata)\n",
                     testdata.string().c_str());
        return 1;
    }
    std::vector<std::string> test_strings;
    for (const auto& t : nlohmann::json::parse(strings_file)) {
        test_strings.push_back(t.at("text").get<std::string>());
    }
    const std::string corpus = build_corpus(test_strings, target_bytes);
    const double mb = static_cast<double>(corpus.size()) / 1e6;

    const std::vector<VocabCase> cases = {
        {"llama-spm (SPM, 32000)", testdata / "vocab" / "ggml-vocab-llama-spm.gguf"},
        {"llama-bpe (BPE llama3, 128256)", testdata / "vocab" / "ggml-vocab-llama-bpe.gguf"},
        {"qwen2 (BPE qwen2, 151646)", testdata / "vocab" / "ggml-vocab-qwen2.gguf"},
        {"aidreams260K (SPM, 512)", testdata / "models" / "real" / "aidreams260K-F32.gguf"},
    };

    nlohmann::json results = nlohmann::json::array();
    if (!json_out) {
        std::printf("corpus: %zu bytes of mixed-language text\n\n", corpus.size());
        std::printf("%-32s %8s %10s %10s %9s %8s %8s\n", "vocabulary", "load ms", "whole MB/s",
                    "2KB MB/s", "tokens", "B/token", "detok");
        std::printf("%-32s %8s %10s %10s %9s %8s %8s\n", "", "", "", "", "", "", "MB/s");
    }
    for (const VocabCase& c : cases) {
        const auto load_start = Clock::now();
        auto tokenizer = strata::Tokenizer::load(c.path.string());
        const double load_s = seconds_since(load_start);
        if (!tokenizer) {
            std::fprintf(stderr, "%s: %s\n", c.name.c_str(), tokenizer.error().message.c_str());
            return 1;
        }
        std::vector<strata::TokenId> tokens;
        const double whole_s = best_seconds(1.0, [&] { tokens = tokenizer->tokenize(corpus); });
        const std::vector<std::string_view> prompts = prompts_of(corpus, 2048);
        const double prompts_s = best_seconds(1.0, [&] {
            for (std::string_view p : prompts) tokenizer->tokenize(p);
        });
        size_t detok_bytes = 0;
        const double detok_s =
            best_seconds(0.3, [&] { detok_bytes = tokenizer->detokenize(tokens).size(); });
        const double bytes_per_token =
            static_cast<double>(corpus.size()) / static_cast<double>(tokens.size());
        const double detok_mb_s = static_cast<double>(detok_bytes) / 1e6 / detok_s;
        results.push_back({{"vocab", c.name},
                           {"load_ms", load_s * 1e3},
                           {"tokenize_mb_s", mb / whole_s},
                           {"tokenize_2kb_prompts_mb_s", mb / prompts_s},
                           {"tokens", tokens.size()},
                           {"bytes_per_token", bytes_per_token},
                           {"detokenize_mb_s", detok_mb_s}});
        if (!json_out) {
            std::printf("%-32s %8.1f %10.2f %10.2f %9zu %8.2f %8.1f\n", c.name.c_str(),
                        load_s * 1e3, mb / whole_s, mb / prompts_s, tokens.size(), bytes_per_token,
                        detok_mb_s);
        }
    }
    if (json_out) {
        const nlohmann::json j = {{"corpus_bytes", corpus.size()}, {"results", results}};
        std::printf("%s\n", j.dump(2).c_str());
    }
    return 0;
}
