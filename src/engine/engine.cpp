#include "engine/engine.h"

#include <algorithm>
#include <cmath>

#include "engine/op_figures.h"
#include "model/activation_memory.h"
#include "model/architecture.h"
#include "util/thread_pool.h"

namespace strata::engine {

const char* op_name(Op op) {
    switch (op) {
        case Op::Projection:
            return "attention projections";
        case Op::Attention:
            return "attention";
        case Op::Ffn:
            return "dense FFN";
        case Op::Experts:
            return "experts";
        case Op::Router:
            return "router";
        case Op::LmHead:
            return "LM head";
        case Op::Elementwise:
            return "norms, rope, embeddings";
        case Op::Count:
            break;
    }
    return "?";
}

void Engine::dump(std::string_view name, int layer, Act a, int64_t rows, int64_t cols) {
    if (dump_.enabled()) dump_.write(name, layer, be_->peek(a, rows), rows, cols);
}

Engine::Engine(const ModelHparams& hp, WeightStore& store, const EngineOptions& options)
    : hp_(hp),
      store_(store),
      max_batch_(std::max<uint32_t>(1, options.max_batch)),
      threads_(options.threads > 0 ? options.threads : physical_core_count()),
      forced_routing_(options.forced_routing) {}

static_assert(sizeof(ExpertJob) <= kExpertJobBytes, "activation_memory.h counts less");

Result<std::unique_ptr<Engine>> Engine::create(const ModelHparams& hp, WeightStore& store,
                                               const EngineOptions& options,
                                               BackendFactory make_backend) {
    const LayerFn fn = layer_function(hp.arch);
    if (!fn) return err("strata cannot run architecture '" + hp.arch + "'");
    const LayerView& g = store.globals();
    const TensorView& embd = g.weight(TensorRole::TokenEmbedding);
    if (embd.row_bytes == 0) return err("the model has no token_embd.weight");
    if (!g.weight(TensorRole::OutputNorm).present()) return err("the model has no output_norm");
    const TensorView& head = store.head_view();
    if (head.ne[0] != hp.n_embd || embd.ne[0] != hp.n_embd) {
        return err("token_embd / output rows do not have n_embd = " + std::to_string(hp.n_embd) +
                   " values");
    }
    STRATA_ASSIGN(RopeConfig rope, make_rope_config(hp, &g.weight(TensorRole::RopeFreqs)));
    const uint32_t n_ctx = options.n_ctx ? options.n_ctx : default_context(hp);
    if (const RoutingTrace* t = options.forced_routing.get()) {
        if (!hp.is_moe() || t->n_layer != int(hp.n_layer) || t->n_expert != int(hp.n_expert) ||
            t->k != int(hp.n_expert_used) || t->tokens() == 0) {
            return err("the routing trace (" + std::to_string(t->n_layer) + " layers, " +
                       std::to_string(t->n_expert) + " experts, top-" + std::to_string(t->k) +
                       ") does not fit this model");
        }
    }
    ExecutionTable table = options.execution.units.empty()
                               ? ExecutionTable::on_one(ComputeUnit{}, hp.n_layer)
                               : options.execution;
    STRATA_TRY(table.check(hp.n_layer));

    std::unique_ptr<Engine> e(new Engine(hp, store, options));
    e->layer_fn_ = fn;
    e->n_ctx_ = n_ctx;
    e->n_vocab_ = static_cast<uint32_t>(head.rows());
    bool staging = false;
    for (size_t u = 0; u < table.units.size(); ++u) {
        BackendConfig config;
        config.hp = hp;
        config.rope = rope;
        config.n_ctx = n_ctx;
        config.n_seq = std::max(1u, options.n_seq);
        config.kv_type = options.kv_type;
        config.max_batch = e->max_batch_;
        config.threads = e->threads_;
        config.layers.assign(hp.n_layer, false);
        for (uint32_t l = 0; l < hp.n_layer; ++l) config.layers[l] = table.layers[l].unit == u;
        config.staging_bytes = table.units[u].staging_bytes;
        config.tuning = options.tuning;
        config.cpu_kernels = options.cpu_kernels;
        staging = staging || config.staging_bytes > 0;
        STRATA_ASSIGN(std::unique_ptr<Backend> backend, make_backend(table.units[u], config));
        e->backends_.push_back(std::move(backend));
    }
    e->table_ = std::move(table);
    STRATA_TRY(e->check_readers());
    e->be_ = e->unit(e->table_.embedding_unit);
    if (e->backends_.size() > 1) {
        e->crossing_.resize(size_t(batch_rows(e->max_batch_, n_ctx)) * size_t(widest_crossing(hp)));
        if (staging) {
            // Unpinned, the crossings still work, at pageable copy speed.
            auto pin = gpu::HostPin::pin(e->crossing_.data(), e->crossing_.size() * sizeof(float));
            if (pin) e->crossing_pin_ = std::move(*pin);
        }
    }
    e->kv_type_ = options.kv_type;
    e->n_past_.assign(std::max(1u, options.n_seq), 0);
    e->kv_written_.assign(std::max(1u, options.n_seq), 0);
    e->row_ids_.resize(e->max_batch_);
    for (uint32_t i = 0; i < e->max_batch_; ++i) e->row_ids_[i] = int32_t(i);
    if (!options.dump_dir.empty()) {
        STRATA_ASSIGN(e->dump_, DebugDump::open(options.dump_dir));
    }
    if (hp.is_moe()) STRATA_TRY(e->set_up_experts(options));
    return e;
}

Result<void> Engine::check_readers() const {
    const LayerView& g = store_.globals();
    const auto readable = [&](int u, const TensorView& v) {
        return !v.present() || unit(u)->can_read(v.where);
    };
    if (!readable(table_.embedding_unit, g.weight(TensorRole::TokenEmbedding)) &&
        g.weight(TensorRole::TokenEmbedding).present()) {
        return err(std::string(unit(table_.embedding_unit)->name()) +
                   " cannot read the token-embedding table where it is");
    }
    if (!readable(table_.head_unit, store_.head_view()) ||
        !readable(table_.head_unit, g.weight(TensorRole::OutputNorm))) {
        return err(std::string(unit(table_.head_unit)->name()) +
                   " cannot read the output norm and head where they are");
    }
    for (uint32_t l = 0; l < hp_.n_layer; ++l) {
        if (!hp_.is_moe_layer(l)) continue;
        if (!unit(table_.layers[l].experts_unit)->can_read(store_.experts_place(int(l)))) {
            return err(std::string(unit(table_.layers[l].experts_unit)->name()) +
                       " cannot read the routed experts of layer " + std::to_string(l) +
                       " where they are");
        }
    }
    return {};
}

void Engine::reset_stats() {
    const size_t n_moe = stats_.moe.size();
    stats_ = {};
    stats_.moe.assign(n_moe, {});
    store_.reset_stats();
}

uint32_t Engine::truncate(uint32_t n_keep, int seq) {
    uint32_t& past = n_past_[size_t(seq)];
    uint32_t& written = kv_written_[size_t(seq)];
    uint32_t keep = std::min(past, n_keep);
    // The recurrent state is the context's summary at its end, with no way back: a hybrid model
    // keeps all or nothing (recomputing the prefix is the price of reusing none of it).
    if (hp_.has_recurrent() && keep < past) keep = 0;
    if (keep > 0 && hp_.n_swa > 0 && keep < written) {
        // The next query (at keep) needs keys from keep - n_swa + 1 on; a ring of `slots`
        // positions still holds them unless a later position, written before, took their slot.
        uint32_t slots = n_ctx_;
        for (uint32_t l = 0; l < hp_.n_layer; ++l) {
            slots = std::min(slots, kv_layer_positions(hp_, l, n_ctx_, max_batch_));
        }
        const uint64_t oldest = keep >= hp_.n_swa ? keep - hp_.n_swa + 1 : 0;
        if (oldest + slots < written) keep = 0;
    }
    past = keep;
    if (keep == 0) restart_sequence(seq);
    return keep;
}

void Engine::restart_sequence(int seq) {
    n_past_[size_t(seq)] = 0;
    kv_written_[size_t(seq)] = 0;
    if (!hp_.has_recurrent()) return;
    for (auto& b : backends_) b->reset_recurrent(seq);
}

Result<void> Engine::check_room(std::span<const int32_t> tokens, int seq) const {
    if (seq < 0 || size_t(seq) >= n_past_.size()) {
        return err("sequence " + std::to_string(seq) + " does not exist (the engine holds " +
                   std::to_string(n_past_.size()) + ")");
    }
    const uint32_t past = n_past_[size_t(seq)];
    if (uint64_t(past) + tokens.size() > n_ctx()) {
        return err("the context is full: " + std::to_string(past) + " of " +
                   std::to_string(n_ctx()) + " positions used, " + std::to_string(tokens.size()) +
                   " more do not fit");
    }
    for (int32_t t : tokens) {
        if (t < 0 || uint32_t(t) >= n_vocab_) {
            return err("token id " + std::to_string(t) + " is outside the vocabulary (" +
                       std::to_string(n_vocab_) + " tokens)");
        }
    }
    return {};
}

Result<void> Engine::eval(std::span<const int32_t> tokens, LogitsWanted wanted,
                          std::vector<float>& logits, int seq) {
    if (tokens.empty()) return err("nothing to evaluate: no tokens");
    STRATA_TRY(check_room(tokens, seq));
    const bool every = wanted != LogitsWanted::Last;
    const size_t row = wanted == LogitsWanted::Hidden ? size_t(hp_.n_embd) : size_t(n_vocab_);
    const uint32_t start = n_past_[size_t(seq)];
    logits.resize(row * (every ? tokens.size() : 1));
    for (size_t first = 0; first < tokens.size(); first += max_batch_) {
        const size_t count = std::min<size_t>(max_batch_, tokens.size() - first);
        const bool last = first + count == tokens.size();
        float* out = every ? logits.data() + first * row : (last ? logits.data() : nullptr);
        // A failure part way through leaves the context as it was before the call (a hybrid
        // model's recurrent state has moved on: it starts again, and truncate says so).
        if (auto r = eval_batch(tokens.subspan(first, count), wanted, out, seq); !r) {
            n_past_[size_t(seq)] = start;
            if (hp_.has_recurrent()) restart_sequence(seq);
            return r;
        }
    }
    return {};
}

Result<void> Engine::eval_sequences(std::span<const SeqTokens> inputs, std::vector<float>& logits) {
    size_t wanted = 0;
    std::vector<char>& seen = seen_;
    seen.assign(n_past_.size(), 0);
    for (const SeqTokens& in : inputs) {
        if (in.tokens.empty())
            return err("nothing to evaluate for sequence " + std::to_string(in.seq) +
                       ": no tokens");
        STRATA_TRY(check_room(in.tokens, in.seq));
        if (seen[size_t(in.seq)]) {
            return err("sequence " + std::to_string(in.seq) + " appears twice in one evaluation");
        }
        seen[size_t(in.seq)] = 1;
        wanted += in.logits ? 1 : 0;
    }
    if (forced_routing_ && inputs.size() > 1) {
        return err("a forced routing trace replays one sequence at a time");
    }
    logits.resize(wanted * n_vocab_);
    // Only these sequences' contexts are touched (others may be truncated by their owners
    // meanwhile), and only they are put back after an error.
    std::vector<std::pair<int, uint32_t>>& start = start_;
    start.clear();
    for (const SeqTokens& in : inputs) start.emplace_back(in.seq, n_past_[size_t(in.seq)]);
    float* out = logits.data();
    // Batches of up to max_batch rows, filled in entry order; an entry may straddle two. The
    // rows whose logits are handed out are the last rows of entries that ask for them.
    size_t entry = 0, done = 0;  // the next entry and how many of its tokens are in batches
    std::vector<int64_t>& logit_rows = logit_rows_;
    std::vector<HiddenRows>& hidden_rows = hidden_rows_;
    const TensorView& norm = store_.globals().weight(TensorRole::OutputNorm);
    while (entry < inputs.size()) {
        batch_tokens_.clear();
        batch_runs_.clear();
        logit_rows.clear();
        hidden_rows.clear();
        while (entry < inputs.size() && batch_tokens_.size() < max_batch_) {
            const SeqTokens& in = inputs[entry];
            const size_t take =
                std::min(in.tokens.size() - done, max_batch_ - batch_tokens_.size());
            const int64_t row0 = int64_t(batch_tokens_.size());
            batch_runs_.push_back(
                SeqRun{in.seq, row0, int64_t(take), int64_t(n_past_[size_t(in.seq)])});
            batch_tokens_.insert(batch_tokens_.end(), in.tokens.begin() + long(done),
                                 in.tokens.begin() + long(done + take));
            if (in.hidden) {
                hidden_rows.push_back({row0, int64_t(take), in.hidden + done * size_t(hp_.n_embd)});
            }
            done += take;
            if (done == in.tokens.size()) {
                if (in.logits) logit_rows.push_back(row0 + int64_t(take) - 1);
                ++entry;
                done = 0;
            }
        }
        // An entry straddling two batches continues where its first part ended: forward()
        // advanced its sequence by that part.
        const uint64_t served_before = store_.stats().bytes_served;
        Result<void> r = forward(batch_tokens_, batch_runs_);
        int heads = 0;
        for (size_t i = 0; r && i < logit_rows.size();) {
            size_t j = i + 1;  // rows i..j-1 are consecutive: one pass over the head
            while (j < logit_rows.size() && logit_rows[j] == logit_rows[j - 1] + 1) ++j;
            r = output_head(norm, logit_rows[i], int64_t(j - i), out);
            out += (j - i) * n_vocab_;
            ++heads;
            i = j;
        }
        if (r) {
            for (const HiddenRows& h : hidden_rows) {
                timed(Op::Elementwise,
                      [&] { be_->output_norm(norm, h.first, h.rows, h.out, hp_.n_embd); });
            }
        }
        if (!r) {
            for (const auto& [seq, past] : start) {
                n_past_[size_t(seq)] = past;
                if (hp_.has_recurrent()) restart_sequence(seq);
            }
            return r;
        }
        count_batch(int64_t(batch_tokens_.size()), served_before, heads);
    }
    return {};
}

void Engine::cross(Act a, Backend* from, Backend* to, int64_t n, int64_t cols) {
    if (cols == 0) cols = hp_.n_embd;
    from->read_act(a, crossing_.data(), n, cols);
    to->write_act(a, crossing_.data(), n, cols);
}

void Engine::switch_to(Backend* next, int64_t n) {
    if (next == be_) return;
    cross(Act::Hidden, be_, next, n);
    be_ = next;
}

Result<void> Engine::forward(std::span<const int32_t> tokens, std::span<const SeqRun> runs) {
    const int64_t n = int64_t(tokens.size());
    const int64_t d = hp_.n_embd;
    dump_.begin_call(runs.front().pos0);

    STRATA_ASSIGN(const WeightStore::EmbeddingLookup lookup, store_.embedding_rows(tokens));
    const std::span<const int32_t> rows =
        lookup.rows_in_order ? std::span<const int32_t>(row_ids_).first(tokens.size()) : tokens;
    be_ = unit(table_.embedding_unit);
    if (!be_->can_read(lookup.table->where)) {
        return err(std::string(be_->name()) +
                   " cannot read the token-embedding rows where they are");
    }
    timed(Op::Elementwise, [&] { be_->embed(*lookup.table, rows); });
    dump("inp_embd", -1, Act::Hidden, n, d);

    for (int il = 0; il < int(hp_.n_layer); ++il) {
        switch_to(unit(table_.layers[size_t(il)].unit), n);
        STRATA_ASSIGN(const LayerView* w, store_.acquire_layer(il));
        Result<void> r = layer_fn_(*this, LayerArgs{il, *w, n, runs});
        store_.release_layer(il);
        STRATA_TRY(r);
        dump("l_out", il, Act::Hidden, n, d);
    }
    switch_to(unit(table_.head_unit), n);
    for (const SeqRun& run : runs) {
        n_past_[size_t(run.seq)] += uint32_t(run.n);
        kv_written_[size_t(run.seq)] =
            std::max(kv_written_[size_t(run.seq)], n_past_[size_t(run.seq)]);
    }
    return {};
}

void Engine::count_batch(int64_t n, uint64_t served_before, int heads) {
    const TensorView& head = store_.head_view();
    const uint64_t head_bytes = head.row_bytes * uint64_t(head.rows());
    const TensorView& embd = store_.globals().weight(TensorRole::TokenEmbedding);
    stats_.weight_bytes += store_.stats().bytes_served - served_before +
                           uint64_t(heads) * head_bytes + uint64_t(n) * embd.row_bytes;
    stats_.tokens += uint64_t(n);
    ++stats_.eval_calls;
}

Result<void> Engine::eval_batch(std::span<const int32_t> tokens, LogitsWanted wanted, float* out,
                                int seq) {
    const int64_t n = int64_t(tokens.size());
    const int64_t d = hp_.n_embd;
    const uint64_t served_before = store_.stats().bytes_served;
    const SeqRun run{seq, 0, n, int64_t(n_past_[size_t(seq)])};
    STRATA_TRY(forward(tokens, {&run, 1}));

    int heads = 0;
    const TensorView& norm = store_.globals().weight(TensorRole::OutputNorm);
    if (out && wanted == LogitsWanted::Hidden) {
        timed(Op::Elementwise, [&] { be_->output_norm(norm, 0, n, out, d); });
        if (dump_.enabled()) dump_.write("result_norm", -1, out, n, d);
    } else if (out) {
        const int64_t first = wanted == LogitsWanted::All ? 0 : n - 1;
        STRATA_TRY(output_head(norm, first, n - first, out));
        dump("result_norm", -1, Act::Normed, n - first, d);
        if (dump_.enabled()) dump_.write("result_output", -1, out, n - first, n_vocab_);
        heads = 1;
    }
    count_batch(n, served_before, heads);
    return {};
}

Result<void> Engine::output_head(const TensorView& norm, int64_t first, int64_t rows, float* out) {
    const int pieces = store_.head_pieces();
    int64_t vocab_first = 0;
    if (pieces == 1) {
        STRATA_ASSIGN(const TensorView* head, store_.acquire_head_piece(0, vocab_first));
        timed(
            Op::LmHead, [&] { be_->output_head(norm, *head, first, rows, out); }, view_bytes(*head),
            view_flops(*head, rows));
        store_.release_head_piece(0);
        return {};
    }
    timed(Op::LmHead, [&] { be_->normalize_output(norm, first, rows); });
    for (int p = 0; p < pieces; ++p) {
        STRATA_ASSIGN(const TensorView* piece, store_.acquire_head_piece(p, vocab_first));
        timed(
            Op::LmHead,
            [&] { be_->head_logits(*piece, vocab_first, int64_t(n_vocab_), rows, out); },
            view_bytes(*piece), view_flops(*piece, rows));
        store_.release_head_piece(p);
    }
    return {};
}

}  // namespace strata::engine
