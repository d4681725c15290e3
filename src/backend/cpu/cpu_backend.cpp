#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_path.h"
#include "backend/cpu/delta_net.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/kv_cache.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/mla_attention.h"
#include "backend/cpu/ops.h"
#include "model/activation_memory.h"
#include "quant/quant.h"
#include "util/thread_pool.h"

namespace strata {

namespace {

using namespace cpu;

static_assert(sizeof(MatmulSegment) <= 64, "activation_memory.cpp counts 64 bytes a segment");

class CpuBackend final : public Backend {
  public:
    CpuBackend(const BackendConfig& config, std::vector<KvCache> kvs)
        : hp_(config.hp),
          rope_(config.rope),
          kvs_(std::move(kvs)),
          pool_(config.threads),
          attention_by_positions_(config.tuning.attention_by_positions) {
        // Every buffer is sized (or reserved) here for the largest batch the context allows, as
        // model/activation_memory.h counts it, so none grows past that count later.
        const int64_t rows = batch_rows(config.max_batch, config.n_ctx);
        rows_ = rows;
        uint32_t n_head = 0, n_head_kv = 0;
        for (uint32_t l = 0; l < hp_.n_layer; ++l) {
            n_head = std::max(n_head, hp_.n_head_at(l));
            n_head_kv = std::max(n_head_kv, hp_.n_head_kv_at(l));
        }
        const int64_t d = hp_.n_embd;
        auto size = [&](Act a, int64_t cols) { acts_[size_t(a)].resize(size_t(rows * cols)); };
        size(Act::Hidden, d);
        size(Act::Normed, d);
        size(Act::Q, int64_t(n_head) * hp_.head_dim_k);
        // Latent attention caches its latent rows instead of keys and values.
        size(Act::K, hp_.is_mla() ? 0 : int64_t(n_head_kv) * hp_.head_dim_k);
        size(Act::V, hp_.is_mla() ? 0 : int64_t(n_head_kv) * hp_.head_dim_v);
        // A delta-net layer's output (value heads) goes where attention's does.
        size(Act::AttnOut,
             std::max<int64_t>(int64_t(n_head) * hp_.head_dim_v, int64_t(hp_.ssm_value_dim())));
        size(Act::Out, d);
        size(Act::Side, d);
        if (hp_.has_recurrent()) {
            size(Act::Mixed, std::max<int64_t>(2 * int64_t(n_head) * hp_.head_dim_k,
                                               int64_t(hp_.conv_channels())));
            size(Act::Gate,
                 std::max<int64_t>(int64_t(n_head) * hp_.head_dim_v, int64_t(hp_.ssm_value_dim())));
            size(Act::Beta, hp_.ssm_dt_rank);
            size(Act::Alpha, hp_.ssm_dt_rank);
            size(Act::Fused, int64_t(hp_.ssm_fused_dim()));
            delta_scratch_.resize(size_t(pool_.size()) *
                                  size_t(delta_chunk_scratch_floats(int(hp_.ssm_d_state))));
        }
        gate_.resize(size_t(rows));
        ffn_.reserve(rows, widest_ffn(hp_));
        if (hp_.is_moe()) {
            segments_.reserve(2 * size_t(hp_.n_expert));
            slot_out_.reserve(size_t(rows) * hp_.n_expert_used * size_t(d));
            x_rows_.reserve(size_t(rows * d));
            y_rows_.reserve(size_t(rows * d));
        }
        // One row of angles per thread: a prompt's tokens are rotated in parallel.
        cos_.resize(size_t(rope_.n_rot / 2) * size_t(pool_.size()));
        sin_.resize(size_t(rope_.n_rot / 2) * size_t(pool_.size()));
        int widest_group = 1, most_heads = 1, most_kv_heads = 1;
        for (uint32_t l = 0; l < hp_.n_layer; ++l) {
            widest_group =
                std::max(widest_group, int(hp_.n_head_at(l) / std::max(1u, hp_.n_head_kv_at(l))));
            most_heads = std::max(most_heads, int(hp_.n_head_at(l)));
            most_kv_heads = std::max(most_kv_heads, int(hp_.n_head_kv_at(l)));
        }
        if (hp_.is_mla()) {
            reserve_mla(rows, most_heads);
        } else {
            reserve_attention_scratch(
                kvs_.front(),
                AttentionShape{widest_group, 1, int(hp_.head_dim_k), int(hp_.head_dim_v), 1.0f},
                most_heads, most_kv_heads, rows, decode_scratch_, pool_);
        }
    }

