// Generating text: a prompt's tokens in, sampled tokens and their text out, streamed as they
// come, with stop conditions.
//
// A GenerationSession owns the conversation state of one engine: the tokens whose keys and
// values are in the KV cache. A new prompt that begins with those tokens (the next turn of a
// chat, the same system prompt again) evaluates only what is new.
//
// Stop conditions, in the order they are checked after each sampled token:
//   "stop":   an end-of-generation token (not emitted), or a stop string (never emitted, not
//             even its beginning: text that might start one is held back until it is known);
//   "length": max_tokens generated, or the context is full. Tokens are never dropped to make
//             room: the context policy is to stop.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "session/sampler.h"
#include "session/sequence_evaluator.h"
#include "tokenizer/tokenizer.h"

namespace strata {

// Narrows the choice of each next token, for structured output (a JSON schema, a forced tool
// call). The session asks it before every draw and tells it the token drawn.
class TokenConstraint {
  public:
    virtual ~TokenConstraint() = default;
    // Sets the logits of tokens that may not come next to -inf. `tokens_left` is how many more
    // tokens the answer may have (max_tokens and the context both count), so a constraint can
    // close its structure before the budget runs out.
    virtual void restrict(std::span<float> logits, int64_t tokens_left) = 0;
    // Whether, after `id` (a token restrict() allowed, with the same tokens_left), the
    // structure can still be closed in the tokens then left. A token that opens more than the
    // budget can close is refused and the draw repeated without it.
    virtual bool leaves_room(TokenId id, int64_t tokens_left) const = 0;
    virtual void accept(TokenId id) = 0;
    // The structure is complete and nothing may follow: the answer ends with "stop".
    virtual bool finished() const = 0;
};

// How likely the model found a sampled token, and its most likely alternatives: natural-log
// probabilities from the model's own logits (before penalties, temperature or constraints).
struct TokenLogprob {
    TokenId id = 0;
    float logprob = 0;
    std::vector<std::pair<TokenId, float>> top;  // most likely first
};

struct GenerateOptions {
    int32_t max_tokens = 256;  // < 0: until the context is full
    SamplerParams sampling;
    std::vector<std::string> stop;  // stop strings
    bool stop_at_eog = true;        // end-of-generation tokens end the answer
    // Positions this answer may use, prompt included; 0 or more than the engine has: all of
    // the engine's context (a server's per-request num_ctx within what it allocated).
    uint32_t context_limit = 0;
    TokenConstraint* constraint = nullptr;  // not owned; nullptr: free text
    // Set: each sampled token's TokenLogprob is appended as it is drawn (before its text reaches
    // the sink), with top_logprobs alternatives.
    std::vector<TokenLogprob>* logprobs = nullptr;
    int32_t top_logprobs = 0;
};

struct GenerateTimings {
    uint32_t prompt_tokens = 0;  // prompt tokens evaluated by this call
    uint32_t cached_tokens = 0;  // prompt tokens reused from the KV cache
    double prompt_seconds = 0;
    uint32_t generated_tokens = 0;
    double generate_seconds = 0;         // from the first sampled token to the last
    uint64_t generate_weight_bytes = 0;  // weights read by the generation steps
    uint64_t generate_disk_bytes = 0;    // of the model file, read by the generation steps
                                         // (0 while every weight they use is resident)
};

struct GenerateResult {
    std::vector<TokenId> prompt_ids;
    std::vector<TokenId> generated_ids;
    std::string text;         // what was streamed
    std::string done_reason;  // "stop" or "length"
    GenerateTimings timings;
};

// Receives text as it becomes safe to show. Returning false ends generation (a client left);
// done_reason is then "stop".
using TextSink = std::function<bool(std::string_view)>;

class GenerationSession {
  public:
    // The conversation in sequence `seq` of the engine; with a batcher (an engine the sequences
    // share, session/sequence_evaluator.h), its evaluations go through it (batched with the other
    // sequences'), and the engine may be busy with them whenever this session is not evaluating.
    GenerationSession(engine::Engine& engine, const Tokenizer& tokenizer, int seq = 0,
                      SequenceEvaluator* batcher = nullptr);

    Result<GenerateResult> generate(const std::vector<TokenId>& prompt,
                                    const GenerateOptions& options, const TextSink& sink);

    // Tokens whose keys and values are in the cache.
    const std::vector<TokenId>& context() const { return context_; }
    void reset();

  private:
    Result<void> eval(std::span<const TokenId> tokens);
    // Weight and disk bytes read for this session so far (its share of batched steps).
    SequenceReads reads() const;

    engine::Engine& engine_;
    const Tokenizer& tokenizer_;
    int seq_ = 0;
    SequenceEvaluator* batcher_ = nullptr;
    SequenceReads batched_reads_;
    std::vector<TokenId> context_;
    std::vector<float> logits_;
    std::vector<float> raw_logits_;          // a copy kept for log-probabilities
    std::vector<float> constrained_logits_;  // after the constraint, for drawing again
};

}  // namespace strata
