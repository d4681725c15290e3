#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "engine/ops.h"

namespace strata::engine {

const char* op_name(Op op) {
    switch (op) {
        case Op::Projection: return "attention projections";
        case Op::Attention: return "attention";
        case Op::Ffn: return "dense FFN";
        case Op::Experts: return "experts";
        case Op::Router: return "router";
        case Op::LmHead: return "LM head";
        case Op::Elementwise: return "norms, rope, embeddings";
        case Op::Count: break;
    }
    return "?";
}

namespace {
// The LM head: output.weight, or token_embd when the output is tied to it.
const TensorView& lm_head(const LayerView& g) {
    return g.weight(TensorRole::Output).present() ? g.weight(TensorRole::Output)
                                                  : g.weight(TensorRole::TokenEmbedding);
}
}  // namespace

template <typename F>
void Engine::timed(Op op, F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    stats_.op_seconds[size_t(op)] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Engine::Engine(const ModelHparams& hp, WeightStore& store, KvCache kv, const EngineOptions& options)
    : hp_(hp), store_(store), kv_(std::move(kv)), pool_(options.threads),
      max_batch_(std::max<uint32_t>(1, options.max_batch)),
      forced_routing_(options.forced_routing) {}

Result<std::unique_ptr<Engine>> Engine::create(const ModelHparams& hp, WeightStore& store,
                                               const EngineOptions& options) {
    const LayerFn fn = layer_function(hp.arch);
    if (!fn) return err("the CPU engine cannot run architecture '" + hp.arch + "'");
    const LayerView& g = store.globals();
    const TensorView& embd = g.weight(TensorRole::TokenEmbedding);
    if (!embd.present()) return err("the model has no token_embd.weight");
    if (!g.weight(TensorRole::OutputNorm).present()) return err("the model has no output_norm");
    const TensorView& head = lm_head(g);
    if (head.ne[0] != hp.n_embd || embd.ne[0] != hp.n_embd) {
        return err("token_embd / output rows do not have n_embd = " + std::to_string(hp.n_embd) +
                   " values");
    }
    STRATA_ASSIGN(RopeConfig rope, make_rope_config(hp, &g.weight(TensorRole::RopeFreqs)));
    const uint32_t n_ctx = options.n_ctx ? options.n_ctx : default_context(hp);
    STRATA_ASSIGN(KvCache kv, KvCache::create(hp, n_ctx, options.kv_type));
    if (const RoutingTrace* t = options.forced_routing.get()) {
        if (!hp.is_moe() || t->n_layer != int(hp.n_layer) || t->n_expert != int(hp.n_expert) ||
            t->k != int(hp.n_expert_used) || t->tokens() == 0) {
            return err("the routing trace (" + std::to_string(t->n_layer) + " layers, " +
                       std::to_string(t->n_expert) + " experts, top-" + std::to_string(t->k) +
                       ") does not fit this model");
        }
    }

    std::unique_ptr<Engine> e(new Engine(hp, store, std::move(kv), options));
    e->layer_fn_ = fn;
    e->rope_ = std::move(rope);
    e->n_vocab_ = static_cast<uint32_t>(head.rows());
    std::string dump_dir = options.dump_dir;
    if (dump_dir.empty()) {
        if (const char* env = std::getenv("STRATA_DUMP")) dump_dir = env;
    }
    if (!dump_dir.empty()) {
        STRATA_ASSIGN(e->dump_, DebugDump::open(dump_dir));
    }
    if (hp.is_moe()) e->stats_.moe.assign(hp.n_layer, {});
    return e;
}

void Engine::reset_stats() {
    const size_t n_moe = stats_.moe.size();
    stats_ = {};
    stats_.moe.assign(n_moe, {});
    store_.reset_stats();
}

void Engine::truncate(uint32_t n_keep) { n_past_ = std::min(n_past_, n_keep); }

Result<void> Engine::eval(std::span<const int32_t> tokens, LogitsWanted wanted,
                          std::vector<float>& logits) {
    if (tokens.empty()) return err("nothing to evaluate: no tokens");
    if (uint64_t(n_past_) + tokens.size() > n_ctx()) {
        return err("the context is full: " + std::to_string(n_past_) + " of " +
                   std::to_string(n_ctx()) + " positions used, " + std::to_string(tokens.size()) +
                   " more do not fit");
    }
    for (int32_t t : tokens) {
        if (t < 0 || uint32_t(t) >= n_vocab_) {
            return err("token id " + std::to_string(t) + " is outside the vocabulary (" +
                       std::to_string(n_vocab_) + " tokens)");
        }
    }
    const bool every = wanted != LogitsWanted::Last;
    const size_t row = wanted == LogitsWanted::Hidden ? size_t(hp_.n_embd) : size_t(n_vocab_);
    const uint32_t start = n_past_;
    logits.resize(row * (every ? tokens.size() : 1));
    for (size_t first = 0; first < tokens.size(); first += max_batch_) {
        const size_t count = std::min<size_t>(max_batch_, tokens.size() - first);
        const bool last = first + count == tokens.size();
        float* out = every ? logits.data() + first * row : (last ? logits.data() : nullptr);
        // A failure part way through leaves the context as it was before the call.
        if (auto r = eval_batch(tokens.subspan(first, count), wanted, out); !r) {
            n_past_ = start;
            return r;
        }
    }
    return {};
}

Result<void> Engine::eval_batch(std::span<const int32_t> tokens, LogitsWanted wanted,
                                float* out) {
    const int64_t n = int64_t(tokens.size());
    const int64_t pos0 = n_past_;
    const int64_t d = hp_.n_embd;
    const uint64_t served_before = store_.stats().bytes_served;
    dump_.begin_call(pos0);

    x_.resize(size_t(n * d));
    const TensorView& embd = store_.globals().weight(TensorRole::TokenEmbedding);
    timed(Op::Elementwise, [&] {
        for (int64_t t = 0; t < n; ++t) embedding_row(embd, tokens[size_t(t)], &x_[size_t(t * d)]);
    });
    dump_.write("inp_embd", -1, x_.data(), n, d);

    for (int il = 0; il < int(hp_.n_layer); ++il) {
        STRATA_ASSIGN(const LayerView* w, store_.acquire_layer(il));
        Result<void> r = layer_fn_(*this, LayerArgs{il, *w, n, pos0});
        store_.release_layer(il);
        STRATA_TRY(r);
        dump_.write("l_out", il, x_.data(), n, d);
    }
    n_past_ += uint32_t(n);

    uint64_t head_bytes = 0;
    if (out && wanted == LogitsWanted::Hidden) {
        output_norm(0, n, out);
    } else if (out) {
        const int64_t first = wanted == LogitsWanted::All ? 0 : n - 1;
        output_head(first, n - first, out);
        const TensorView& head = lm_head(store_.globals());
        head_bytes = head.row_bytes * uint64_t(head.rows());
    }
    stats_.weight_bytes += store_.stats().bytes_served - served_before + head_bytes +
                           uint64_t(n) * embd.row_bytes;
    stats_.tokens += uint64_t(n);
    ++stats_.eval_calls;
    return {};
}

void Engine::output_norm(int64_t first_row, int64_t rows, float* out) {
    const int64_t d = hp_.n_embd;
    timed(Op::Elementwise, [&] {
        rms_norm_rows(&x_[size_t(first_row * d)],
                      store_.globals().weight(TensorRole::OutputNorm).f32(), out, rows, d,
                      hp_.rms_eps, pool_);
    });
    dump_.write("result_norm", -1, out, rows, d);
}

void Engine::output_head(int64_t first_row, int64_t rows, float* logits) {
    const int64_t d = hp_.n_embd;
    const LayerView& g = store_.globals();
    tmp_.resize(size_t(rows * d));
    output_norm(first_row, rows, tmp_.data());
    const TensorView& head = lm_head(g);
    timed(Op::LmHead, [&] { linear(head, nullptr, tmp_.data(), logits, rows, pool_); });
    dump_.write("result_output", -1, logits, rows, n_vocab_);
}

Result<void> Engine::attention_block(const LayerArgs& a) {
    const int il = a.layer;
    const int64_t n = a.n, d = hp_.n_embd;
    const int n_head = int(hp_.n_head_at(il)), n_head_kv = int(hp_.n_head_kv_at(il));
    const int hd_k = int(hp_.head_dim_k), hd_v = int(hp_.head_dim_v);
    const int64_t dq = int64_t(n_head) * hd_k, dk = int64_t(n_head_kv) * hd_k,
                  dv = int64_t(n_head_kv) * hd_v, da = int64_t(n_head) * hd_v;
    const LayerView& w = a.w;
    xn_.resize(size_t(n * d));
    q_.resize(size_t(n * dq));
    k_.resize(size_t(n * dk));
    v_.resize(size_t(n * dv));
    attn_.resize(size_t(n * da));
    proj_.resize(size_t(n * d));

    timed(Op::Elementwise, [&] {
        rms_norm_rows(x_.data(), w.weight(TensorRole::AttnNorm).f32(), xn_.data(), n, d,
                      hp_.rms_eps, pool_);
    });
    dump_.write("attn_norm", il, xn_.data(), n, d);
    timed(Op::Projection, [&] {
        const LinearOut qkv[] = {
            {&w.weight(TensorRole::AttnQ), &w.bias(TensorRole::AttnQ), q_.data()},
            {&w.weight(TensorRole::AttnK), &w.bias(TensorRole::AttnK), k_.data()},
            {&w.weight(TensorRole::AttnV), &w.bias(TensorRole::AttnV), v_.data()}};
        linear_multi(qkv, xn_.data(), n, pool_);
    });
    timed(Op::Elementwise, [&] {
        const TensorView& qn = w.weight(TensorRole::AttnQNorm);
        const TensorView& kn = w.weight(TensorRole::AttnKNorm);
        for (int64_t t = 0; t < n; ++t) {
            float* qt = &q_[size_t(t * dq)];
            float* kt = &k_[size_t(t * dk)];
            if (qn.present()) {
                for (int h = 0; h < n_head; ++h)
                    rms_norm_row(qt + h * hd_k, qn.f32(), qt + h * hd_k, hd_k, hp_.rms_eps);
            }
            if (kn.present()) {
                for (int h = 0; h < n_head_kv; ++h)
                    rms_norm_row(kt + h * hd_k, kn.f32(), kt + h * hd_k, hd_k, hp_.rms_eps);
            }
            cos_.resize(size_t(rope_.n_rot / 2));
            sin_.resize(size_t(rope_.n_rot / 2));
            rope_angles(rope_, a.pos0 + t, cos_.data(), sin_.data());
            rope_apply(rope_, qt, n_head, hd_k, cos_.data(), sin_.data());
            rope_apply(rope_, kt, n_head_kv, hd_k, cos_.data(), sin_.data());
            kv_.store(il, a.pos0 + t, kt, &v_[size_t(t * dv)]);
        }
    });
    dump_.write("Qcur", il, q_.data(), n, dq);
    dump_.write("Kcur", il, k_.data(), n, dk);
    dump_.write("Vcur", il, v_.data(), n, dv);

    const AttentionShape shape{n_head, n_head_kv, hd_k, hd_v, 1.0f / std::sqrt(float(hd_k))};
    timed(Op::Attention,
          [&] { attention(kv_, il, shape, q_.data(), n, a.pos0, attn_.data(), pool_); });
    dump_.write("kqv_out", il, attn_.data(), n, da);
    timed(Op::Projection, [&] {
        linear(w.weight(TensorRole::AttnOutput), &w.bias(TensorRole::AttnOutput), attn_.data(),
               proj_.data(), n, pool_);
    });
    add_into(x_.data(), proj_.data(), n * d);
    dump_.write("ffn_inp", il, x_.data(), n, d);
    return {};
}

void Engine::ffn_norm(const LayerArgs& a) {
    timed(Op::Elementwise, [&] {
        rms_norm_rows(x_.data(), a.w.weight(TensorRole::FfnNorm).f32(), xn_.data(), a.n,
                      hp_.n_embd, hp_.rms_eps, pool_);
    });
    dump_.write("ffn_norm", a.layer, xn_.data(), a.n, hp_.n_embd);
}

Result<void> Engine::dense_ffn_block(const LayerArgs& a) {
    const int64_t n = a.n, d = hp_.n_embd;
    const LayerView& w = a.w;
    ffn_norm(a);
    timed(Op::Ffn, [&] {
        swiglu_ffn(w.weight(TensorRole::FfnGate), w.weight(TensorRole::FfnUp),
                   w.weight(TensorRole::FfnDown), xn_.data(), n, proj_.data(), ffn_buf_, pool_);
    });
    dump_.write("ffn_out", a.layer, proj_.data(), n, d);
    add_into(x_.data(), proj_.data(), n * d);
    return {};
}

Result<void> Engine::moe_ffn_block(const LayerArgs& a, bool norm_weights) {
    const int64_t n = a.n, d = hp_.n_embd;
    const LayerView& w = a.w;
    ffn_norm(a);
    const MoeConfig cfg{int(hp_.n_expert), int(hp_.n_expert_used), norm_weights,
                        forced_routing_.get(), a.pos0};
    Result<void> r;
    timed(Op::Experts, [&] {
        r = moe_ffn(store_, a.layer, w.weight(TensorRole::MoeRouter), cfg, xn_.data(), n, d,
                    proj_.data(), moe_buf_, &stats_.moe[size_t(a.layer)], pool_);
    });
    STRATA_TRY(r);
    if (w.weight(TensorRole::SharedGate).present()) {
        timed(Op::Ffn, [&] {
            tmp_.resize(size_t(n * d));
            swiglu_ffn(w.weight(TensorRole::SharedGate), w.weight(TensorRole::SharedUp),
                       w.weight(TensorRole::SharedDown), xn_.data(), n, tmp_.data(), ffn_buf_,
                       pool_);
            const TensorView& gate = w.weight(TensorRole::SharedExpertGate);
            if (gate.present()) {
                std::vector<float> g(static_cast<size_t>(n));
                linear(gate, nullptr, xn_.data(), g.data(), n, pool_);
                for (int64_t t = 0; t < n; ++t) {
                    const float s = sigmoid(g[size_t(t)]);
                    for (int64_t i = 0; i < d; ++i) tmp_[size_t(t * d + i)] *= s;
                }
            }
            add_into(proj_.data(), tmp_.data(), n * d);
        });
    }
    dump_.write("ffn_out", a.layer, proj_.data(), n, d);
    add_into(x_.data(), proj_.data(), n * d);
    return {};
}

}  // namespace strata::engine