    // A latent-attention model's buffers (model/activation_memory.h counts them): its latent
    // activations, and for a chunk of kMlaTokensPerChunk tokens of every head the queries before
    // and after their absorption, the latent outputs and the value heads.
    void reserve_mla(int64_t rows, int most_heads) {
        const int64_t rank = hp_.n_lora_kv, nope = hp_.head_dim_nope();
        acts_[size_t(Act::QLatent)].resize(size_t(rows) * hp_.n_lora_q);
        acts_[size_t(Act::KvLatent)].resize(size_t(rows) * hp_.mla_cache_width());
        const size_t chunk_rows = size_t(std::min(rows, kMlaTokensPerChunk)) * size_t(most_heads);
        mla_x_.resize(chunk_rows * size_t(std::max(nope, rank)));
        mla_y_.resize(chunk_rows * size_t(std::max<int64_t>(rank, hp_.head_dim_v)));
        mla_q_.resize(chunk_rows * hp_.mla_cache_width());
        mla_segments_.reserve(size_t(most_heads));
        mla_shape_ =
            MlaShape{most_heads, int(rank), int(hp_.n_rot), mla_attention_scale(rope_, hp_)};
        reserve_mla_scratch(kvs_.front(), mla_shape_, mla_decode_scores_, pool_);
        if (hp_.mla_kv_b) reserve_mla_absorb_scratch(int(nope), int(rank), pool_);
    }

    std::string_view name() const override { return "cpu"; }

    bool can_read(MemoryPlace where) const override { return where.host_readable(); }

    void write_act(Act a, const float* x, int64_t n, int64_t cols) override {
        assert(size_t(n * cols) <= acts_[size_t(a)].size());
        std::memcpy(act(a), x, sizeof(float) * size_t(n * cols));
    }
    void read_act(Act a, float* x, int64_t n, int64_t cols) override {
        assert(size_t(n * cols) <= acts_[size_t(a)].size());
        std::memcpy(x, act(a), sizeof(float) * size_t(n * cols));
    }
    const float* peek(Act a, int64_t) override { return act(a); }

    void embed(const TensorView& table, std::span<const int32_t> tokens) override {
        const int64_t d = hp_.n_embd;
        float* x = act(Act::Hidden);
        for (size_t t = 0; t < tokens.size(); ++t)
            embedding_row(table, tokens[t], x + int64_t(t) * d);
    }

    void rms_norm(Act in, const TensorView& weight, Act out, int64_t n) override {
        rms_norm_rows(act(in), weight.f32(), act(out), n, hp_.n_embd, hp_.rms_eps, pool_);
    }

    void linear(std::span<const LinearJob> jobs, Act in, int64_t n) override {
        std::array<LinearOut, 4> outs;
        for (size_t i = 0; i < jobs.size(); ++i) {
            outs[i] = LinearOut{jobs[i].weight, jobs[i].bias, act(jobs[i].out)};
        }
        if (jobs.size() == 1) {
            cpu::linear(*jobs[0].weight, jobs[0].bias, act(in), act(jobs[0].out), n, pool_);
        } else {
            linear_multi({outs.data(), jobs.size()}, act(in), n, pool_);
        }
    }

