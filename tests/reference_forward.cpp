// The reference forward pass of reference_forward.h: one function per step of the published
// definitions, in double, with no KV cache and no batching tricks.
#include "reference_forward.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "gguf/reader.h"
#include "quant/quant.h"
#include "synth_test_support.h"

namespace strata::test {

namespace {

using Vec = std::vector<double>;

// y = W x for a row-major block of `rows` rows of x.size() floats starting at w.
Vec matvec(const float* w, size_t rows, const Vec& x) {
    Vec y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
        double s = 0;
        for (size_t i = 0; i < x.size(); ++i) s += double(w[r * x.size() + i]) * x[i];
        y[r] = s;
    }
    return y;
}

Vec matvec(const std::vector<float>& w, const Vec& x) {
    return matvec(w.data(), w.size() / x.size(), x);
}

// x / sqrt(mean(x^2) + eps) * w over n values at x (w has n values).
void rms_norm(double* x, size_t n, const float* w, double eps) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const double scale = 1.0 / std::sqrt(ss / double(n) + eps);
    for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * double(w[i]);
}

Vec rms_normed(Vec x, const std::vector<float>& w, double eps) {
    rms_norm(x.data(), x.size(), w.data(), eps);
    return x;
}

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}
double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

void softmax(Vec& x) {
    const double m = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (double& v : x) sum += (v = std::exp(v - m));
    for (double& v : x) v /= sum;
}

double round_f16(double x) {
    return quant::fp16_to_fp32(quant::fp32_to_fp16(float(x)));
}

void add_into(Vec& y, const Vec& x, double scale = 1.0) {
    for (size_t i = 0; i < y.size(); ++i) y[i] += scale * x[i];
}

double norm2(const double* x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += x[i] * x[i];
    return std::sqrt(s);
}

// down(silu(gate x) * up x) for one expert (or the dense FFN): matrices given as row blocks.
Vec swiglu(const float* gate, const float* up, const float* down, size_t n_ff, const Vec& x) {
    const Vec g = matvec(gate, n_ff, x), u = matvec(up, n_ff, x);
    Vec h(n_ff);
    for (size_t i = 0; i < n_ff; ++i) h[i] = silu(g[i]) * u[i];
    return matvec(down, x.size(), h);
}

}  // namespace

ReferenceModel::ReferenceModel(const std::string& path) {
    auto f = read_gguf(path);
    if (!f) throw std::runtime_error(f.error().message);
    file_ = std::move(*f);
    arch_ = file_.get_string("general.architecture").value_or("");
    const std::string a = arch_ + ".";
    auto u32 = [&](const std::string& key, uint64_t fallback) {
        return uint32_t(file_.get_uint(a + key).value_or(fallback));
    };
    n_embd_ = u32("embedding_length", 0);
    n_layer_ = u32("block_count", 0);
    n_head_ = u32("attention.head_count", 0);
    n_head_kv_ = u32("attention.head_count_kv", n_head_);
    head_dim_ = u32("attention.key_length", n_embd_ / n_head_);
    n_rot_ = u32("rope.dimension_count", head_dim_);
    n_expert_ = u32("expert_count", 0);
    n_used_ = u32("expert_used_count", 0);
    eps_ = file_.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5);
    rope_base_ = file_.get_float(a + "rope.freq_base").value_or(10000.0);
    n_vocab_ = uint32_t(file_.find_tensor("token_embd.weight")->shape[1]);
    // The published definitions: llama rotates adjacent pairs, the Qwen families NEOX halves;
    // Mixtral and Qwen3-MoE renormalise the top-k weights, Qwen2-MoE does not.
    neox_ = arch_ != "llama";
    norm_topk_ = file_.get_bool(a + "expert_weights_norm").value_or(arch_ != "qwen2moe");
}

const std::vector<float>& ReferenceModel::tensor(const std::string& name) {
    auto it = cache_.find(name);
    if (it == cache_.end()) it = cache_.emplace(name, read_tensor_floats(file_, name)).first;
    return it->second;
}

