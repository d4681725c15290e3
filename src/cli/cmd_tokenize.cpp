// strata tokenize MODEL [TEXT] [--file PATH] [--ids] [--no-bos] [--no-parse-special]
//                 [--json-lines]
//
// Tokenizes text the way the model does, like llama.cpp's llama-tokenize (whose output format
// it follows, so the two can be compared): one line per token, "<id> -> '<piece>'", or with
// --ids a single Python-style list "[1, 2, 3]". The text comes from TEXT, from --file, or from
// standard input when either is "-"; it is taken byte for byte (no escape processing, no
// trailing newline removed). Only the model's metadata is read, so vocabulary-only files work.
//
// In the piece listing, bytes that would garble a terminal are escaped: \n, \r, \t, \\, and
// \xNN for other control bytes and for bytes that are not valid UTF-8 (a byte token that is
// half of a character).
//
// --json-lines tokenizes many texts in one run, for comparisons with other tokenizers: each
// line of the input is a JSON string, and each output line is the JSON array of its ids. Exit
// status 1 with "strata: <message>" when the model or the text
// cannot be read.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"
#include "util/utf8.h"

namespace strata::cli {

namespace {

struct TokenizeCommand {
    std::string model;
    std::string text;
    std::string file;
    bool ids = false;
    bool no_bos = false;
    bool no_parse_special = false;
    bool show_count = false;
    bool json_lines = false;
};

Result<std::string> read_all(std::istream& in, const std::string& name) {
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) return err("cannot read ", name);
    return buffer.str();
}

Result<std::string> read_input(const TokenizeCommand& c, bool have_text, bool have_file) {
    if (have_text == have_file) {
        return err(
            "give the text either as an argument or with --file (\"-\" reads standard "
            "input)");
    }
    const std::string& source = have_file ? c.file : c.text;
    if (have_file && source != "-") {
        std::ifstream in(source, std::ios::binary);
        if (!in) return err("cannot open ", source);
        return read_all(in, source);
    }
    if (source == "-") return read_all(std::cin, "standard input");
    return source;
}

// A piece made safe to print between quotes.
std::string escape_piece(std::string_view piece) {
    std::string out;
    size_t i = 0;
    while (i < piece.size()) {
        const auto c = static_cast<unsigned char>(piece[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\\') {
            out += "\\\\";
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            const utf8::Decoded d = utf8::decode(piece, i);
            if (d.valid) {
                out.append(piece.substr(i, d.len));
                i += d.len;
                continue;
            }
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        }
        ++i;
    }
    return out;
}

void run_tokenize(const TokenizeCommand& c, bool have_text, bool have_file) {
    auto fail = [](const Error& e) {
        std::fprintf(stderr, "strata: %s\n", e.message.c_str());
        throw CLI::RuntimeError(1);
    };
    auto tokenizer = Tokenizer::load(c.model);
    if (!tokenizer) fail(tokenizer.error());
    for (const std::string& w : tokenizer->vocab().warnings()) {
        std::fprintf(stderr, "strata: warning: %s: %s\n", c.model.c_str(), w.c_str());
    }
    auto text = read_input(c, have_text, have_file);
    if (!text) fail(text.error());

    TokenizeOptions options;
    // As llama-tokenize: BOS and EOS go together, and only when the model adds a BOS.
    options.add_special = tokenizer->vocab().add_bos() && !c.no_bos;
    options.parse_special = !c.no_parse_special;
    if (c.json_lines) {
        std::string out;
        std::istringstream lines(*text);
        std::string line;
        for (size_t number = 1; std::getline(lines, line); ++number) {
            const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (j.is_discarded() || !j.is_string()) {
                fail(Error{"line " + std::to_string(number) + " is not a JSON string"});
            }
            out += nlohmann::json(tokenizer->tokenize(j.get<std::string>(), options)).dump();
            out += '\n';
        }
        std::fwrite(out.data(), 1, out.size(), stdout);
        return;
    }
    const std::vector<TokenId> tokens = tokenizer->tokenize(*text, options);

    std::string out;
    if (c.ids) {
        out += '[';
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (i) out += ", ";
            out += std::to_string(tokens[i]);
        }
        out += "]\n";
    } else {
        for (TokenId id : tokens) {
            char number[16];
            std::snprintf(number, sizeof number, "%6d", id);
            out += number;
            out += " -> '";
            out += escape_piece(tokenizer->piece(id));
            out += "'\n";
        }
    }
    if (c.show_count) out += "Total number of tokens: " + std::to_string(tokens.size()) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void add_tokenize(CLI::App& app) {
    auto* cmd = app.add_subcommand("tokenize", "Show how a model splits text into tokens");
    auto c = std::make_shared<TokenizeCommand>();
    cmd->add_option("model", c->model, "GGUF model or vocabulary file")->required();
    auto* text = cmd->add_option("text", c->text, "Text to tokenize (\"-\": standard input)");
    auto* file = cmd->add_option("-f,--file", c->file, "Read the text from a file (\"-\": stdin)");
    text->excludes(file);
    cmd->add_flag("--ids", c->ids, "Print only the ids, as a list: [1, 2, 3]");
    cmd->add_flag("--no-bos", c->no_bos, "Add no BOS/EOS even if the model asks for them");
    cmd->add_flag("--no-parse-special", c->no_parse_special,
                  "Treat control-token text such as <|im_start|> as plain text");
    cmd->add_flag("--show-count", c->show_count, "Also print the number of tokens");
    cmd->add_flag("--json-lines", c->json_lines,
                  "Input: one JSON string per line; output: one JSON array of ids per line");
    cmd->callback([c, text, file] { run_tokenize(*c, text->count() > 0, file->count() > 0); });
}

}  // namespace strata::cli
