#include "session/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "session/stop_strings.h"
#include "tokenizer/stream_decoder.h"
#include "util/clock.h"

namespace strata {

namespace {

// The log-softmax of `logits` at `id`, and the `top` most likely tokens with theirs.
TokenLogprob token_logprob(const std::vector<float>& logits, TokenId id, int32_t top) {
    float max = -INFINITY;
    for (float x : logits) max = std::max(max, x);
    double sum = 0;
    for (float x : logits) sum += std::exp(double(x - max));
    const float lse = max + float(std::log(sum));
    TokenLogprob out;
    out.id = id;
    out.logprob = logits[size_t(id)] - lse;
    if (top <= 0) return out;
    std::vector<TokenId> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = TokenId(i);
    const size_t k = std::min(ids.size(), size_t(top));
    std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](TokenId a, TokenId b) {
        return logits[size_t(a)] > logits[size_t(b)] ||
               (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], logits[size_t(ids[i])] - lse);
    return out;
}
}  // namespace

GenerationSession::GenerationSession(engine::Engine& engine, const Tokenizer& tokenizer, int seq,
                                     SequenceEvaluator* batcher)
    : engine_(engine), tokenizer_(tokenizer), seq_(seq), batcher_(batcher) {}

void GenerationSession::reset() {
    context_.clear();
    engine_.truncate(0, seq_);
}

Result<void> GenerationSession::eval(std::span<const TokenId> tokens) {
    if (batcher_) {
        return batcher_->eval(seq_, tokens, engine::LogitsWanted::Last, logits_, &batched_reads_);
    }
    return engine_.eval(tokens, engine::LogitsWanted::Last, logits_, seq_);
}

SequenceReads GenerationSession::reads() const {
    if (batcher_) return batched_reads_;
    return {double(engine_.stats().weight_bytes), double(engine_.store().stats().bytes_from_disk)};
}

Result<GenerateResult> GenerationSession::generate(const std::vector<TokenId>& prompt,
                                                   const GenerateOptions& options,
                                                   const TextSink& sink) {
    STRATA_TRY(validate(options.sampling));
    if (prompt.empty()) return err("the prompt is empty");
    const uint32_t n_ctx = options.context_limit && options.context_limit < engine_.n_ctx()
                               ? options.context_limit
                               : engine_.n_ctx();
    if (prompt.size() >= n_ctx) {
        return err("the prompt has " + std::to_string(prompt.size()) +
                   " tokens but the context length is " + std::to_string(n_ctx) +
                   " (a larger --ctx makes room)");
    }
    GenerateResult res;
    res.prompt_ids = prompt;

    // Reuse the cached prefix; at least the last prompt token is evaluated, for its logits.
    size_t keep = 0;
    while (keep < context_.size() && keep < prompt.size() && context_[keep] == prompt[keep]) ++keep;
    keep = std::min(keep, prompt.size() - 1);
    keep = engine_.truncate(uint32_t(keep), seq_);  // less where the model cannot go back so far
    context_.resize(keep);
    // With a batcher, steps wait for this sequence's inputs from here until it returns.
    const JoinedSequence membership(batcher_, seq_);
    const auto t_prompt = std::chrono::steady_clock::now();
    const std::span<const TokenId> fresh(prompt.data() + keep, prompt.size() - keep);
    STRATA_TRY(eval(fresh));
    context_.insert(context_.end(), fresh.begin(), fresh.end());
    res.timings.prompt_seconds = seconds_since(t_prompt);
    res.timings.prompt_tokens = uint32_t(fresh.size());
    res.timings.cached_tokens = uint32_t(keep);

    Sampler sampler(options.sampling);
    StreamDecoder decoder(tokenizer_);
    StopStringMatcher stops(options.stop);
    const SequenceReads before = reads();
    const auto t_gen = std::chrono::steady_clock::now();
    bool client_gone = false;
    auto emit = [&](const std::string& text) {
        if (text.empty() || client_gone) return;
        res.text += text;
        if (sink && !sink(text)) client_gone = true;
    };
    for (;;) {
        if (options.max_tokens >= 0 && res.generated_ids.size() >= size_t(options.max_tokens)) {
            res.done_reason = "length";
            break;
        }
        if (options.logprobs) raw_logits_ = logits_;
        TokenId id = 0;
        if (options.constraint) {
            int64_t left = int64_t(n_ctx) - int64_t(engine_.n_past(seq_));
            if (options.max_tokens >= 0) {
                left =
                    std::min<int64_t>(left, options.max_tokens - int64_t(res.generated_ids.size()));
            }
            options.constraint->restrict(logits_, left);
            // The sampler rewrites the logits it is given, so each draw starts from a copy.
            constrained_logits_ = logits_;
            id = sampler.sample(logits_, context_);
            // A token the constraint masked is what the sampler falls back to when nothing is
            // left; drawing again would not change that.
            while (std::isfinite(constrained_logits_[size_t(id)]) &&
                   !options.constraint->leaves_room(id, left)) {
                constrained_logits_[size_t(id)] = -INFINITY;
                logits_ = constrained_logits_;
                id = sampler.sample(logits_, context_);
            }
            options.constraint->accept(id);
        } else {
            id = sampler.sample(logits_, context_);
        }
        if (options.stop_at_eog && tokenizer_.is_end_of_generation(id)) {
            res.done_reason = "stop";
            break;
        }
        res.generated_ids.push_back(id);
        if (options.logprobs) {
            options.logprobs->push_back(token_logprob(raw_logits_, id, options.top_logprobs));
        }
        emit(stops.feed(decoder.push(id)));
        if (stops.stopped() || client_gone ||
            (options.constraint && options.constraint->finished())) {
            res.done_reason = "stop";
            break;
        }
        if (engine_.n_past(seq_) >= n_ctx) {
            res.done_reason = "length";
            break;
        }
        STRATA_TRY(eval({&id, 1}));
        context_.push_back(id);
    }
    if (!stops.stopped()) {
        std::string tail = stops.feed(decoder.finish());
        if (!stops.stopped()) tail += stops.flush();
        emit(tail);
    }
    res.timings.generated_tokens = uint32_t(res.generated_ids.size());
    res.timings.generate_seconds = seconds_since(t_gen);
    const SequenceReads after = reads();
    res.timings.generate_weight_bytes = uint64_t(after.weight_bytes - before.weight_bytes);
    res.timings.generate_disk_bytes = uint64_t(after.disk_bytes - before.disk_bytes);
    return res;
}

}  // namespace strata
