// Multi-head latent attention on the CPU (backend/cpu/mla_attention.h, the CPU backend's
// mla_attention) against plain double-precision references on fresh random data:
//  - attention over a latent cache (F16 and Q8_0) of absorbed queries, for a prompt from position
//    0, a prompt after a cached prefix and a decode step, with the reference rounding the queries
//    to the cache's dot-product type and (F16 cache) the weights to F16 as the kernel does; the
//    same bits on one thread and on several;
//  - the transposed absorption of attn_kv_b's key rows;
//  - the backend's whole operation (rope, cache, absorbed attention, value heads) against
//    attention of the decompressed heads: keys [W_uk(h) latent | rotary key] and values
//    W_uv(h) latent per head, which absorption must equal; attn_kv_b weights holding the same
//    matrices give the same outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kv_cache.h"
#include "backend/cpu/mla_attention.h"
#include "model/rope.h"
#include "quant/float_formats.h"
#include "quant/quant.h"

namespace strata {
namespace {

std::vector<float> normal(size_t n, std::mt19937& rng, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

// A latent-attention model of one layer: 4 heads of 32 no-rope + 32 rotated key values and 32
// value values, a latent of 64 (the cache rows 96 values, whole Q8_0 blocks).
ModelHparams mla_hparams() {
    ModelHparams hp;
    hp.arch = "deepseek2";
    hp.n_layer = 1;
    hp.n_embd = 64;
    hp.n_head = 4;
    hp.n_head_kv = 1;
    hp.head_dim_k = 64;
    hp.head_dim_v = 32;
    hp.n_rot = 32;
    hp.n_lora_kv = 64;
    hp.n_ff = 64;
    hp.n_ctx_train = 4096;
    hp.rms_eps = 1e-6f;
    return hp;
}

// The cache's dot products see the query in the cache's activation type: F16, or Q8_0 blocks.
std::vector<double> as_dotted(const std::vector<float>& q, KvType type) {
    std::vector<double> out(q.size());
    if (type == KvType::F16) {
        for (size_t i = 0; i < q.size(); ++i) {
            out[i] = quant::fp16_to_fp32(quant::fp32_to_fp16(q[i]));
        }
        return out;
    }
    std::vector<std::byte> blocks(
        size_t(quant::quant_row_bytes(TensorType::Q8_0, int64_t(q.size())).value()));
    quant::quantize_row(TensorType::Q8_0, q.data(), blocks.data(), int64_t(q.size()));
    std::vector<float> back(q.size());
    quant::dequantize_row(TensorType::Q8_0, blocks.data(), back.data(), int64_t(q.size()));
    for (size_t i = 0; i < q.size(); ++i) out[i] = back[i];
    return out;
}

// Row h * n + t of q (head-major) attends to the cached rows 0 .. pos0 + t. `magnitude` gets
// each output's sum of |weight x value|, which bounds what rounding a weight can move it by.
std::vector<double> attention_reference(const cpu::KvCache& kv, const cpu::MlaShape& s,
                                        const std::vector<float>& q, int64_t n, int64_t pos0,
                                        std::vector<double>& magnitude) {
    const int64_t width = s.row_width(), rows = int64_t(s.n_head) * n;
    const int64_t n_kv = pos0 + n;
    std::vector<std::vector<float>> cached(static_cast<size_t>(n_kv),
                                           std::vector<float>(static_cast<size_t>(width)));
    for (int64_t p = 0; p < n_kv; ++p) {
        quant::dequantize_row(kv.element_type(), kv.key_row(0, p), cached[size_t(p)].data(), width);
    }
    std::vector<double> out(size_t(rows * s.rank), 0.0);
    magnitude.assign(out.size(), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row(q.begin() + r * width, q.begin() + (r + 1) * width);
        const std::vector<double> qd = as_dotted(row, kv.type());
        const int64_t seen = pos0 + r % n + 1;
        std::vector<double> w(static_cast<size_t>(seen));
        double top = -1e300;
        for (int64_t p = 0; p < seen; ++p) {
            double dot = 0;
            for (int64_t i = 0; i < width; ++i) dot += qd[size_t(i)] * cached[size_t(p)][size_t(i)];
            w[size_t(p)] = dot * s.scale;
            top = std::max(top, w[size_t(p)]);
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - top));
        for (int64_t p = 0; p < seen; ++p) {
            double wp = w[size_t(p)] / sum;
            if (kv.type() == KvType::F16) wp = quant::fp16_to_fp32(quant::fp32_to_fp16(float(wp)));
            for (int64_t i = 0; i < s.rank; ++i) {
                out[size_t(r * s.rank + i)] += wp * cached[size_t(p)][size_t(i)];
                magnitude[size_t(r * s.rank + i)] += std::fabs(wp * cached[size_t(p)][size_t(i)]);
            }
        }
    }
    return out;
}

double worst_relative(const std::vector<float>& got, const std::vector<double>& want) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
    }
    return worst / scale;
}

