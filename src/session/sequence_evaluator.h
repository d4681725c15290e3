// How one sequence's evaluations reach an engine that several sequences share. The runtime's
// SequenceBatcher (runtime/sequence_batcher.h) is one: it evaluates the inputs of every sequence
// that has joined in one step, so that each weight read serves them all. A generation or an
// embedding joins while it has work (steps then wait for its inputs) and hands each input to
// eval() instead of the engine; the engine may be busy with the others' steps whenever it is not
// evaluating.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "util/result.h"

namespace strata {

// Bytes read on a sequence's behalf: its share of every step it was in.
struct SequenceReads {
    double weight_bytes = 0;
    double disk_bytes = 0;
};

class SequenceEvaluator {
  public:
    virtual ~SequenceEvaluator() = default;

    // Sequence `seq` takes part in steps from now on: steps wait for its inputs.
    virtual void join(int seq) = 0;
    // It no longer does (its work ended, or failed).
    virtual void leave(int seq) = 0;
    // Evaluates `tokens` for joined sequence `seq` in the coming steps and returns once they are
    // in its context, with in `out` the logits of the last one (LogitsWanted::Last: what the next
    // token is drawn from) or the final hidden state of every one (LogitsWanted::Hidden, n_embd
    // floats a token: what an embedding pools). `reads` (may be null) accumulates its share of
    // what the steps read.
    virtual Result<void> eval(int seq, std::span<const int32_t> tokens, engine::LogitsWanted wanted,
                              std::vector<float>& out, SequenceReads* reads) = 0;
};

// Sequence `seq` joined to `evaluator` while this lives (with no evaluator, nothing happens): a
// generation's or an embedding's steps wait for its inputs from its first one to its end.
class JoinedSequence {
  public:
    JoinedSequence(SequenceEvaluator* evaluator, int seq) : evaluator_(evaluator), seq_(seq) {
        if (evaluator_) evaluator_->join(seq_);
    }
    ~JoinedSequence() {
        if (evaluator_) evaluator_->leave(seq_);
    }
    JoinedSequence(const JoinedSequence&) = delete;
    JoinedSequence& operator=(const JoinedSequence&) = delete;

  private:
    SequenceEvaluator* evaluator_;
    int seq_;
};

}  // namespace strata
