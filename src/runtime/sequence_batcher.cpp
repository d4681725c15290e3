#include "runtime/sequence_batcher.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace strata {

SequenceBatcher::SequenceBatcher(engine::Engine& engine) : engine_(engine), slots_(engine.n_seq()) {
    thread_ = std::thread([this] { run(); });
}

SequenceBatcher::~SequenceBatcher() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    step_cv_.notify_all();
    thread_.join();
}

void SequenceBatcher::join(int seq) {
    std::lock_guard lock(mu_);
    assert(seq >= 0 && size_t(seq) < slots_.size() && !slots_[size_t(seq)].joined);
    slots_[size_t(seq)].joined = true;
}

void SequenceBatcher::leave(int seq) {
    {
        std::lock_guard lock(mu_);
        slots_[size_t(seq)].joined = false;
    }
    step_cv_.notify_all();  // the others may have been waiting for it alone
}

Result<void> SequenceBatcher::eval(int seq, std::span<const int32_t> tokens,
                                   engine::LogitsWanted wanted, std::vector<float>& out,
                                   SequenceReads* reads) {
    assert(wanted != engine::LogitsWanted::All);
    if (tokens.empty()) return err("nothing to evaluate: no tokens");
    std::unique_lock lock(mu_);
    Slot& s = slots_[size_t(seq)];
    assert(s.joined && !s.waiting);
    // A sequence whose tokens cannot go in fails alone, before it joins a step: a step's error
    // is every member's.
    if (auto ok = engine_.check_room(tokens, seq); !ok) return ok;
    // Hidden states are written by the steps straight into `out`, chunk by chunk.
    if (wanted == engine::LogitsWanted::Hidden)
        out.resize(tokens.size() * engine_.hparams().n_embd);
    s.pending = tokens;
    s.evaluated = 0;
    s.waiting = true;
    s.done = false;
    s.order = next_order_++;
    s.wanted = wanted;
    s.out = &out;
    s.reads = reads;
    step_cv_.notify_all();
    done_cv_.wait(lock, [&] { return s.done; });
    s.done = false;
    return std::move(s.result);
}

BatcherStats SequenceBatcher::stats() const {
    std::lock_guard lock(mu_);
    return stats_;
}

// A step can start once every joined sequence has handed in its input: a token sampled a
// moment ago is worth waiting for, since the step reads the weights for it too.
bool SequenceBatcher::ready_locked() const {
    bool any = false;
    for (const Slot& s : slots_) {
        if (!s.joined) continue;
        if (!s.waiting) return false;
        any = true;
    }
    return any;
}

void SequenceBatcher::run() {
    std::vector<engine::SeqTokens> inputs;
    std::vector<size_t> taken;  // tokens of each input's sequence in this step
    std::vector<int> prompts;
    std::vector<float> logits;
    std::unique_lock lock(mu_);
    for (;;) {
        step_cv_.wait(lock, [&] { return stopping_ || ready_locked(); });
        if (!ready_locked()) return;  // stopping, and nobody is waiting

        // Decoding sequences' tokens first, then the waiting prompts, first come first, as far
        // as the batch has room.
        inputs.clear();
        taken.clear();
        prompts.clear();
        size_t room = engine_.max_batch();
        auto take = [&](int seq) {
            Slot& s = slots_[size_t(seq)];
            const size_t n = std::min(room, s.pending.size());
            engine::SeqTokens in;
            in.seq = seq;
            in.tokens = s.pending.first(n);
            if (s.wanted == engine::LogitsWanted::Hidden) {
                in.hidden = s.out->data() + s.evaluated * engine_.hparams().n_embd;
            } else {
                in.logits = n == s.pending.size();
            }
            inputs.push_back(in);
            taken.push_back(n);
            room -= n;
        };
        for (size_t q = 0; q < slots_.size() && room > 0; ++q) {
            const Slot& s = slots_[q];
            if (!s.waiting) continue;
            if (s.pending.size() == 1) {
                take(int(q));
            } else {
                prompts.push_back(int(q));
            }
        }
        std::sort(prompts.begin(), prompts.end(),
                  [&](int a, int b) { return slots_[size_t(a)].order < slots_[size_t(b)].order; });
        // Beside decoding sequences a step takes a quarter batch of prompt: each of their tokens
        // waits for the whole step, so a long prompt advances in chunks that keep it short.
        if (!inputs.empty())
            room = std::min(room, prompt_tokens_beside_decode(engine_.max_batch()));
        for (int q : prompts) {
            if (room == 0) break;
            take(q);
        }

        // The engine runs unlocked: the sequences in the step wait for it, the others may
        // join, leave or hand in inputs meanwhile.
        lock.unlock();
        const uint64_t weight_before = engine_.stats().weight_bytes;
        const uint64_t disk_before = engine_.store().stats().bytes_from_disk;
        Result<void> r = engine_.eval_sequences(inputs, logits);
        const double weight = double(engine_.stats().weight_bytes - weight_before);
        const double disk = double(engine_.store().stats().bytes_from_disk - disk_before);
        lock.lock();

        const size_t total = std::accumulate(taken.begin(), taken.end(), size_t(0));
        ++stats_.steps;
        stats_.tokens += total;
        stats_.widest_step = std::max(stats_.widest_step, uint32_t(inputs.size()));
        stats_.sequence_steps += inputs.size();
        size_t row = 0;
        for (size_t i = 0; i < inputs.size(); ++i) {
            Slot& s = slots_[size_t(inputs[i].seq)];
            if (taken[i] == 1 && s.pending.size() == 1 && inputs[i].logits) ++stats_.decode_tokens;
            if (s.reads) {
                s.reads->weight_bytes += weight * double(taken[i]) / double(total);
                s.reads->disk_bytes += disk * double(taken[i]) / double(total);
            }
            s.pending = s.pending.subspan(taken[i]);
            s.evaluated += taken[i];
            if (!r || s.pending.empty()) {
                if (r && inputs[i].logits) {
                    const size_t n_vocab = engine_.n_vocab();
                    s.out->assign(logits.begin() + long(row * n_vocab),
                                  logits.begin() + long((row + 1) * n_vocab));
                }
                s.result = r;
                s.pending = {};
                s.waiting = false;
                s.done = true;
            }
            if (inputs[i].logits) ++row;
        }
        done_cv_.notify_all();
    }
}

}  // namespace strata