TEST(CpuMlaAttention, MatchesTheReferenceOverTheLatentCache) {
    const ModelHparams hp = mla_hparams();
    for (KvType type : {KvType::F16, KvType::Q8_0}) {
        SCOPED_TRACE(std::string(kv_type_name(type)));
        std::mt19937 rng(11u);
        auto kv = cpu::KvCache::create(hp, 320, type);
        ASSERT_TRUE(kv) << kv.error().message;
        const cpu::MlaShape s{int(hp.n_head), int(hp.n_lora_kv), int(hp.n_rot), 0.15f};
        const int64_t width = s.row_width();
        // Prompts from 0 and after a prefix (several tasks' rows each), a decode step, and one
        // over a context long enough to share out by positions.
        struct Call {
            int64_t pos0, n;
        };
        for (const Call c : {Call{0, 37}, Call{37, 20}, Call{57, 1}, Call{58, 250}, Call{308, 1}}) {
            SCOPED_TRACE("pos0 " + std::to_string(c.pos0) + ", " + std::to_string(c.n) + " tokens");
            for (int64_t t = 0; t < c.n; ++t) {
                const std::vector<float> row = normal(size_t(width), rng);
                kv->store(0, c.pos0 + t, row.data(), nullptr);
            }
            const std::vector<float> q = normal(size_t(s.n_head * c.n * width), rng, 0.5f);
            std::vector<double> magnitude;
            const std::vector<double> want = attention_reference(*kv, s, q, c.n, c.pos0, magnitude);
            std::vector<float> one(want.size()), many(want.size()), split(want.size());
            ThreadPool single(1), several(3);
            std::vector<float> decode_scores;
            cpu::reserve_mla_scratch(*kv, s, decode_scores, single);
            cpu::reserve_mla_scratch(*kv, s, decode_scores, several);
            cpu::mla_attention(*kv, 0, s, q.data(), c.n, c.pos0, one.data(), single);
            cpu::mla_attention(*kv, 0, s, q.data(), c.n, c.pos0, many.data(), several);
            // A decode step over 256 positions or more is shared out by positions.
            cpu::mla_attention(*kv, 0, s, q.data(), c.n, c.pos0, split.data(), several,
                               &decode_scores);
            // The kernel sums in float and softmaxes in float before rounding the weights to
            // F16, where the reference does so in double: a weight may round a step (2^-11 of
            // it) the other way, and the sums differ by float rounding.
            double worst = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                const double bound = (std::ldexp(1.0, -11) + 1e-5) * magnitude[i] + 1e-7;
                worst = std::max(worst, std::fabs(double(one[i]) - want[i]) / bound);
            }
            EXPECT_LE(worst, 1.0);
            EXPECT_EQ(one, many) << "the bits depend on the thread count";
            EXPECT_EQ(one, split) << "the bits depend on how a decode step is shared out";
        }
    }
}

