// The multi-head latent attention block of deepseek2 (DeepSeek-V2/V3, Kimi K2). The projections
// into the compressed spaces and out of the heads are ordinary linear jobs of the layer's backend;
// the latents' norms, and the rope, cache, absorbed attention and value heads after them, are two
// backend operations (Backend::mla_latent_norms, Backend::mla_attention).
//
//   x        = RMSNorm(hidden)
//   q        = attn_q_b(RMSNorm(attn_q_a x))    (or attn_q x)      n_head x [nope | rope]
//   [c | kr] = attn_kv_a_mqa x                   c: n_lora_kv latent, kr: n_rot rotary key
//   c        = RMSNorm(c)                        cached with rope(kr): all a token keeps
//   out      = attn_output(heads of attention over the cache, Backend::mla_attention)
#include "engine/engine.h"
#include "engine/op_figures.h"

namespace strata::engine {

Result<void> Engine::mla_attention_block(const LayerArgs& a) {
    const int il = a.layer;
    const int64_t n = a.n, d = hp_.n_embd;
    const int64_t heads = hp_.n_head_at(uint32_t(il)), rank = hp_.n_lora_kv,
                  width = hp_.mla_cache_width(), dq = heads * hp_.head_dim_k,
                  da = heads * hp_.head_dim_v;
    const LayerView& w = a.w;
    const bool compressed_q = hp_.n_lora_q > 0;
    const TensorView &q_a = w.weight(TensorRole::AttnQA), &q_b = w.weight(TensorRole::AttnQB),
                     &wq = w.weight(TensorRole::AttnQ), &kv_a = w.weight(TensorRole::AttnKvAMqa),
                     &wo = w.weight(TensorRole::AttnOutput);
    const MlaWeights up{&w.weight(TensorRole::AttnKB), &w.weight(TensorRole::AttnVB),
                        &w.weight(TensorRole::AttnKvB)};
    const bool have_up = hp_.mla_kv_b ? up.kv_b->present() : up.k_b->present() && up.v_b->present();
    if (!kv_a.present() || !wo.present() || !have_up ||
        !(compressed_q ? q_a.present() && q_b.present() : wq.present())) {
        return err("layer " + std::to_string(il) +
                   ": a latent-attention layer's projections are missing");
    }
    staged_on_ = nullptr;  // latent attention runs where its layer is: nothing is staged

    timed(Op::Elementwise,
          [&] { be_->rms_norm(Act::Hidden, w.weight(TensorRole::AttnNorm), Act::Normed, n); });
    dump("attn_norm", il, Act::Normed, n, d);
    const TensorView& first_q = compressed_q ? q_a : wq;
    timed(
        Op::Projection,
        [&] {
            const LinearJob jobs[] = {{&first_q, nullptr, compressed_q ? Act::QLatent : Act::Q},
                                      {&kv_a, nullptr, Act::KvLatent}};
            be_->linear(jobs, Act::Normed, n);
        },
        view_bytes(first_q) + view_bytes(kv_a), view_flops(first_q, n) + view_flops(kv_a, n));
    timed(Op::Elementwise, [&] {
        be_->mla_latent_norms(w.weight(TensorRole::AttnQANorm), w.weight(TensorRole::AttnKvANorm),
                              n);
    });
    if (compressed_q) {
        timed(
            Op::Projection,
            [&] {
                const LinearJob jobs[] = {{&q_b, nullptr, Act::Q}};
                be_->linear(jobs, Act::QLatent, n);
            },
            view_bytes(q_b), view_flops(q_b, n));
    }
    dump("q", il, Act::Q, n, dq);
    dump("kv_cmpr", il, Act::KvLatent, n, width);

    // Each run reads its sequence's latent rows once; every head of token t of a run scores and
    // weighs pos0 + t + 1 rows of `width` and `rank` values, and each head's query and output go
    // through its up-projections.
    double kv_bytes = 0, kv_flops = 0;
    const double element = kv_type_ == KvType::F16 ? 2.0 : 34.0 / 32.0;
    const double per_head_token = 2.0 * double(hp_.head_dim_nope() + hp_.head_dim_v) * rank;
    for (const SeqRun& run : a.runs) {
        kv_bytes += double(run.pos0 + run.n) * double(width) * element;
        kv_flops += 2.0 * double(heads) * double(width + rank) *
                        (double(run.n) * double(run.pos0) + double(run.n) * double(run.n + 1) / 2) +
                    per_head_token * double(heads) * double(run.n);
    }
    const double up_bytes = view_bytes(*up.k_b) + view_bytes(*up.v_b) + view_bytes(*up.kv_b);
    timed(
        Op::Attention, [&] { be_->mla_attention(il, up, a.runs); }, kv_bytes + up_bytes, kv_flops);
    dump("kqv_out", il, Act::AttnOut, n, da);
    timed(
        Op::Projection,
        [&] {
            const LinearJob out[] = {{&wo, nullptr, Act::Out}};
            be_->linear(out, Act::AttnOut, n);
        },
        view_bytes(wo), view_flops(wo, n));
    be_->add(Act::Hidden, Act::Out, n);
    dump("ffn_inp", il, Act::Hidden, n, d);
    return {};
}

}  // namespace strata::engine
