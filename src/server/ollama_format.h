// The JSON objects of Ollama's native answers: stream chunks, final chunks with the six
// metrics (integer nanoseconds), tool calls with object arguments, model entries.
#pragma once

#include <string>
#include <vector>

#include "runtime/model_host.h"
#include "server/api_request.h"
#include "server/generation_job.h"
#include "server/model_catalog.h"

namespace strata::server {

// "call_" and 8 lowercase letters or digits, as Ollama makes them.
std::string new_tool_call_id();

// {"id", "function": {"index", "name", "arguments": {...}}}
json ollama_tool_call(const ToolCall& call, size_t index);

// The `logprobs` array of a chunk: {token, logprob, bytes, top_logprobs: [{token, logprob,
// bytes}]} per token (the /v1 chat form is the same entries under {"content": ...}).
json logprobs_json(const std::vector<TokenChoice>& tokens);

// The six metrics of a final chunk, and strata_eval_disk_bytes: the model-file bytes read
// while generating the answer's eval_count tokens.
void add_metrics(json& j, const GenerationOutcome& o);

// One /api/tags entry.
json tags_entry(const ServedModelInfo& m);
// One /api/ps entry: model m, loaded as `s` says.
json ps_entry(const ServedModelInfo& m, const LoadedModelStatus& s);
// The whole /api/show answer.
json show_response(const ServedModelInfo& m, bool verbose);

std::string now_rfc3339();

}  // namespace strata::server