TEST(CpuMlaAttention, TransposedAbsorptionMatchesTheReference) {
    const int heads = 3, nope = 32, v = 32, rank = 64;
    const int64_t n = 5;
    std::mt19937 rng(3u);
    for (TensorType type : {TensorType::F32, TensorType::Q8_0}) {
        SCOPED_TRACE(std::string(tensor_type_name(type)));
        const int64_t rows = int64_t(heads) * (nope + v);
        const std::vector<float> w = normal(size_t(rows * rank), rng, 0.2f);
        const size_t row_bytes = size_t(quant::quant_row_bytes(type, rank).value());
        std::vector<std::byte> bytes(row_bytes * size_t(rows));
        for (int64_t r = 0; r < rows; ++r) {
            quant::quantize_row(type, &w[size_t(r * rank)], bytes.data() + size_t(r) * row_bytes,
                                rank);
        }
        TensorView kv_b;
        kv_b.type = type;
        kv_b.data = bytes.data();
        kv_b.ne = {rank, rows, 1, 1};
        kv_b.row_bytes = row_bytes;
        const std::vector<float> x = normal(size_t(heads * n * nope), rng);
        std::vector<float> y(size_t(heads * n * rank));
        ThreadPool pool(2);
        cpu::reserve_mla_absorb_scratch(nope, rank, pool);
        cpu::mla_absorb_transposed(kv_b, heads, nope, v, x.data(), n, y.data(), pool);
        std::vector<double> want(y.size(), 0.0);
        std::vector<float> row(static_cast<size_t>(rank));
        for (int h = 0; h < heads; ++h) {
            for (int i = 0; i < nope; ++i) {
                quant::dequantize_row(type, bytes.data() + size_t(h * (nope + v) + i) * row_bytes,
                                      row.data(), rank);
                for (int64_t t = 0; t < n; ++t) {
                    for (int r = 0; r < rank; ++r) {
                        want[size_t((h * n + t) * rank + r)] +=
                            double(row[size_t(r)]) * x[size_t((h * n + t) * nope + i)];
                    }
                }
            }
        }
        EXPECT_LT(worst_relative(y, want), 1e-5);
    }
}

// F32 weights in a view of the given shape (ggml order).
TensorView f32_view(const std::vector<float>& w, std::array<int64_t, 4> ne) {
    TensorView v;
    v.type = TensorType::F32;
    v.data = reinterpret_cast<const std::byte*>(w.data());
    v.ne = ne;
    v.row_bytes = size_t(ne[0]) * sizeof(float);
    return v;
}

