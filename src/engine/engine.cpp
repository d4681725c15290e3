#include "engine/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "backend/cpu/cpu_backend.h"
#include "model/activation_memory.h"
#include "util/thread_pool.h"
#if STRATA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

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

namespace {

Result<std::unique_ptr<Backend>> make_backend(const BackendSpec& spec,
                                              const BackendConfig& config) {
    switch (spec.kind) {
        case BackendKind::Cpu:
            return make_cpu_backend(config);
        case BackendKind::Cuda:
#if STRATA_HAVE_CUDA
            return make_cuda_backend(config, spec.device);
#else
            return err("this strata was built without CUDA: it cannot run layers on a GPU");
#endif
    }
    return err("unknown backend");
}

}  // namespace

template <typename F>
void Engine::timed(Op op, F&& f, double bytes, double flops) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    OpFigures& o = stats_.ops[size_t(op)];
    o.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.bytes += bytes;
    o.flops += flops;
}

static_assert(sizeof(ExpertJob) <= kExpertJobBytes, "activation_memory.h counts less");

namespace {
// Bytes and multiply-add flops of projecting n rows through these weights.
double view_bytes(const TensorView& w) {
    return w.present() ? double(w.row_bytes) * double(w.rows()) : 0.0;
}
double view_flops(const TensorView& w, int64_t n) {
    return w.present() ? 2.0 * double(w.ne[0]) * double(w.rows()) * double(n) : 0.0;
}
}  // namespace

void Engine::dump(std::string_view name, int layer, Act a, int64_t rows, int64_t cols) {
    if (dump_.enabled()) dump_.write(name, layer, be_->peek(a, rows), rows, cols);
}

Engine::Engine(const ModelHparams& hp, WeightStore& store, const EngineOptions& options)
    : hp_(hp),
      store_(store),
      max_batch_(std::max<uint32_t>(1, options.max_batch)),
      threads_(options.threads > 0 ? options.threads : physical_core_count()),
      forced_routing_(options.forced_routing) {}

