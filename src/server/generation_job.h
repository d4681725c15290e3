// One generation request, whichever API it came from, and its run on the worker thread: the
// model is acquired (loaded on first use), the prompt built (chat template with tools and the
// thinking switch, or the text as it is, or fill-in-the-middle), cut to the context when
// allowed, generated through the same GenerationSession as `strata run`, and the reply split
// into content, thinking and tool calls as it streams.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reply/reply_parser.h"
#include "runtime/model_host.h"
#include "server/api_request.h"
#include "server/model_catalog.h"

namespace strata::server {

struct GenerationJob {
    const ServedModelInfo* model = nullptr;
    std::string requested_name;  // echoed back as the request wrote it

    bool chat = false;
    json messages = json::array();  // chat: [{role, content, ...}]
    json tools;                     // null or an array of tools
    // "" or "auto": the model decides; "none": tools are not offered; "required": some call
    // is forced; any other value: a call of that function is forced.
    std::string tool_choice;

    // generate
    std::string prompt, system, suffix, template_override;
    bool raw = false;
    std::vector<TokenId> context;  // tokens of an earlier answer, put before the prompt

    GenerateOptions options = ollama_defaults();
    std::optional<json> format;  // "json" or a schema
    ThinkSetting think;
    bool truncate = true;
    KeepAlive keep_alive = std::chrono::minutes(5);
    std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now();

    // Log-probabilities of the answer's tokens with this many alternatives; -1: none.
    int top_logprobs = -1;

    // Tests: fail as if the engine broke once this many pieces were streamed.
    int fail_after_pieces = -1;
};

// A sampled token's log-probability, with its text, for the APIs' `logprobs`.
struct TokenChoice {
    std::string token;
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;  // most likely first
};

struct GenerationOutcome {
    GenerateResult result;
    std::vector<TokenId> context;  // prompt and reply, for generate's `context`
    std::vector<ToolCall> tool_calls;
    // With top_logprobs >= 0: those of the tokens not yet handed to the sink with a delta (they
    // belong on the final chunk).
    std::vector<TokenChoice> logprobs_tail;
    double load_seconds = 0;
    double total_seconds = 0;
    // An empty prompt or message list only loads (or, with keep_alive 0, unloads) the model.
    std::string load_only_reason;  // "load" or "unload"; empty for a real generation
};

// Receives the reply as it becomes safe to show, with the log-probabilities of the tokens
// sampled since the last call (when asked for); false: the client is gone.
using DeltaSink = std::function<bool(const ReplyDelta&, const std::vector<TokenChoice>&)>;

// Runs on the worker thread. Errors are ApiError (status and message).
GenerationOutcome run_generation(ModelHost& host, GenerationJob& job, const DeltaSink& sink);

// The messages with each tool call's arguments written as JSON text, as OpenAI sends them.
// Requests keep arguments as objects (Ollama's form), which most templates print with tojson;
// some (DeepSeek V3.1's) concatenate them as text and fail on an object, so a render that fails
// is tried once more with these.
json tool_arguments_as_text(const json& messages);

// Ollama's checks that need the model but not its weights (capabilities): done before the
// request is queued so that they answer with a proper status.
void check_capabilities(const GenerationJob& job);

struct EmbeddingBatch {
    std::vector<std::vector<float>> vectors;  // one per input, in order
    uint32_t tokens = 0;                      // evaluated, all inputs together
    double load_seconds = 0, total_seconds = 0;
};

// Mean-pooled embeddings (session/embedding.h) of each input. `normalize`: unit length;
// `dims` > 0 and smaller than the model's width: cut to that many and normalized again.
// Runs on a worker thread, in a sequence of the model beside the generations on it (the
// SequenceBatcher evaluates them together); errors are ApiError, 400 for an input longer than
// the context when it may not be cut.
EmbeddingBatch run_embedding(ModelHost& host, const GenerationJob& job,
                             const std::vector<std::string>& inputs, bool normalize, size_t dims);

}  // namespace strata::server
