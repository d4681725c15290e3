// The models `strata serve` offers: one entry per file named on the command line, described
// from its GGUF header only (no weights are read until a request needs them), under the name
// clients use. Names follow Ollama's rules: `model:tag`, tag `latest` when none is given,
// matched without regard to case, with a leading `registry.ollama.ai/` and `library/` ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_info.h"
#include "plan/plan.h"
#include "reply/reply_parser.h"
#include "runtime/model_host.h"
#include "util/result.h"

namespace strata::server {

// The form a request's model name is compared in: trimmed, lower case, without the default
// registry and namespace, with `:latest` added when there is no tag.
std::string normalize_model_name(std::string_view name);
// The default name of a file: its base name without `.gguf`, as `name:latest`.
std::string default_model_name(std::string_view path);

// What the ModelHost loads it from (name: the canonical `name:tag`; info, file_bytes,
// served_context, plan), and what the API tells of it.
struct ServedModelInfo : ModelSpec {
    std::vector<std::string> aliases;  // normalized extra names
    std::string path;
    int64_t modified_unix = 0;              // file mtime, seconds
    std::string digest;                     // 64 hex digits, stable while the file is unchanged
    std::string chat_template;              // tokenizer.chat_template, or "" when the file has none
    std::vector<std::string> capabilities;  // completion / embedding, tools, insert, thinking
    TemplateCapabilities template_caps;     // tool-call and thinking markup of its template

    // The six `details` keys of /api/tags, /api/ps and /api/show.
    nlohmann::ordered_json details() const;
    bool has_capability(std::string_view c) const;
};

class ModelCatalog {
  public:
    // Reads each file's header. `aliases[i]`, when present and non-empty, names model i instead
    // of its file name. Two models with the same name are an error.
    static Result<ModelCatalog> open(const std::vector<std::string>& paths,
                                     const std::vector<std::string>& aliases, uint32_t context_cap);

    // The model a request names, or nullptr.
    const ServedModelInfo* find(std::string_view requested) const;
    // The entry whose ModelSpec the host was given (a LoadedModelStatus's), or nullptr.
    const ServedModelInfo* entry(const ModelSpec* spec) const;
    const std::vector<ServedModelInfo>& models() const { return models_; }
    void set_plan(size_t index, Plan plan) { models_.at(index).plan = std::move(plan); }
    // Serves every model with its trained context length, at most `cap` positions.
    void cap_context(uint32_t cap);

  private:
    std::vector<ServedModelInfo> models_;
};

// "8.0B", "494.03M": Ollama's parameter_size.
std::string parameter_size_text(uint64_t params);

}  // namespace strata::server