Result<std::unique_ptr<Engine>> Engine::create(const ModelHparams& hp, WeightStore& store,
                                               const EngineOptions& options) {
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
    std::vector<int> assign = options.layer_backend;
    if (assign.empty()) assign.assign(hp.n_layer, 0);
    if (assign.size() != hp.n_layer) {
        return err("layer_backend names " + std::to_string(assign.size()) +
                   " layers, the model has " + std::to_string(hp.n_layer));
    }
    for (int b : assign) {
        if (b < 0) return err("layer_backend: backend index " + std::to_string(b) + " is negative");
    }
    const int n_backends = assign.empty() ? 1 : *std::max_element(assign.begin(), assign.end()) + 1;
    if (!options.backends.empty() && size_t(n_backends) > options.backends.size()) {
        return err("layer_backend names backend " + std::to_string(n_backends - 1) + " of " +
                   std::to_string(options.backends.size()));
    }

    std::unique_ptr<Engine> e(new Engine(hp, store, options));
    e->layer_fn_ = fn;
    e->n_ctx_ = n_ctx;
    e->n_vocab_ = static_cast<uint32_t>(head.rows());
    for (int b = 0; b < n_backends; ++b) {
        BackendConfig config;
        config.hp = hp;
        config.rope = rope;
        config.n_ctx = n_ctx;
        config.n_seq = std::max(1u, options.n_seq);
        config.kv_type = options.kv_type;
        config.max_batch = e->max_batch_;
        config.threads = e->threads_;
        config.layers.assign(hp.n_layer, false);
        for (uint32_t l = 0; l < hp.n_layer; ++l) config.layers[l] = assign[l] == b;
        const BackendSpec spec =
            options.backends.empty() ? BackendSpec{} : options.backends[size_t(b)];
        config.prompt_staging = spec.kind == BackendKind::Cuda ? options.gpu_prompt_staging : 0;
        STRATA_ASSIGN(std::unique_ptr<Backend> backend, make_backend(spec, config));
        if (config.prompt_staging > 0 && !hp.is_moe()) e->shipper_ = backend.get();
        e->backends_.push_back(std::move(backend));
    }
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        e->layer_backend_.push_back(e->backends_[size_t(assign[l])].get());
    }
    e->be_ = e->layer_backend_.empty() ? e->backends_[0].get() : e->layer_backend_[0];
    // The output norm and head run where the last layer ran when that backend can read them.
    const TensorView& out_norm = g.weight(TensorRole::OutputNorm);
    e->head_backend_ =
        e->reader_of(head.where, e->layer_backend_.empty() ? e->be_ : e->layer_backend_.back());
    if (!e->head_backend_ || !e->head_backend_->can_read(out_norm.where)) {
        return err("no backend can read both the output norm and the output head where they are");
    }
    if (n_backends > 1) {
        e->crossing_.resize(size_t(batch_rows(e->max_batch_, n_ctx)) * size_t(widest_crossing(hp)));
        if (e->shipper_) {
            // Unpinned, the crossings still work, at pageable copy speed.
            auto pin = gpu::HostPin::pin(e->crossing_.data(), e->crossing_.size() * sizeof(float));
            if (pin) e->crossing_pin_ = std::move(*pin);
        }
    }
    e->kv_type_ = options.kv_type;
    e->n_past_.assign(std::max(1u, options.n_seq), 0);
    e->row_ids_.resize(e->max_batch_);
    for (uint32_t i = 0; i < e->max_batch_; ++i) e->row_ids_[i] = int32_t(i);
    if (hp.is_moe()) {
        const size_t n_expert = hp.n_expert, k = hp.n_expert_used, rows = e->max_batch_;
        e->router_logits_.resize(rows * n_expert);
        e->choice_.resize(rows * k);
        e->weight_.resize(rows * k);
        e->users_.reserve(rows * k);
        e->user_weights_.reserve(rows * k);
        e->jobs_.reserve(n_expert);
        e->cpu_jobs_.reserve(n_expert);
        e->gpu_jobs_.reserve(n_expert);
        e->vram_views_.reserve(n_expert);
        e->on_gpu_.reserve(n_expert);
        e->expert_ids_.reserve(n_expert);
        e->guess_.resize(k);
        e->next_logits_.resize(n_expert);
        e->guess_weight_.resize(k);
        e->routing_.probs.reserve(n_expert);
        e->routing_.order.reserve(n_expert);
    }
    std::string dump_dir = options.dump_dir;
    if (dump_dir.empty()) {
        if (const char* env = std::getenv("STRATA_DUMP")) dump_dir = env;
    }
    if (!dump_dir.empty()) {
        STRATA_ASSIGN(e->dump_, DebugDump::open(dump_dir));
    }
    if (hp.is_moe()) e->stats_.moe.assign(hp.n_layer, {});
    if (options.gpu_expert_entries > 0 && hp.is_moe()) {
        // On the first CUDA backend: the GPU that runs the layers whose experts the CPU computes.
        for (size_t b = 0; b < e->backends_.size() && !e->vram_; ++b) {
            if (options.backends.empty() || options.backends[b].kind != BackendKind::Cuda) continue;
            const uint32_t prefetch = std::min(hp.n_expert_used, options.gpu_expert_prefetch);
            e->vram_gpu_ = e->backends_[b].get();
            STRATA_ASSIGN(e->vram_, VramExpertCache::create(
                                        *e->backends_[b], int(hp.n_layer), int(hp.n_expert),
                                        options.gpu_expert_entries, options.gpu_expert_entry_bytes,
                                        prefetch, e->stats_.vram_experts));
        }
        // The level serves the layers that its GPU runs and whose experts the CPU computes.
        e->vram_layer_.assign(hp.n_layer, 0);
        for (uint32_t l = 0; e->vram_ && l < hp.n_layer; ++l) {
            Backend* lb = e->layer_backend_[l];
            e->vram_layer_[l] =
                lb == e->vram_gpu_ && e->reader_of(store.experts_place(int(l)), lb) != lb;
        }
    }
    return e;
}

void Engine::reset_stats() {
    const size_t n_moe = stats_.moe.size();
    stats_ = {};
    stats_.moe.assign(n_moe, {});
    store_.reset_stats();
}

void Engine::truncate(uint32_t n_keep, int seq) {
    uint32_t& past = n_past_[size_t(seq)];
    past = std::min(past, n_keep);
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
        // A failure part way through leaves the context as it was before the call.
        if (auto r = eval_batch(tokens.subspan(first, count), wanted, out, seq); !r) {
            n_past_[size_t(seq)] = start;
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
                timed(Op::Elementwise, [&] { be_->output_norm(norm, h.first, h.rows, h.out); });
            }
        }
        if (!r) {
            for (const auto& [seq, past] : start) n_past_[size_t(seq)] = past;
            return r;
        }
        count_batch(int64_t(batch_tokens_.size()), served_before, heads);
    }
    return {};
}