    void rope_store_kv(int layer, const TensorView& qn, const TensorView& kn,
                       std::span<const SeqRun> runs) override {
        const int n_head = int(hp_.n_head_at(uint32_t(layer)));
        const int n_head_kv = int(hp_.n_head_kv_at(uint32_t(layer)));
        const int hd_k = int(hp_.head_dim_k);
        const int64_t dq = int64_t(n_head) * hd_k, dk = int64_t(n_head_kv) * hd_k,
                      dv = int64_t(n_head_kv) * hp_.head_dim_v;
        float* q = act(Act::Q);
        float* k = act(Act::K);
        const float* v = act(Act::V);
        for (const SeqRun& run : runs) {
            KvCache& kv = kvs_[size_t(run.seq)];
            rows_with_angles(run, [&](int64_t t, int64_t pos, const float* cos, const float* sin) {
                float* qt = q + t * dq;
                float* kt = k + t * dk;
                if (qn.present()) {
                    for (int h = 0; h < n_head; ++h) {
                        rms_norm_row(qt + h * hd_k, qn.f32(), qt + h * hd_k, hd_k, hp_.rms_eps);
                    }
                }
                if (kn.present()) {
                    for (int h = 0; h < n_head_kv; ++h) {
                        rms_norm_row(kt + h * hd_k, kn.f32(), kt + h * hd_k, hd_k, hp_.rms_eps);
                    }
                }
                rope_apply(rope_, qt, n_head, hd_k, cos, sin);
                rope_apply(rope_, kt, n_head_kv, hd_k, cos, sin);
                kv.store(layer, pos, kt, v + t * dv);
            });
        }
    }

    // fn(t, position, cos, sin) for each row t of the run, with the rope's angles at its
    // position: tokens in parallel (each writes its own cache position), a decode step's one
    // token on this thread.
    template <class Fn>
    void rows_with_angles(const SeqRun& run, Fn&& fn) {
        const size_t half = size_t(rope_.n_rot / 2);
        pool_.parallel_for(run.n, 8, [&](int64_t b, int64_t e, int thread) {
            float* cos = cos_.data() + size_t(thread) * half;
            float* sin = sin_.data() + size_t(thread) * half;
            for (int64_t t = run.row0 + b; t < run.row0 + e; ++t) {
                const int64_t pos = run.pos0 + (t - run.row0);
                rope_angles(rope_, pos, cos, sin);
                fn(t, pos, cos, sin);
            }
        });
    }

    void attention(int layer, const TensorView& sinks, std::span<const SeqRun> runs) override {
        const int hd_k = int(hp_.head_dim_k);
        AttentionShape shape{int(hp_.n_head_at(uint32_t(layer))),
                             int(hp_.n_head_kv_at(uint32_t(layer))), hd_k, int(hp_.head_dim_v),
                             1.0f / std::sqrt(float(hd_k))};
        shape.sinks = sinks.present() ? sinks.f32() : nullptr;
        shape.window = hp_.is_swa(uint32_t(layer)) ? int64_t(hp_.n_swa) : 0;
        const int64_t dq = int64_t(shape.n_head) * hd_k,
                      da = int64_t(shape.n_head) * shape.head_dim_v;
        for (const SeqRun& run : runs) {
            cpu::attention(kvs_[size_t(run.seq)], layer, shape, act(Act::Q) + run.row0 * dq, run.n,
                           run.pos0, act(Act::AttnOut) + run.row0 * da, pool_,
                           attention_by_positions_ ? &decode_scratch_ : nullptr);
        }
    }

    void split_query_gate(int layer, int64_t n) override {
        const int64_t heads = hp_.n_head_at(uint32_t(layer)), hd = hp_.head_dim_k;
        const float* mixed = act(Act::Mixed);
        float* q = act(Act::Q);
        float* gate = act(Act::Gate);
        rows_over_pool(n, [&](int64_t t) {
            for (int64_t h = 0; h < heads; ++h) {
                const float* src = mixed + (t * heads + h) * 2 * hd;
                std::memcpy(q + (t * heads + h) * hd, src, sizeof(float) * size_t(hd));
                std::memcpy(gate + (t * heads + h) * hd, src + hd, sizeof(float) * size_t(hd));
            }
        });
    }

    void sigmoid_mul(Act rows, Act gate, int64_t cols, int64_t n) override {
        float* r = act(rows);
        const float* g = act(gate);
        rows_over_pool(n, [&](int64_t t) {
            for (int64_t i = t * cols; i < (t + 1) * cols; ++i) r[i] *= sigmoid(g[i]);
        });
    }

    void ungroup_columns(Act from, int64_t groups, std::span<const ColumnPart> parts,
                         int64_t n) override {
        int64_t group_cols = 0;
        for (const ColumnPart& p : parts) group_cols += p.width;
        const float* src = act(from);
        rows_over_pool(n, [&](int64_t t) {
            const float* row = src + t * groups * group_cols;
            for (int64_t g = 0; g < groups; ++g) {
                for (const ColumnPart& p : parts) {
                    float* to = act(p.to) + t * p.to_cols + p.to_col + g * p.width;
                    std::memcpy(to, row, sizeof(float) * size_t(p.width));
                    row += p.width;
                }
            }
        });
    }