std::vector<double> ReferenceModel::forward(const std::vector<int32_t>& tokens,
                                            const ReferenceOptions& opt, ReferenceTrace* trace) {
    ReferenceTrace local;
    ReferenceTrace& tr = trace ? *trace : local;
    const size_t n = tokens.size(), d = n_embd_, hd = head_dim_;
    const size_t group = n_head_ / n_head_kv_;
    const double scale = 1.0 / std::sqrt(double(hd));

    std::vector<Vec> x(n);
    const std::vector<float>& embd = tensor("token_embd.weight");
    for (size_t t = 0; t < n; ++t) {
        x[t].assign(embd.begin() + long(tokens[t] * d), embd.begin() + long((tokens[t] + 1) * d));
    }

    for (uint32_t il = 0; il < n_layer_; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        auto w = [&](const std::string& s) -> const std::vector<float>& { return tensor(b + s); };

        // Attention: q, k, v of every token (biases, q/k norms and rope included).
        std::vector<Vec> q(n), k(n), v(n);
        for (size_t t = 0; t < n; ++t) {
            const Vec h = rms_normed(x[t], w("attn_norm.weight"), eps_);
            q[t] = matvec(w("attn_q.weight"), h);
            k[t] = matvec(w("attn_k.weight"), h);
            v[t] = matvec(w("attn_v.weight"), h);
            if (has(b + "attn_q.bias")) {
                add_into(q[t], Vec(w("attn_q.bias").begin(), w("attn_q.bias").end()));
                add_into(k[t], Vec(w("attn_k.bias").begin(), w("attn_k.bias").end()));
                add_into(v[t], Vec(w("attn_v.bias").begin(), w("attn_v.bias").end()));
            }
            if (has(b + "attn_q_norm.weight")) {
                for (size_t hq = 0; hq < n_head_; ++hq)
                    rms_norm(&q[t][hq * hd], hd, w("attn_q_norm.weight").data(), eps_);
                for (size_t hk = 0; hk < n_head_kv_; ++hk)
                    rms_norm(&k[t][hk * hd], hd, w("attn_k_norm.weight").data(), eps_);
            }
            for (Vec* qk : {&q[t], &k[t]}) {
                for (size_t head = 0; head < qk->size() / hd; ++head) {
                    double* r = &(*qk)[head * hd];
                    for (size_t i = 0; i < n_rot_ / 2; ++i) {
                        const double theta =
                            double(t) * std::pow(rope_base_, -2.0 * double(i) / n_rot_);
                        const size_t i0 = neox_ ? i : 2 * i,
                                     i1 = neox_ ? i + n_rot_ / 2 : 2 * i + 1;
                        const double a0 = r[i0], a1 = r[i1];
                        r[i0] = a0 * std::cos(theta) - a1 * std::sin(theta);
                        r[i1] = a0 * std::sin(theta) + a1 * std::cos(theta);
                    }
                }
            }
            if (opt.f16_attention) {
                for (Vec* r : {&q[t], &k[t], &v[t]})
                    for (double& e : *r) e = round_f16(e);
            }
        }
        for (size_t t = 0; t < n; ++t) {
            Vec attn(n_head_ * hd, 0.0);
            for (size_t hq = 0; hq < n_head_; ++hq) {
                const size_t hk = hq / group;
                Vec p(t + 1);
                for (size_t s = 0; s <= t; ++s) {
                    double dot = 0;
                    for (size_t i = 0; i < hd; ++i) dot += q[t][hq * hd + i] * k[s][hk * hd + i];
                    p[s] = scale * dot;
                    tr.max_score_sensitivity =
                        std::max(tr.max_score_sensitivity,
                                 scale * norm2(&q[t][hq * hd], hd) * norm2(&k[s][hk * hd], hd));
                }
                softmax(p);
                for (size_t s = 0; s <= t; ++s) {
                    const double ps = opt.f16_attention ? round_f16(p[s]) : p[s];
                    for (size_t i = 0; i < hd; ++i) attn[hq * hd + i] += ps * v[s][hk * hd + i];
                }
            }
            add_into(x[t], matvec(w("attn_output.weight"), attn));
        }

        // Feed-forward: dense SwiGLU, or routed experts (+ the shared expert).
        for (size_t t = 0; t < n; ++t) {
            const Vec h = rms_normed(x[t], w("ffn_norm.weight"), eps_);
            if (n_expert_ == 0) {
                const size_t n_ff = w("ffn_gate.weight").size() / d;
                add_into(x[t], swiglu(w("ffn_gate.weight").data(), w("ffn_up.weight").data(),
                                      w("ffn_down.weight").data(), n_ff, h));
                continue;
            }
            const Vec logits = matvec(w("ffn_gate_inp.weight"), h);
            Vec prob = logits;
            softmax(prob);
            std::vector<size_t> order(n_expert_);
            std::iota(order.begin(), order.end(), size_t{0});
            std::stable_sort(order.begin(), order.end(),
                             [&](size_t i, size_t j) { return prob[i] > prob[j]; });
            tr.min_router_gap =
                std::min(tr.min_router_gap, logits[order[n_used_ - 1]] - logits[order[n_used_]]);
            double sum = 0;
            for (size_t s = 0; s < n_used_; ++s) sum += prob[order[s]];
            const size_t n_ff_exp = w("ffn_gate_exps.weight").size() / d / n_expert_;
            Vec out(d, 0.0);
            for (size_t s = 0; s < n_used_; ++s) {
                const size_t e = order[s];
                const double weight = norm_topk_ ? prob[e] / sum : prob[e];
                add_into(out,
                         swiglu(w("ffn_gate_exps.weight").data() + e * n_ff_exp * d,
                                w("ffn_up_exps.weight").data() + e * n_ff_exp * d,
                                w("ffn_down_exps.weight").data() + e * d * n_ff_exp, n_ff_exp, h),
                         weight);
            }
            if (has(b + "ffn_gate_shexp.weight")) {
                const size_t n_ff_sh = w("ffn_gate_shexp.weight").size() / d;
                const double g = matvec(w("ffn_gate_inp_shexp.weight"), h)[0];
                add_into(out,
                         swiglu(w("ffn_gate_shexp.weight").data(), w("ffn_up_shexp.weight").data(),
                                w("ffn_down_shexp.weight").data(), n_ff_sh, h),
                         sigmoid(g));
            }
            add_into(x[t], out);
        }
    }

    const std::vector<float>& head =
        has("output.weight") ? tensor("output.weight") : tensor("token_embd.weight");
    std::vector<double> logits;
    logits.reserve(n * n_vocab_);
    for (size_t t = 0; t < n; ++t) {
        const Vec y = matvec(head, rms_normed(x[t], tensor("output_norm.weight"), eps_));
        logits.insert(logits.end(), y.begin(), y.end());
    }
    return logits;
}

}  // namespace strata::test