Backend* Engine::reader_of(MemoryPlace where, Backend* preferred) const {
    if (preferred->can_read(where)) return preferred;
    for (const auto& b : backends_) {
        if (b->can_read(where)) return b.get();
    }
    return nullptr;
}

void Engine::cross(Act a, Backend* from, Backend* to, int64_t n, int64_t cols) {
    if (cols == 0) cols = hp_.n_embd;
    from->read_act(a, crossing_.data(), n, cols);
    to->write_act(a, crossing_.data(), n, cols);
}

bool Engine::ships_layer(int64_t n) const {
    return shipper_ && be_ != shipper_ && hp_.batch_ships_layers(n);
}

bool Engine::linear_shipped(std::span<const LinearJob> jobs, Act in, int64_t in_cols,
                            std::span<const int64_t> out_cols, int64_t n) {
    if (!ships_layer(n)) return false;
    cross(in, be_, shipper_, n, in_cols);
    if (!shipper_->linear_shipped(jobs, in, n)) return false;
    for (size_t j = 0; j < jobs.size(); ++j) {
        cross(jobs[j].out, shipper_, be_, n, out_cols[j]);
        stats_.shipped_bytes += uint64_t(view_bytes(*jobs[j].weight));
    }
    return true;
}

bool Engine::swiglu_ffn_shipped(const TensorView& gate, const TensorView& up,
                                const TensorView& down, int64_t n) {
    if (!ships_layer(n)) return false;
    cross(Act::Normed, be_, shipper_, n);
    if (!shipper_->swiglu_ffn_shipped(gate, up, down, Act::Normed, Act::Out, n)) return false;
    cross(Act::Out, shipper_, be_, n);
    stats_.shipped_bytes += uint64_t(view_bytes(gate) + view_bytes(up) + view_bytes(down));
    return true;
}