    void delta_net(int layer, const DeltaNetWeights& w, std::span<const SeqRun> runs) override {
        const int S = int(hp_.ssm_d_state), hk = int(hp_.ssm_n_group), hv = int(hp_.ssm_dt_rank);
        const int64_t channels = int64_t(hp_.conv_channels()), key_dim = int64_t(hp_.ssm_key_dim()),
                      value_dim = int64_t(hp_.ssm_value_dim());
        const int d_conv = int(hp_.ssm_d_conv);
        float* mixed = act(Act::Mixed);
        int64_t n = 0;
        for (const SeqRun& run : runs) {
            n = std::max(n, run.row0 + run.n);
            // The convolution runs along each sequence's tokens, channels in parallel.
            float* conv_state = kvs_[size_t(run.seq)].conv_state(layer);
            pool_.parallel_for(channels, 64, [&](int64_t b, int64_t e, int) {
                causal_conv_silu(mixed + run.row0 * channels, run.n, channels, b, e, d_conv,
                                 w.conv1d->f32(), conv_state);
            });
        }
        // Per row: q and k L2-normalised (as the reference: x / max(|x|, eps)), the decay
        // g = A softplus(alpha + dt_bias) and beta = sigmoid(beta).
        float* alpha = act(Act::Alpha);
        float* beta = act(Act::Beta);
        const float* dt = w.dt_bias->f32();
        const float* a = w.a->f32();
        rows_over_pool(n, [&](int64_t t) {
            float* x = mixed + t * channels;
            for (int64_t h = 0; h < 2 * hk; ++h) {
                float* v = x + h * S;
                double sum = 0;
                for (int i = 0; i < S; ++i) sum += double(v[i] * v[i]);
                const float inv = 1.0f / std::max(std::sqrt(float(sum)), hp_.rms_eps);
                for (int i = 0; i < S; ++i) v[i] *= inv;
            }
            for (int h = 0; h < hv; ++h) {
                const float z = alpha[t * hv + h] + dt[h];
                const float softplus = z > 20.0f ? z : std::log1p(std::exp(z));
                alpha[t * hv + h] = softplus * a[h];
                beta[t * hv + h] = sigmoid(beta[t * hv + h]);
            }
        });
        // Each (sequence, value head) runs its tokens in order: chunks for a prompt, the
        // recurrent step for a decode step.
        float* out = act(Act::AttnOut);
        const int64_t tasks = int64_t(runs.size()) * hv;
        const int64_t scratch_floats = delta_chunk_scratch_floats(S);
        pool_.parallel_for(tasks, 1, [&](int64_t b, int64_t e, int thread) {
            for (int64_t task = b; task < e; ++task) {
                const SeqRun& run = runs[size_t(task / hv)];
                const int h = int(task % hv), kh = int(hp_.ssm_key_head(uint32_t(h)));
                const float* x = mixed + run.row0 * channels;
                const DeltaHeadRun r{x + kh * S,
                                     x + key_dim + kh * S,
                                     x + 2 * key_dim + h * S,
                                     channels,
                                     alpha + run.row0 * hv + h,
                                     beta + run.row0 * hv + h,
                                     hv,
                                     out + run.row0 * value_dim + h * S,
                                     value_dim,
                                     run.n,
                                     S};
                float* state = kvs_[size_t(run.seq)].delta_state(layer) + int64_t(h) * S * S;
                if (run.n > 1) {
                    delta_rule_chunked(r, state, delta_scratch_.data() + thread * scratch_floats);
                } else {
                    delta_rule_recurrent(r, state);
                }
            }
        });
        // The gated output norm, per value head.
        const float* z = act(Act::Gate);
        const float* norm = w.norm->f32();
        rows_over_pool(n, [&](int64_t t) {
            for (int h = 0; h < hv; ++h) {
                float* o = out + t * value_dim + h * S;
                rms_norm_row(o, norm, o, S, hp_.rms_eps);
                const float* zt = z + t * value_dim + h * S;
                for (int i = 0; i < S; ++i) o[i] *= silu(zt[i]);
            }
        });
    }

