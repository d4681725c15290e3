// Reading request bodies the way Ollama does: JSON whatever the Content-Type says, unknown
// fields ignored, a field of the wrong type is a 400 that names it, `null` means "not given".
// Also the value formats shared by several endpoints: options, keep_alive, think, format.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/model_host.h"
#include "session/generation.h"

namespace strata::server {

using json = nlohmann::ordered_json;

// An answer other than 200, thrown while a request is read or before its response began.
struct ApiError : std::runtime_error {
    int status;
    ApiError(int s, const std::string& message) : std::runtime_error(message), status(s) {}
};

// The body as a JSON object. Empty: 400 "missing request body"; not JSON or not an object: 400
// with the parser's message.
json parse_body(const std::string& body);

// The field, or nullptr when it is missing or null.
const json* field(const json& object, const char* key);
std::optional<std::string> string_field(const json& object, const char* key);
std::optional<bool> bool_field(const json& object, const char* key);
// Integers; a float is truncated (Ollama accepts 40.0 for an int).
std::optional<int64_t> int_field(const json& object, const char* key);
std::optional<double> number_field(const json& object, const char* key);
// An array field (nullptr when missing or null); anything else is a 400.
const json* array_field(const json& object, const char* key);
const json* object_field(const json& object, const char* key);

// keep_alive: seconds as a number, or a Go duration ("5m", "1h30m", "300ms", "0"); negative is
// forever (nullopt). Missing: `fallback`. A string that does not parse is a 400.
KeepAlive parse_keep_alive(const json& body, KeepAlive fallback);

// Ollama's `options` into generation settings. Unknown keys are ignored, null values skipped;
// a value of the wrong type is a 400 naming the option. `num_ctx` goes to context_limit.
void apply_options(const json* options, GenerateOptions& g);
// Ollama's defaults where neither request nor model says otherwise (§6 of the contract).
GenerateOptions ollama_defaults();

// `think`: false/true or a level; absent is `given == false`.
struct ThinkSetting {
    bool given = false;
    bool on = false;
    std::string level;  // "low", "medium", "high", "max" when given as a level
};
ThinkSetting parse_think(const json& body);

// `format`: "json", a JSON schema object, or "" / null for none.
std::optional<json> parse_format(const json& body);

// `stop` as a string or an array of strings.
std::vector<std::string> parse_stop(const json& value, const char* name);

// Compact JSON text; bytes that are not UTF-8 (a byte token's piece in logprobs) become U+FFFD
// instead of failing.
std::string to_text(const json& j);

// `logprobs` and `top_logprobs` of a request: -1 when log-probabilities are not asked for, else
// how many alternatives (0..20; outside that a 400).
int parse_top_logprobs(const json& body);

// `tool_choice` of a request, on either API: "auto", "none", "required" or a function's name,
// given as a string or in OpenAI's shape {"type": "function", "function": {"name": ...}};
// "" when absent. Any other shape is a 400.
std::string parse_tool_choice(const json& body);

// RFC 3339 in UTC with microseconds: "2026-03-01T10:20:30.504612Z".
std::string rfc3339(std::chrono::system_clock::time_point t);

}  // namespace strata::server
