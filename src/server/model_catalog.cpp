#include "server/model_catalog.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "server/fill_in_middle.h"
#include "template/chat_template.h"

namespace strata::server {

namespace {

std::string trim_lower(std::string_view s) {
    while (!s.empty() && std::isspace(uint8_t(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(uint8_t(s.back()))) s.remove_suffix(1);
    std::string out(s);
    for (char& c : out) c = char(std::tolower(uint8_t(c)));
    return out;
}

// Not a cryptographic hash: the contract asks only for 64 hex digits that stay the same while
// the file is unchanged, and hashing a file of many gigabytes at start-up would cost minutes.
// Four FNV-1a lanes with different offsets over path, size and modification time.
std::string file_digest(const std::string& path, uint64_t size, int64_t mtime_ns) {
    const std::string key = path + '\0' + std::to_string(size) + '\0' + std::to_string(mtime_ns);
    std::string hex;
    for (uint64_t lane = 0; lane < 4; ++lane) {
        uint64_t h = 0xcbf29ce484222325ull ^ (lane * 0x9e3779b97f4a7c15ull);
        for (int round = 0; round < 2; ++round) {
            for (unsigned char c : key) {
                h ^= c;
                h *= 0x100000001b3ull;
            }
        }
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
        hex += buf;
    }
    return hex;
}

std::vector<std::string> capabilities_of(ServedModelInfo& m) {
    // strata runs causal language models; embeddings of them are mean-pooled hidden states, so
    // `completion` is always offered and `embedding` (a pooling model) never claimed.
    std::vector<std::string> caps = {"completion"};
    const std::vector<std::string> tokens = vocabulary_tokens(m.info.file);
    m.template_caps = detect_capabilities(m.chat_template, tokens);
    const TemplateCapabilities& t = m.template_caps;
    if (t.tools) caps.push_back("tools");
    if (fill_in_middle_tokens(m.info.file)) caps.push_back("insert");
    if (t.thinking) caps.push_back("thinking");
    return caps;
}

}  // namespace

std::string normalize_model_name(std::string_view name) {
    std::string n = trim_lower(name);
    for (std::string_view prefix : {"registry.ollama.ai/", "library/"}) {
        if (n.starts_with(prefix)) n.erase(0, prefix.size());
    }
    const size_t slash = n.rfind('/');
    if (n.find(':', slash == std::string::npos ? 0 : slash) == std::string::npos && !n.empty()) {
        n += ":latest";
    }
    return n;
}

std::string default_model_name(std::string_view path) {
    std::string base = std::filesystem::path(std::string(path)).filename().string();
    std::string lower = trim_lower(base);
    if (lower.ends_with(".gguf")) base.erase(base.size() - 5);
    return normalize_model_name(base);
}

std::string parameter_size_text(uint64_t params) {
    char buf[32];
    if (params >= 1'000'000'000ull) {
        std::snprintf(buf, sizeof buf, "%.1fB", double(params) / 1e9);
    } else if (params >= 1'000'000ull) {
        std::snprintf(buf, sizeof buf, "%.2fM", double(params) / 1e6);
    } else {
        std::snprintf(buf, sizeof buf, "%.2fK", double(params) / 1e3);
    }
    return buf;
}

nlohmann::ordered_json ServedModelInfo::details() const {
    std::string quant;
    if (auto ft = info.file_type()) quant = std::string(file_type_name(*ft));
    return {{"parent_model", ""},
            {"format", "gguf"},
            {"family", info.arch},
            {"families", nlohmann::ordered_json::array({info.arch})},
            {"parameter_size", parameter_size_text(info.totals.params)},
            {"quantization_level", quant}};
}

bool ServedModelInfo::has_capability(std::string_view c) const {
    return std::find(capabilities.begin(), capabilities.end(), c) != capabilities.end();
}

namespace {

// The trained context length, at most cap (cap when the file does not say).
uint32_t served_context(const ModelInfo& info, uint32_t cap) {
    const uint32_t trained = info.hparams ? info.hparams->n_ctx_train : 0;
    return trained ? std::min(trained, cap) : cap;
}

}  // namespace

void ModelCatalog::cap_context(uint32_t cap) {
    for (ServedModelInfo& m : models_) m.served_context = served_context(m.info, cap);
}

Result<ModelCatalog> ModelCatalog::open(const std::vector<std::string>& paths,
                                        const std::vector<std::string>& aliases,
                                        uint32_t context_cap) {
    if (paths.empty()) return err("no model to serve");
    ModelCatalog c;
    for (size_t i = 0; i < paths.size(); ++i) {
        ServedModelInfo m;
        m.path = paths[i];
        auto file = read_gguf(m.path);
        if (!file) return err(m.path, ": ", file.error().message);
        auto info = load_model_info(std::move(*file));
        if (!info) return err(m.path, ": ", info.error().message);
        m.info = std::move(*info);
        struct stat st {};
        if (::stat(m.path.c_str(), &st) != 0) return err(m.path, ": cannot stat the file");
        m.file_bytes = uint64_t(st.st_size);
        m.modified_unix = int64_t(st.st_mtim.tv_sec);
        m.digest = file_digest(std::filesystem::absolute(m.path).string(), m.file_bytes,
                               int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec);
        m.name = i < aliases.size() && !aliases[i].empty() ? normalize_model_name(aliases[i])
                                                           : default_model_name(m.path);
        m.chat_template = m.info.file.get_string("tokenizer.chat_template").value_or("");
        m.capabilities = capabilities_of(m);
        m.served_context = served_context(m.info, context_cap);
        for (const ServedModelInfo& other : c.models_) {
            if (other.name == m.name) {
                return err("two models are both named ", m.name, " (", other.path, " and ", m.path,
                           "); --alias gives one another name");
            }
        }
        c.models_.push_back(std::move(m));
    }
    return c;
}

const ServedModelInfo* ModelCatalog::find(std::string_view requested) const {
    const std::string n = normalize_model_name(requested);
    if (n.empty()) return nullptr;
    for (const ServedModelInfo& m : models_) {
        if (m.name == n) return &m;
        if (std::find(m.aliases.begin(), m.aliases.end(), n) != m.aliases.end()) return &m;
    }
    return nullptr;
}

const ServedModelInfo* ModelCatalog::entry(const ModelSpec* spec) const {
    for (const ServedModelInfo& m : models_) {
        if (&m == spec) return &m;
    }
    return nullptr;
}

}  // namespace strata::server