    void reset_recurrent(int seq) override { kvs_[size_t(seq)].clear_recurrent(); }

    void mla_latent_norms(const TensorView& qn, const TensorView& kvn, int64_t n) override {
        if (qn.present()) {
            float* q = act(Act::QLatent);
            rms_norm_rows(q, qn.f32(), q, n, hp_.n_lora_q, hp_.rms_eps, pool_);
        }
        const int64_t width = hp_.mla_cache_width(), rank = hp_.n_lora_kv;
        float* lat = act(Act::KvLatent);
        rows_over_pool(n, [&](int64_t t) {
            rms_norm_row(lat + t * width, kvn.f32(), lat + t * width, rank, hp_.rms_eps);
        });
    }

    void mla_attention(int layer, const MlaWeights& w, std::span<const SeqRun> runs) override {
        const int64_t heads = hp_.n_head_at(uint32_t(layer)), dk = hp_.head_dim_k,
                      dv = hp_.head_dim_v, nope = hp_.head_dim_nope(), rank = hp_.n_lora_kv,
                      width = hp_.mla_cache_width();
        float* q = act(Act::Q);
        float* lat = act(Act::KvLatent);
        // Every row's rotary parts turned and its latent row cached first: a chunk's queries see
        // the positions of the run before them.
        for (const SeqRun& run : runs) {
            KvCache& kv = kvs_[size_t(run.seq)];
            rows_with_angles(run, [&](int64_t t, int64_t pos, const float* cos, const float* sin) {
                rope_apply(rope_, q + t * heads * dk + nope, int(heads), int(dk), cos, sin);
                rope_apply(rope_, lat + t * width + rank, 1, int(width), cos, sin);
                kv.store(layer, pos, lat + t * width, nullptr);
            });
        }
        MlaShape shape = mla_shape_;
        shape.n_head = int(heads);
        // The per-head matrices: W_uk(h)^T (attn_k_b) and W_uv(h) (attn_v_b, or attn_kv_b's
        // value rows), as the rows of one matrix each.
        const auto head_matrix = [](const TensorView& t, int64_t first_row, int64_t rows) {
            return QuantMatrix{t.type, t.data + size_t(first_row) * t.row_bytes, rows, t.ne[0],
                               t.row_bytes};
        };
        for (const SeqRun& run : runs) {
            for (int64_t c0 = 0; c0 < run.n; c0 += kMlaTokensPerChunk) {
                const int64_t m = std::min(kMlaTokensPerChunk, run.n - c0);
                const int64_t row0 = run.row0 + c0;
                // Each head's no-rope queries, head-major.
                rows_over_pool(heads * m, [&](int64_t r) {
                    std::memcpy(&mla_x_[size_t(r * nope)],
                                q + (row0 + r % m) * heads * dk + (r / m) * dk,
                                sizeof(float) * size_t(nope));
                });
                if (w.kv_b->present()) {
                    mla_absorb_transposed(*w.kv_b, int(heads), int(nope), int(dv), mla_x_.data(), m,
                                          mla_y_.data(), pool_);
                } else {
                    mla_segments_.clear();
                    for (int64_t h = 0; h < heads; ++h) {
                        mla_segments_.push_back(
                            {head_matrix(*w.k_b, h * rank, rank), h * m, m, mla_y_.data()});
                    }
                    matmul_segments(mla_segments_, mla_x_.data(), heads * m, pool_);
                }
                // q' = [absorbed | rope] per (head, token).
                rows_over_pool(heads * m, [&](int64_t r) {
                    float* qa = &mla_q_[size_t(r * width)];
                    std::memcpy(qa, &mla_y_[size_t(r * rank)], sizeof(float) * size_t(rank));
                    std::memcpy(qa + rank, q + (row0 + r % m) * heads * dk + (r / m) * dk + nope,
                                sizeof(float) * size_t(width - rank));
                });
                cpu::mla_attention(kvs_[size_t(run.seq)], layer, shape, mla_q_.data(), m,
                                   run.pos0 + c0, mla_x_.data(), pool_, &mla_decode_scores_);
                mla_segments_.clear();
                for (int64_t h = 0; h < heads; ++h) {
                    const QuantMatrix wv = w.kv_b->present()
                                               ? head_matrix(*w.kv_b, h * (nope + dv) + nope, dv)
                                               : head_matrix(*w.v_b, h * dv, dv);
                    mla_segments_.push_back({wv, h * m, m, mla_y_.data()});
                }
                matmul_segments(mla_segments_, mla_x_.data(), heads * m, pool_);
                float* out = act(Act::AttnOut);
                rows_over_pool(heads * m, [&](int64_t r) {
                    std::memcpy(out + (row0 + r % m) * heads * dv + (r / m) * dv,
                                &mla_y_[size_t(r * dv)], sizeof(float) * size_t(dv));
                });
            }
        }
    }

