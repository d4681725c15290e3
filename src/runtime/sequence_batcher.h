// Continuous batching: several generations on one engine, each in its own sequence (KV slot),
// decoded together so that every weight read (from RAM, from the expert cache, from disk) serves
// all of them.
//
// Each generation runs on its own thread, as it would alone, and hands its tokens to eval()
// instead of the engine. An embedding does the same with its whole input, asking for the hidden
// state of every token instead of the last one's logits (SeqTokens::hidden): it rides along as
// a prompt does, and each of its chunks' hidden states is written where it belongs. One step thread
// owns the engine: a step starts once every sequence that has joined has handed in its next input
// (a sampled token, or a prompt), and evaluates them as one batch (Engine::eval_sequences): first
// the decoding sequences' tokens, then the waiting prompts, first come first: a whole batch of them
// when nobody decodes, a quarter batch beside decoding sequences. A long prompt is thus cut into
// chunks that ride along with the others' decode steps instead of stalling them, and a new request
// joins at the next step; a finished one leaves. Each sequence gets the logits it would get alone,
// bit for bit (the engine's rows never depend on the rest of the batch).
//
// What a step reads is shared out among the sequences in it by their token counts, so that each
// generation reports its own share of weight and disk bytes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "session/sequence_evaluator.h"

namespace strata {

// Prompt tokens a step takes beside decoding sequences (a whole batch when none decodes).
constexpr size_t prompt_tokens_beside_decode(size_t max_batch) {
    return max_batch / 4 > 32 ? max_batch / 4 : (max_batch < 32 ? max_batch : 32);
}

// What the batcher did since it started.
struct BatcherStats {
    uint64_t steps = 0;
    uint64_t tokens = 0;          // evaluated, all sequences
    uint64_t decode_tokens = 0;   // of them, single tokens of decoding sequences
    uint32_t widest_step = 0;     // most sequences in one step
    uint64_t sequence_steps = 0;  // sum over steps of the sequences in each
};

class SequenceBatcher final : public SequenceEvaluator {
  public:
    explicit SequenceBatcher(engine::Engine& engine);
    ~SequenceBatcher() override;  // waits for the step in flight; no sequence may still be joined
    SequenceBatcher(const SequenceBatcher&) = delete;
    SequenceBatcher& operator=(const SequenceBatcher&) = delete;

    // session/sequence_evaluator.h says what these do.
    void join(int seq) override;
    void leave(int seq) override;
    // Last or Hidden only: a prompt's every logits (All) are no step's business.
    Result<void> eval(int seq, std::span<const int32_t> tokens, engine::LogitsWanted wanted,
                      std::vector<float>& out, SequenceReads* reads) override;

    BatcherStats stats() const;

  private:
    struct Slot {
        bool joined = false;
        std::span<const int32_t> pending;  // tokens not yet evaluated
        size_t evaluated = 0;              // tokens of its eval() evaluated before `pending`
        bool waiting = false;              // an eval() is in progress
        bool done = false;                 // its eval() has its answer
        uint64_t order = 0;                // when its eval() began (prompts go first come)
        engine::LogitsWanted wanted = engine::LogitsWanted::Last;
        std::vector<float>* out = nullptr;  // the last token's logits, or every hidden state
        SequenceReads* reads = nullptr;
        Result<void> result;
    };

    void run();
    bool ready_locked() const;

    engine::Engine& engine_;
    mutable std::mutex mu_;
    std::condition_variable step_cv_;  // the step thread waits for inputs
    std::condition_variable done_cv_;  // generations wait for their step
    std::vector<Slot> slots_;
    uint64_t next_order_ = 0;
    bool stopping_ = false;
    BatcherStats stats_;
    std::thread thread_;
};

}  // namespace strata