void Engine::ship_layer_ahead(const LayerView& w) {
    // In the order the layer's shipped operations use them.
    constexpr TensorRole roles[] = {TensorRole::AttnQ,      TensorRole::AttnK,   TensorRole::AttnV,
                                    TensorRole::AttnOutput, TensorRole::FfnGate, TensorRole::FfnUp,
                                    TensorRole::FfnDown};
    std::array<const TensorView*, 2 * std::size(roles)> views{};
    size_t count = 0;
    for (TensorRole r : roles) {
        for (const TensorView* v : {&w.weight(r), &w.bias(r)}) {
            if (v->present()) views[count++] = v;
        }
    }
    shipper_->ship_ahead({views.data(), count});
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
    // The embedding runs where the first layer runs when that backend can read the table.
    be_ = reader_of(lookup.table->where,
                    layer_backend_.empty() ? backends_[0].get() : layer_backend_[0]);
    if (!be_) return err("no backend can read the token-embedding table where it is");
    timed(Op::Elementwise, [&] { be_->embed(*lookup.table, rows); });
    dump("inp_embd", -1, Act::Hidden, n, d);

    for (int il = 0; il < int(hp_.n_layer); ++il) {
        switch_to(layer_backend_[size_t(il)], n);
        STRATA_ASSIGN(const LayerView* w, store_.acquire_layer(il));
        Result<void> r = layer_fn_(*this, LayerArgs{il, *w, n, runs});
        store_.release_layer(il);
        STRATA_TRY(r);
        dump("l_out", il, Act::Hidden, n, d);
    }
    switch_to(head_backend_, n);
    for (const SeqRun& run : runs) n_past_[size_t(run.seq)] += uint32_t(run.n);
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
        timed(Op::Elementwise, [&] { be_->output_norm(norm, 0, n, out); });
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

Result<void> Engine::attention_block(const LayerArgs& a) {
    const int il = a.layer;
    const int64_t n = a.n, d = hp_.n_embd;
    const int64_t n_head = hp_.n_head_at(uint32_t(il)), n_head_kv = hp_.n_head_kv_at(uint32_t(il));
    const int64_t dq = n_head * hp_.head_dim_k, dk = n_head_kv * hp_.head_dim_k,
                  dv = n_head_kv * hp_.head_dim_v, da = n_head * hp_.head_dim_v;
    const LayerView& w = a.w;

    if (ships_layer(n)) ship_layer_ahead(w);
    timed(Op::Elementwise,
          [&] { be_->rms_norm(Act::Hidden, w.weight(TensorRole::AttnNorm), Act::Normed, n); });
    dump("attn_norm", il, Act::Normed, n, d);
    const TensorView &wq = w.weight(TensorRole::AttnQ), &wk = w.weight(TensorRole::AttnK),
                     &wv = w.weight(TensorRole::AttnV), &wo = w.weight(TensorRole::AttnOutput);
    timed(
        Op::Projection,
        [&] {
            const LinearJob qkv[] = {{&wq, &w.bias(TensorRole::AttnQ), Act::Q},
                                     {&wk, &w.bias(TensorRole::AttnK), Act::K},
                                     {&wv, &w.bias(TensorRole::AttnV), Act::V}};
            const int64_t widths[] = {dq, dk, dv};
            if (!linear_shipped(qkv, Act::Normed, d, widths, n)) be_->linear(qkv, Act::Normed, n);
        },
        view_bytes(wq) + view_bytes(wk) + view_bytes(wv),
        view_flops(wq, n) + view_flops(wk, n) + view_flops(wv, n));
    timed(Op::Elementwise, [&] {
        be_->rope_store_kv(il, w.weight(TensorRole::AttnQNorm), w.weight(TensorRole::AttnKNorm),
                           a.runs);
    });
    dump("Qcur", il, Act::Q, n, dq);
    dump("Kcur", il, Act::K, n, dk);
    dump("Vcur", il, Act::V, n, dv);

    // Each run reads its sequence's cached keys and values once; token t of a run scores and
    // weighs pos0 + t + 1 positions.
    double kv_bytes = 0, kv_flops = 0;
    const double kv_element = kv_type_ == KvType::F16 ? 2.0 : 34.0 / 32.0;
    for (const SeqRun& run : a.runs) {
        const double seen = double(run.pos0 + run.n);
        kv_bytes += seen * double(dk + dv) * kv_element;
        kv_flops += 2.0 * double(n_head) * double(hp_.head_dim_k + hp_.head_dim_v) *
                    (double(run.n) * double(run.pos0) + double(run.n) * double(run.n + 1) / 2);
    }
    timed(
        Op::Attention, [&] { be_->attention(il, a.runs); }, kv_bytes, kv_flops);
    dump("kqv_out", il, Act::AttnOut, n, da);
    timed(
        Op::Projection,
        [&] {
            const LinearJob out[] = {{&wo, &w.bias(TensorRole::AttnOutput), Act::Out}};
            const int64_t widths[] = {d};
            if (!linear_shipped(out, Act::AttnOut, da, widths, n))
                be_->linear(out, Act::AttnOut, n);
        },
        view_bytes(wo), view_flops(wo, n));
    be_->add(Act::Hidden, Act::Out, n);
    dump("ffn_inp", il, Act::Hidden, n, d);
    return {};
}

void Engine::ffn_norm(const LayerArgs& a) {
    timed(Op::Elementwise,
          [&] { be_->rms_norm(Act::Hidden, a.w.weight(TensorRole::FfnNorm), Act::Normed, a.n); });
    dump("ffn_norm", a.layer, Act::Normed, a.n, hp_.n_embd);
}

Result<void> Engine::dense_ffn_block(const LayerArgs& a) {
    const LayerView& w = a.w;
    ffn_norm(a);
    const TensorView &gate = w.weight(TensorRole::FfnGate), &up = w.weight(TensorRole::FfnUp),
                     &down = w.weight(TensorRole::FfnDown);
    timed(
        Op::Ffn,
        [&] {
            if (!swiglu_ffn_shipped(gate, up, down, a.n)) {
                be_->swiglu_ffn(gate, up, down, Act::Normed, Act::Out, a.n);
            }
        },
        view_bytes(gate) + view_bytes(up) + view_bytes(down),
        view_flops(gate, a.n) + view_flops(up, a.n) + view_flops(down, a.n));
    dump("ffn_out", a.layer, Act::Out, a.n, hp_.n_embd);
    be_->add(Act::Hidden, Act::Out, a.n);
    return {};
}

Result<void> Engine::moe_ffn_block(const LayerArgs& a, bool norm_weights) {
    const int64_t n = a.n;
    const LayerView& w = a.w;
    ffn_norm(a);
    Result<void> r;
    timed(Op::Experts,
          [&] { r = routed_experts(a, w.weight(TensorRole::MoeRouter), norm_weights); });
    STRATA_TRY(r);
    if (w.weight(TensorRole::SharedGate).present()) {
        const TensorView &sg = w.weight(TensorRole::SharedGate),
                         &su = w.weight(TensorRole::SharedUp),
                         &sd = w.weight(TensorRole::SharedDown);
        timed(
            Op::Ffn,
            [&] {
                be_->swiglu_ffn(sg, su, sd, Act::Normed, Act::Side, n);
                const TensorView& gate = w.weight(TensorRole::SharedExpertGate);
                if (gate.present()) be_->sigmoid_gate(gate, Act::Normed, Act::Side, n);
                be_->add(Act::Out, Act::Side, n);
            },
            view_bytes(sg) + view_bytes(su) + view_bytes(sd),
            view_flops(sg, n) + view_flops(su, n) + view_flops(sd, n));
    }
    dump("ffn_out", a.layer, Act::Out, n, hp_.n_embd);
    be_->add(Act::Hidden, Act::Out, n);
    return {};
}

// Routes the batch (Normed) to its top experts, fetches each chosen expert from the store once
// for all the tokens that chose it, and leaves the weighted sum of their outputs in Out.
Result<void> Engine::routed_experts(const LayerArgs& a, const TensorView& router,
                                    bool norm_weights) {
    const int layer = a.layer;
    const int64_t n = a.n;
    const MoeConfig cfg{int(hp_.n_expert), int(hp_.n_expert_used), norm_weights,
                        forced_routing_.get(), a.runs.front().pos0};
    const int k = cfg.n_used;
    MoeLayerStats& stats = stats_.moe[size_t(layer)];
    OpFigures& figures = stats_.ops[size_t(Op::Experts)];
    figures.bytes += view_bytes(router);
    figures.flops += view_flops(router, n);
    // A batch routed and computed on a device: which experts were chosen stays there, counted as
    // n * k distinct ones (at most all of them), each token through its k.
    const auto count_on_device = [&](const ExpertStack& stack) {
        stats.token_choices += uint64_t(n * k);
        const ExpertView& e = stack.first;
        const double one = view_bytes(e.gate) + view_bytes(e.up) + view_bytes(e.down);
        figures.bytes += one * double(std::min<int64_t>(n * k, cfg.n_expert));
        figures.flops +=
            (view_flops(e.gate, 1) + view_flops(e.up, 1) + view_flops(e.down, 1)) * double(n * k);
    };
    // The layer's backend routes and computes its experts where it can read them; otherwise (a
    // plan that keeps them and their router in RAM for the CPU beside a GPU) the normalized
    // input crosses to one that can, once, and the weighted sum comes back.
    Backend* xb = reader_of(store_.experts_place(layer), be_);
    if (!xb) return err("no backend can read the routed experts of layer ", std::to_string(layer));
    // A batch that uses every expert twice on average, on a layer whose experts wait in RAM: the
    // layer's backend takes them across the bus if it can (ModelHparams::batch_ships_experts).
    if (xb != be_ && !cfg.forced && hp_.batch_ships_experts(n)) {
        if (const auto stack = store_.resident_experts(layer);
            stack && be_->routed_experts_shipped(router, *stack, k, norm_weights, Act::Normed,
                                                 Act::Out, n)) {
            count_on_device(*stack);
            const ExpertView& e = stack->first;
            stats_.shipped_bytes +=
                uint64_t(view_bytes(router) +
                         double(stack->n_expert) *
                             (view_bytes(e.gate) + view_bytes(e.up) + view_bytes(e.down)));
            return {};
        }
    }
    if (xb != be_) cross(Act::Normed, be_, xb, n);
    if (!cfg.forced && xb == be_) {
        // A backend that holds every expert routes and runs them without the host.
        if (const auto stack = store_.resident_experts(layer);
            stack &&
            be_->routed_experts(router, *stack, k, norm_weights, Act::Normed, Act::Out, n)) {
            count_on_device(*stack);
            return {};
        }
    }
    Backend* rb = reader_of(router.where, xb);
    if (!rb) return err("no backend can read the router of layer ", std::to_string(layer));
    if (rb != xb) cross(Act::Normed, xb, rb, n);
    // The next layer's router applied to this input (its last token's) guesses which experts it
    // will choose; for one token, in one pass with this layer's router.
    if (const TensorView* next = next_router(layer, n, rb); next && n == 1) {
        rb->project_pair_to_host(router, *next, Act::Normed, 0, 1, router_logits_.data(),
                                 next_logits_.data());
    } else {
        rb->project_to_host(router, Act::Normed, 0, n, router_logits_.data());
        if (next) rb->project_to_host(*next, Act::Normed, n - 1, 1, next_logits_.data());
    }
    for (int64_t t = 0; t < n; ++t) {
        const float* logits = &router_logits_[size_t(t * cfg.n_expert)];
        if (cfg.forced) {
            force_route(logits, cfg, cfg.forced->choices(cfg.pos0 + t, layer),
                        &choice_[size_t(t * k)], &weight_[size_t(t * k)], routing_);
        } else {
            route_token(logits, cfg, &choice_[size_t(t * k)], &weight_[size_t(t * k)], routing_);
        }
    }
    const std::span<const int32_t> choices(choice_.data(), size_t(n * k));
    // Each expert once, for every (token, slot) that chose it: the slots of all chosen experts,
    // expert by expert.
    users_.clear();
    user_weights_.clear();
    jobs_.clear();
    expert_ids_.clear();
    for (int e = 0; e < cfg.n_expert; ++e) {
        const size_t first = users_.size();
        for (int64_t i = 0; i < n * k; ++i) {
            if (choice_[size_t(i)] != e) continue;
            users_.push_back(i);
            user_weights_.push_back(weight_[size_t(i)]);
        }
        if (users_.size() == first) continue;
        const size_t m = users_.size() - first;
        jobs_.push_back({ExpertView{}, std::span<const int64_t>(users_).subspan(first, m),
                         std::span<const float>(user_weights_).subspan(first, m)});
        expert_ids_.push_back(e);
    }
    const bool vram = route_to_vram(layer);
    if (guess_for_store_) {
        guess_next_layer();
        store_.hint_experts(layer + 1, guess_);
    }
    store_.prepare_experts(layer, choices, k,
                           vram ? std::span<const char>(on_gpu_) : std::span<const char>());
    STRATA_TRY(compute_experts(layer, n, k, xb, store_.resident_experts(layer).has_value(), vram));
    stats.expert_loads += jobs_.size();
    stats.token_choices += uint64_t(n * k);
    return {};
}

bool Engine::route_to_vram(int layer) {
    if (!vram_ || !vram_layer_[size_t(layer)]) return false;
    const size_t served = vram_->route(layer, expert_ids_, vram_views_);
    if (served == 0) return false;
    on_gpu_.assign(size_t(hp_.n_expert), 0);
    for (size_t j = 0; j < jobs_.size(); ++j) {
        if (vram_views_[j]) on_gpu_[size_t(expert_ids_[j])] = 1;
    }
    return true;
}

const TensorView* Engine::next_router(int layer, int64_t n, Backend* rb) {
    guess_for_store_ = guessed_ = false;
    vram_guess_ = -1;
    const int next = layer + 1;
    if (n <= 0 || next >= int(hp_.n_layer)) return nullptr;
    const bool for_store = store_.wants_hints(next);
    // The level's guesses are copied from where the experts rest in RAM.
    const bool for_vram = vram_ && vram_layer_[size_t(next)] &&
                          store_.resident_expert(next, 0) != nullptr && vram_->prefetch_wanted();
    if (!for_store && !for_vram) return nullptr;
    const TensorView* router = store_.resident_router(next);
    if (!router || !rb->can_read(router->where)) return nullptr;
    guess_for_store_ = for_store;
    if (for_vram) vram_guess_ = next;
    return router;
}

void Engine::guess_next_layer() {
    if (guessed_) return;
    const MoeConfig cfg{int(hp_.n_expert), int(hp_.n_expert_used), false, nullptr, 0};
    route_token(next_logits_.data(), cfg, guess_.data(), guess_weight_.data(), routing_);
    guessed_ = true;
}

Result<void> Engine::prefetch_to_vram(int layer, int64_t n, int k) {
    if (vram_guess_ != layer + 1) return {};
    vram_guess_ = -1;
    guess_next_layer();
    candidates_.assign(guess_.begin(), guess_.end());
    const std::span<const int32_t> last(&choice_[size_t((n - 1) * k)], size_t(k));
    store_.predict_experts(layer + 1, last, size_t(k), predicted_);
    for (int32_t x : predicted_.experts) {
        if (std::find(candidates_.begin(), candidates_.end(), x) == candidates_.end()) {
            candidates_.push_back(x);
        }
    }
    for (int32_t x : candidates_) {
        if (const ExpertView* host = store_.resident_expert(layer + 1, x)) {
            STRATA_TRY(vram_->prefetch(layer + 1, x, *host));
        }
    }
    return {};
}

// A resident store's experts stay where they are: all of them are handed to the backend at once,
// to run as one job. A streaming store's are computed one by one as their reads complete, each
// released before the next is waited for. With the GPU level serving some, the GPU's share is
// queued first and runs beside the CPU's; the CPU's partial sum then joins it on the GPU (Side,
// free until the shared expert's turn).
Result<void> Engine::compute_experts(int layer, int64_t n, int k, Backend* xb, bool together,
                                     bool split) {
    OpFigures& figures = stats_.ops[size_t(Op::Experts)];
    const auto count = [&](const ExpertView& ev, int64_t m) {
        figures.bytes += view_bytes(ev.gate) + view_bytes(ev.up) + view_bytes(ev.down);
        figures.flops += view_flops(ev.gate, m) + view_flops(ev.up, m) + view_flops(ev.down, m);
    };
    const auto on_gpu = [&](size_t j) { return split && vram_views_[j] != nullptr; };
    if (split) {
        gpu_jobs_.clear();
        for (size_t j = 0; j < jobs_.size(); ++j) {
            if (!on_gpu(j)) continue;
            jobs_[j].expert = *vram_views_[j];
            count(jobs_[j].expert, int64_t(jobs_[j].slots.size()));
            gpu_jobs_.push_back(jobs_[j]);
        }
        be_->begin_experts(n, k, true);
        be_->experts(gpu_jobs_, Act::Normed);
        be_->end_experts(Act::Out, n);
    }
    // With the GPU's part of this layer queued, the level may copy into any entry: the next
    // layer's guesses go first, while the CPU's workers start on its part.
    Result<void> prefetched;
    const auto prefetch = [&] { prefetched = prefetch_to_vram(layer, n, k); };
    // Misses of the GPU level are offered to it once the CPU has them; a streaming store's
    // entry may be reused once released, so its loads land first.
    const bool level = vram_ && vram_layer_[size_t(layer)];
    const auto offer = [&](int e, const ExpertView& host) -> Result<void> {
        if (!level) return {};
        STRATA_ASSIGN(const bool loading, vram_->offer(layer, e, host));
        if (loading && !together) vram_gpu_->wait_expert_loads();
        return {};
    };
    xb->begin_experts(n, k, split);
    if (!together) {
        prefetch();
        STRATA_TRY(prefetched);
    }
    cpu_jobs_.clear();
    for (size_t j = 0; j < jobs_.size(); ++j) {
        if (on_gpu(j)) continue;
        const int e = expert_ids_[j];
        STRATA_ASSIGN(jobs_[j].expert, store_.acquire_expert(layer, e));
        count(jobs_[j].expert, int64_t(jobs_[j].slots.size()));
        if (together) {
            cpu_jobs_.push_back(jobs_[j]);
            continue;
        }
        xb->expert(jobs_[j].expert, jobs_[j].slots, jobs_[j].weights, Act::Normed);
        STRATA_TRY(offer(e, jobs_[j].expert));
        store_.release_expert(layer, e);
    }
    if (together) {
        xb->experts_beside(cpu_jobs_, Act::Normed, prefetch);
        STRATA_TRY(prefetched);
        for (size_t j = 0; j < jobs_.size(); ++j) {
            if (on_gpu(j)) continue;
            STRATA_TRY(offer(expert_ids_[j], jobs_[j].expert));
            store_.release_expert(layer, expert_ids_[j]);
        }
    }
    xb->end_experts(Act::Out, n);
    if (xb == be_) return {};
    if (!split) {
        cross(Act::Out, xb, be_, n);
        return {};
    }
    xb->read_act(Act::Out, crossing_.data(), n, hp_.n_embd);
    be_->write_act(Act::Side, crossing_.data(), n, hp_.n_embd);
    be_->add(Act::Out, Act::Side, n);
    return {};
}

}  // namespace strata::engine