    void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down, Act in,
                    Act out, int64_t n) override {
        cpu::swiglu_ffn(gate, up, down, act(in), n, act(out), ffn_, pool_);
    }

    void sigmoid_gate(const TensorView& gate, Act in, Act rows, int64_t n) override {
        const int64_t d = hp_.n_embd;
        cpu::linear(gate, nullptr, act(in), gate_.data(), n, pool_);
        float* r = act(rows);
        for (int64_t t = 0; t < n; ++t) {
            const float s = sigmoid(gate_[size_t(t)]);
            for (int64_t i = 0; i < d; ++i) r[t * d + i] *= s;
        }
    }

    void add(Act into, Act from, int64_t n) override {
        float* y = act(into);
        const float* x = act(from);
        rows_over_pool(
            n, [&](int64_t r) { add_into(y + r * hp_.n_embd, x + r * hp_.n_embd, hp_.n_embd); });
    }

    void project_to_host(std::span<const HostProjection> jobs, Act in, int64_t first_row,
                         int64_t rows) override {
        const float* x = act(in) + first_row * hp_.n_embd;
        if (jobs.size() == 1)
            return cpu::linear(*jobs[0].weight, jobs[0].bias, x, jobs[0].out, rows, pool_);
        std::array<cpu::LinearOut, 4> outs{};
        for (size_t i = 0; i < jobs.size(); i += outs.size()) {
            const size_t m = std::min(outs.size(), jobs.size() - i);
            for (size_t j = 0; j < m; ++j) {
                outs[j] = {jobs[i + j].weight, jobs[i + j].bias, jobs[i + j].out};
            }
            cpu::linear_multi({outs.data(), m}, x, rows, pool_);
        }
    }

    void begin_experts(int64_t n, int k, bool some_slots) override {
        experts_k_ = k;
        const size_t values = size_t(n * k * hp_.n_embd);
        // Within the reserved capacity: no allocation either way.
        if (some_slots) {
            slot_out_.assign(values, 0.0f);
        } else {
            slot_out_.resize(values);
        }
    }

    void expert(const ExpertView& e, std::span<const int64_t> slots, std::span<const float> weights,
                Act in) override {
        const ExpertJob job{e, slots, weights};
        run_experts({&job, 1}, int64_t(slots.size()), in);
    }

    // The chosen experts as few jobs as the activation rows allow: consecutive experts of one
    // shape whose slots fit the rows go together (a decode step's all at once; a prompt's in
    // chunks of about a batch), so small matrices do not pay a dispatch each. The arithmetic
    // of each row is the same as alone.
    // `beside` runs on the calling thread while the pool's workers start on the jobs.
    void experts(std::span<const ExpertJob> jobs, Act in, FunctionRef<void()> beside) override {
        pool_.caller_first(beside);
        run_jobs(jobs, in);
        pool_.finish_caller_task();  // no job reached the workers
    }

    void run_jobs(std::span<const ExpertJob> jobs, Act in) {
        const auto same_shape = [](const ExpertJob& a, const ExpertJob& b) {
            return a.expert.gate.ne == b.expert.gate.ne && a.expert.down.ne == b.expert.down.ne;
        };
        for (size_t i = 0; i < jobs.size();) {
            size_t j = i + 1;
            int64_t total = int64_t(jobs[i].slots.size());
            while (j < jobs.size() && same_shape(jobs[i], jobs[j]) &&
                   total + int64_t(jobs[j].slots.size()) <= rows_) {
                total += int64_t(jobs[j].slots.size());
                ++j;
            }
            run_experts(jobs.subspan(i, j - i), total, in);
            i = j;
        }
    }

