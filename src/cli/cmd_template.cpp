// strata template MODEL_OR_JINJA --context FILE.json [--date YYYY-MM-DD]
//
// Renders a chat template and prints the prompt exactly, with no newline added. MODEL_OR_JINJA
// is a GGUF file (its tokenizer.chat_template, or the built-in default for its family, with
// bos_token / eos_token taken from its vocabulary unless the context sets them) or a file
// holding the template text. The context is a JSON object: messages, add_generation_prompt,
// tools, and any other variables the template reads; `--context -` reads it from stdin.
//
// --date fixes the clock that templates read through strftime_now() (Llama 3.x and Mistral
// templates print today's date), for reproducible prompts.
//
// Errors (unreadable files, bad JSON, template syntax errors with line:column, the template's
// own raise_exception messages) go to stderr as "strata: ..." with exit status 1.
#include <cstdio>
#include <ctime>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/reader.h"
#include "template/chat_template.h"
#include "util/file.h"

namespace strata::cli {

namespace {

constexpr uint64_t kMaxTextFileBytes = 64u << 20;

Result<std::string> read_text(const std::string& path) {
    if (path == "-") {
        std::string s{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
        return s;
    }
    STRATA_ASSIGN(auto file, FileSource::open(path));
    if (file->size() > kMaxTextFileBytes) {
        return err(path, ": ", std::to_string(file->size()), " bytes is too large for a ",
                   "template or context file");
    }
    std::string s(static_cast<size_t>(file->size()), '\0');
    STRATA_TRY(file->read_at(0, s.data(), s.size()));
    return s;
}

bool looks_like_gguf(const std::string& text) {
    return text.rfind("GGUF", 0) == 0;
}

Result<ChatTemplate> load_template(const std::string& path) {
    // GGUF files are recognised by their magic, so a model without a .gguf suffix works too.
    auto probe = FileSource::open(path);
    if (!probe) return probe.take_error();
    char magic[4] = {};
    if ((*probe)->size() >= 4 && (*probe)->read_at(0, magic, 4).ok() &&
        looks_like_gguf(std::string(magic, 4))) {
        STRATA_ASSIGN(GgufFile file, read_gguf(path));
        STRATA_ASSIGN(ChatTemplate t, ChatTemplate::from_gguf(file));
        if (t.origin() != "tokenizer.chat_template") {
            std::fprintf(stderr, "strata: %s: using the %s\n", path.c_str(), t.origin().c_str());
        }
        return t;
    }
    STRATA_ASSIGN(std::string source, read_text(path));
    return ChatTemplate::parse(source, path);
}

// "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM[:SS]", local time (what strftime_now formats).
Result<std::time_t> parse_date(const std::string& text) {
    std::tm tm{};
    int n = 0;
    const int fields =
        std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n);
    bool ok = fields == 3 && n == 10;
    if (ok && text.size() > 10) {
        int m = 0;
        tm.tm_sec = 0;
        ok = (std::sscanf(text.c_str() + 10, "T%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &m) == 2 &&
              m == 6) &&
             (text.size() == 16 || (std::sscanf(text.c_str() + 16, ":%2d%n", &tm.tm_sec, &m) == 1 &&
                                    m == 3 && text.size() == 19));
    } else if (ok) {
        tm.tm_hour = 12;  // midday: the same date whatever the time zone rules do
    }
    ok = ok && tm.tm_mon >= 1 && tm.tm_mon <= 12 && tm.tm_mday >= 1 && tm.tm_mday <= 31 &&
         tm.tm_hour <= 23 && tm.tm_min <= 59 && tm.tm_sec <= 60;
    if (!ok) return err("--date ", text, ": expected YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS]");
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    return std::mktime(&tm);
}

Result<std::string> render(const std::string& template_path, const std::string& context_path,
                           const std::string& date) {
    jinja::RenderOptions options;
    if (!date.empty()) {
        STRATA_ASSIGN(options.now, parse_date(date));
    }
    STRATA_ASSIGN(ChatTemplate tmpl, load_template(template_path));
    STRATA_ASSIGN(std::string context_text, read_text(context_path));
    const std::string context_name = context_path == "-" ? "stdin" : context_path;
    nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_text, nullptr, false);
    if (context.is_discarded()) return err(context_name, ": not valid JSON");
    if (!context.is_object()) {
        return err(context_name, ": the context must be a JSON object such as ",
                   "{\"messages\": [...], \"add_generation_prompt\": true}");
    }
    return tmpl.render(context, options);
}

}  // namespace

void add_template(CLI::App& app) {
    auto* cmd = app.add_subcommand("template", "Render a chat template with a JSON context");
    auto template_path = std::make_shared<std::string>();
    auto context_path = std::make_shared<std::string>();
    cmd->add_option("model_or_template", *template_path,
                    "GGUF model (its tokenizer.chat_template) or a Jinja template file")
        ->required();
    cmd->add_option("--context", *context_path,
                    "JSON file with messages, add_generation_prompt, tools, ... ('-' for stdin)")
        ->required();
    auto date = std::make_shared<std::string>();
    cmd->add_option("--date", *date,
                    "the date strftime_now() sees, YYYY-MM-DD[THH:MM[:SS]] (default: now)");
    cmd->callback([template_path, context_path, date] {
        auto out = render(*template_path, *context_path, *date);
        if (!out) {
            std::fprintf(stderr, "strata: %s\n", out.error().message.c_str());
            throw CLI::RuntimeError(1);
        }
        std::fwrite(out->data(), 1, out->size(), stdout);
        std::fflush(stdout);
    });
}

}  // namespace strata::cli