TEST(CpuMlaAttention, AbsorbedAttentionEqualsTheDecompressedHeads) {
    const ModelHparams hp = mla_hparams();
    const int64_t H = hp.n_head, nope = hp.head_dim_nope(), rot = hp.n_rot, dk = hp.head_dim_k,
                  dv = hp.head_dim_v, rank = hp.n_lora_kv, width = hp.mla_cache_width();
    const int64_t n = 9;
    std::mt19937 rng(7u);
    // W_uk(h): nope x rank, W_uv(h): dv x rank, as attn_kv_b holds them; attn_k_b holds each
    // W_uk(h) transposed.
    const std::vector<float> uk = normal(size_t(H * nope * rank), rng, 0.15f);
    const std::vector<float> uv = normal(size_t(H * dv * rank), rng, 0.15f);
    std::vector<float> k_b(uk.size()), kv_b(size_t(H * (nope + dv) * rank));
    for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < nope; ++i) {
            for (int64_t r = 0; r < rank; ++r) {
                const float x = uk[size_t((h * nope + i) * rank + r)];
                k_b[size_t((h * rank + r) * nope + i)] = x;
                kv_b[size_t((h * (nope + dv) + i) * rank + r)] = x;
            }
        }
        std::copy_n(&uv[size_t(h * dv * rank)], dv * rank,
                    &kv_b[size_t((h * (nope + dv) + nope) * rank)]);
    }
    const std::vector<float> kv_norm = normal(size_t(rank), rng, 0.1f);
    std::vector<float> kv_norm_w(kv_norm.size());
    for (size_t i = 0; i < kv_norm.size(); ++i) kv_norm_w[i] = 1.0f + kv_norm[i];
    const std::vector<float> q = normal(size_t(n * H * dk), rng);
    const std::vector<float> lat = normal(size_t(n * width), rng);

    BackendConfig config;
    config.hp = hp;
    auto rope = make_rope_config(hp, nullptr);
    ASSERT_TRUE(rope);
    config.rope = *rope;
    config.n_ctx = 64;
    config.max_batch = 16;
    config.threads = 2;
    const float scale = mla_attention_scale(config.rope, hp);

    // The reference: normalised latents, rotated parts, decompressed heads, in double.
    std::vector<double> want(size_t(n * H * dv), 0.0);
    {
        std::vector<std::vector<double>> c(static_cast<size_t>(n)), kr(static_cast<size_t>(n));
        std::vector<float> cos(size_t(rot / 2)), sin(size_t(rot / 2));
        std::vector<float> qr = q;
        for (int64_t t = 0; t < n; ++t) {
            double ss = 0;
            for (int64_t i = 0; i < rank; ++i)
                ss += double(lat[size_t(t * width + i)]) * lat[size_t(t * width + i)];
            const double inv = 1.0 / std::sqrt(ss / double(rank) + hp.rms_eps);
            for (int64_t i = 0; i < rank; ++i) {
                c[size_t(t)].push_back(lat[size_t(t * width + i)] * inv * kv_norm_w[size_t(i)]);
            }
            std::vector<float> k(lat.begin() + t * width + rank, lat.begin() + (t + 1) * width);
            rope_angles(config.rope, t, cos.data(), sin.data());
            rope_apply(config.rope, k.data(), 1, int(rot), cos.data(), sin.data());
            kr[size_t(t)].assign(k.begin(), k.end());
            rope_apply(config.rope, qr.data() + t * H * dk + nope, int(H), int(dk), cos.data(),
                       sin.data());
        }
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t t = 0; t < n; ++t) {
                std::vector<double> w(size_t(t + 1));
                double top = -1e300;
                for (int64_t p = 0; p <= t; ++p) {
                    double dot = 0;
                    for (int64_t i = 0; i < nope; ++i) {
                        double key = 0;
                        for (int64_t r = 0; r < rank; ++r) {
                            key += double(uk[size_t((h * nope + i) * rank + r)]) *
                                   c[size_t(p)][size_t(r)];
                        }
                        dot += double(qr[size_t(t * H * dk + h * dk + i)]) * key;
                    }
                    for (int64_t i = 0; i < rot; ++i) {
                        dot += double(qr[size_t(t * H * dk + h * dk + nope + i)]) *
                               kr[size_t(p)][size_t(i)];
                    }
                    w[size_t(p)] = dot * scale;
                    top = std::max(top, w[size_t(p)]);
                }
                double sum = 0;
                for (double& x : w) sum += (x = std::exp(x - top));
                for (int64_t p = 0; p <= t; ++p) {
                    for (int64_t j = 0; j < dv; ++j) {
                        double value = 0;
                        for (int64_t r = 0; r < rank; ++r) {
                            value += double(uv[size_t((h * dv + j) * rank + r)]) *
                                     c[size_t(p)][size_t(r)];
                        }
                        want[size_t(t * H * dv + h * dv + j)] += w[size_t(p)] / sum * value;
                    }
                }
            }
        }
    }

    const TensorView norm = f32_view(kv_norm_w, {rank, 1, 1, 1});
    const TensorView none;
    std::vector<std::vector<float>> outs;
    for (bool legacy : {false, true}) {
        SCOPED_TRACE(legacy ? "attn_kv_b" : "attn_k_b, attn_v_b");
        auto backend = make_cpu_backend(config);
        ASSERT_TRUE(backend) << backend.error().message;
        Backend& be = **backend;
        be.write_act(Act::Q, q.data(), n, H * dk);
        be.write_act(Act::KvLatent, lat.data(), n, width);
        be.mla_latent_norms(none, norm, n);
        const TensorView kb = f32_view(k_b, {nope, rank, H, 1});
        const TensorView vb = f32_view(uv, {rank, dv, H, 1});
        const TensorView kvb = f32_view(kv_b, {rank, H * (nope + dv), 1, 1});
        const MlaWeights w = legacy ? MlaWeights{&none, &none, &kvb} : MlaWeights{&kb, &vb, &none};
        // Two calls: a prompt, then the rest after it (a decode step's path for one token).
        const SeqRun first{0, 0, n - 1, 0};
        be.mla_attention(0, w, {&first, 1});
        std::vector<float> got(want.size());
        be.read_act(Act::AttnOut, got.data(), n - 1, H * dv);
        std::vector<float> last(size_t(H * dv));
        be.write_act(Act::Q, q.data() + (n - 1) * H * dk, 1, H * dk);
        be.write_act(Act::KvLatent, lat.data() + (n - 1) * width, 1, width);
        be.mla_latent_norms(none, norm, 1);
        const SeqRun step{0, 0, 1, n - 1};
        be.mla_attention(0, w, {&step, 1});
        be.read_act(Act::AttnOut, last.data(), 1, H * dv);
        std::copy(last.begin(), last.end(), got.begin() + (n - 1) * H * dv);
        // The F16 cache rounds the latents, the queries and the weights: about 2^-11 each.
        EXPECT_LT(worst_relative(got, want), 3e-3);
        outs.push_back(got);
    }
    // The same matrices in either file layout: the same outputs up to float summation order.
    double worst = 0;
    for (size_t i = 0; i < outs[0].size(); ++i) {
        worst = std::max(worst, double(std::fabs(outs[0][i] - outs[1][i])));
    }
    EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace strata