    // jobs (of one shape, `total` slots, at most rows_ unless one job alone) in one job: gate
    // and up of every expert in one parallel pass over all their rows, then every down; each
    // slot's output weighted into slot_out_.
    void run_experts(std::span<const ExpertJob> jobs, int64_t total, Act in) {
        const ExpertView& first = jobs.front().expert;
        const int64_t d = hp_.n_embd, ff = first.gate.rows();
        const float* x = act(in);
        x_rows_.resize(size_t(total * d));
        ffn_.gate.resize(size_t(total * ff));
        ffn_.up.resize(size_t(total * ff));
        y_rows_.resize(size_t(total * d));
        segments_.clear();
        row_slots_.clear();
        row_weights_.clear();
        int64_t row = 0;
        for (const ExpertJob& j : jobs) {
            const int64_t m = int64_t(j.slots.size());
            row_slots_.insert(row_slots_.end(), j.slots.begin(), j.slots.end());
            row_weights_.insert(row_weights_.end(), j.weights.begin(), j.weights.end());
            segments_.push_back({quant_matrix(j.expert.gate), row, m, ffn_.gate.data()});
            segments_.push_back({quant_matrix(j.expert.up), row, m, ffn_.up.data()});
            row += m;
        }
        rows_over_pool(total, [&](int64_t r) {
            std::memcpy(&x_rows_[size_t(r * d)], x + (row_slots_[size_t(r)] / experts_k_) * d,
                        sizeof(float) * size_t(d));
        });
        matmul_segments(segments_, x_rows_.data(), total, pool_);
        if (hp_.has_expert_bias) {
            add_expert_biases(jobs, &ExpertView::gate_bias, ffn_.gate.data(), ff);
            add_expert_biases(jobs, &ExpertView::up_bias, ffn_.up.data(), ff);
        }
        if (hp_.expert_activation == FfnActivation::SwigluOai) {
            swiglu_oai(ffn_.gate.data(), ffn_.up.data(), ffn_.gate.data(), total * ff,
                       kSwigluOaiAlpha, kSwigluOaiLimit, pool_);
        } else {
            swiglu(ffn_.gate.data(), ffn_.up.data(), ffn_.gate.data(), total * ff, pool_);
        }
        segments_.clear();
        row = 0;
        for (const ExpertJob& j : jobs) {
            const int64_t m = int64_t(j.slots.size());
            segments_.push_back({quant_matrix(j.expert.down), row, m, y_rows_.data()});
            row += m;
        }
        matmul_segments(segments_, ffn_.gate.data(), total, pool_);
        if (hp_.has_expert_bias) add_expert_biases(jobs, &ExpertView::down_bias, y_rows_.data(), d);
        rows_over_pool(total, [&](int64_t r) {
            const float w = row_weights_[size_t(r)];
            float* dst = &slot_out_[size_t(row_slots_[size_t(r)] * d)];
            const float* src = &y_rows_[size_t(r * d)];
            for (int64_t i = 0; i < d; ++i) dst[i] = src[i] * w;
        });
    }

    // Each job's rows of `rows` (width values each, the jobs' rows in order) plus its expert's
    // bias (an F32 row; absent: none).
    void add_expert_biases(std::span<const ExpertJob> jobs, TensorView ExpertView::*bias,
                           float* rows, int64_t width) {
        int64_t row = 0;
        for (const ExpertJob& j : jobs) {
            const int64_t m = int64_t(j.slots.size());
            const TensorView& b = j.expert.*bias;
            if (b.present()) {
                for (int64_t r = row; r < row + m; ++r) add_into(rows + r * width, b.f32(), width);
            }
            row += m;
        }
    }

    // f(r) for r < rows of n_embd values each, shared out over the pool when there are many
    // (a prompt's), on this thread when few (a decode step's).
    template <typename F>
    void rows_over_pool(int64_t rows, F&& f) {
        const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / hp_.n_embd);
        pool_.parallel_for(rows, grain, [&](int64_t b, int64_t e, int) {
            for (int64_t r = b; r < e; ++r) f(r);
        });
    }

    void end_experts(Act out, int64_t n) override {
        // Weighted outputs summed in slot order, as the reference engine adds them.
        const int64_t d = hp_.n_embd;
        const int k = experts_k_;
        float* o = act(out);
        rows_over_pool(n, [&](int64_t t) {
            std::memcpy(o + t * d, &slot_out_[size_t(t * k * d)], sizeof(float) * size_t(d));
            for (int s = 1; s < k; ++s) add_into(o + t * d, &slot_out_[size_t((t * k + s) * d)], d);
        });
    }

    // The host routes for the CPU: the router's choices are the store's to act on.
    bool routed_experts(const TensorView&, const TensorView&, const TensorView&, const ExpertStack&,
                        int, bool, Act, Act, int64_t) override {
        return false;
    }

    void normalize_output(const TensorView& norm, int64_t first_row, int64_t rows) override {
        rms_norm_rows(act(Act::Hidden) + first_row * hp_.n_embd, norm.f32(), act(Act::Normed), rows,
                      hp_.n_embd, hp_.rms_eps, pool_);
    }

    void head_logits(const TensorView& piece, int64_t vocab_first, int64_t n_vocab, int64_t rows,
                     float* logits) override {
        const float* normed = act(Act::Normed);
        // The whole head: every row's logits are contiguous, one pass over the head for all rows.
        if (vocab_first == 0 && piece.rows() == n_vocab) {
            return cpu::linear(piece, nullptr, normed, logits, rows, pool_);
        }
        // A piece: its columns are not contiguous in a row-major logits block, one row at a time.
        for (int64_t r = 0; r < rows; ++r) {
            cpu::linear(piece, nullptr, normed + r * hp_.n_embd, logits + r * n_vocab + vocab_first,
                        1, pool_);
        }
    }

  private:
    float* act(Act a) { return acts_[size_t(a)].data(); }

    ModelHparams hp_;
    RopeConfig rope_;
    std::vector<KvCache> kvs_;  // one per sequence
    ThreadPool pool_;
    DecodeScratch decode_scratch_;
    bool attention_by_positions_;  // Tuning::attention_by_positions: decode_scratch_ is used
    std::array<std::vector<float>, size_t(Act::Count)> acts_;
    std::vector<float> cos_, sin_, gate_;
    std::vector<float> delta_scratch_;  // per thread: a delta-net chunk's (delta_net.h)
    FfnBuffers ffn_;
    int experts_k_ = 1;
    std::vector<float> slot_out_, x_rows_, y_rows_;
    // run_experts' rows in order: the slot each is and its routing weight.
    std::vector<int64_t> row_slots_;
    std::vector<float> row_weights_;
    int64_t rows_ = 0;  // activation rows (the batch at its largest)
    std::vector<MatmulSegment> segments_;
    // Latent attention (reserve_mla): a chunk's head-major rows of queries and latent outputs
    // (x), absorbed queries and value heads (y), queries in the latent's space (q), the per-head
    // products, and the shape with its scale; every head's scores of a decode step.
    std::vector<float> mla_x_, mla_y_, mla_q_;
    std::vector<float> mla_decode_scores_;  // a decode step's heads over the context
    std::vector<MatmulSegment> mla_segments_;
    MlaShape mla_shape_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cpu_backend(const BackendConfig& config) {
    // The kernel path is the process's (cpu_path.h says why): a forced one is set here, or the
    // measured table installed.
    if (config.tuning.cpu_path != CpuPathChoice::Best) {
        cpu::select_cpu_path(std::string(tuning_name(config.tuning.cpu_path)).c_str());
    } else if (!config.cpu_kernels.empty()) {
        cpu::install_kernel_table(
            cpu::KernelTable::from(config.cpu_kernels, cpu::detect_cpu_features()));
    }
    std::vector<KvCache> kvs;
    for (uint32_t s = 0; s < std::max(1u, config.n_seq); ++s) {
        STRATA_ASSIGN(KvCache kv,
                      KvCache::create(config.hp, config.n_ctx, config.kv_type, config.layers,
                                      uint32_t(batch_rows(config.max_batch, config.n_ctx))));
        kvs.push_back(std::move(kv));
    }
    return std::unique_ptr<Backend>(new CpuBackend(config, std::move(kvs)));
}

}  // namespace strata
