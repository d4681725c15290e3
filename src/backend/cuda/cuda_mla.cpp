// The CUDA backend's multi-head latent attention (deepseek2): the latents' norms, then per run
// the rope and store of the latent rows, the queries' absorption into the latent's space, the
// attention over the latent cache and the value heads (mla.h). Each is a record, so a decode
// step's are captured in its graph. A run goes by chunks of kGpuMlaTokensPerChunk tokens, which
// bound the per-head buffers (model/activation_memory.h counts them).
#include <algorithm>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/mla.h"
#include "backend/cuda/rope_kv.h"
#include "model/activation_memory.h"
#include "model/rope.h"

namespace strata::cuda_impl {

void CudaBackend::mla_latent_norms(const TensorView& q_norm, const TensorView& kv_norm, int64_t n) {
    expect_device(q_norm);
    expect_device(kv_norm);
    run({OpKind::MlaNorms, Act::QLatent, Act::KvLatent, 0, n, q_norm, kv_norm, {}});
}

void CudaBackend::mla_attention(int layer, const MlaWeights& w, std::span<const SeqRun> runs) {
    for (const TensorView* v : {w.k_b, w.v_b, w.kv_b}) expect_device(*v);
    for (const SeqRun& sr : runs) {
        // Every row of the run is rotated and cached before any chunk attends.
        position_is(sr.pos0);
        Record store{OpKind::MlaRopeStore, Act::Q, Act::KvLatent, layer, sr.n, {}, {}, {}};
        store.seq = sr.seq;
        store.row0 = sr.row0;
        run(store);
        for (int64_t c0 = 0; c0 < sr.n; c0 += kGpuMlaTokensPerChunk) {
            position_is(sr.pos0 + c0);
            Record r{OpKind::MlaAttention,
                     Act::Q,
                     Act::AttnOut,
                     layer,
                     std::min(kGpuMlaTokensPerChunk, sr.n - c0),
                     *w.k_b,
                     *w.v_b,
                     *w.kv_b};
            r.seq = sr.seq;
            r.row0 = sr.row0 + c0;
            run(r);
        }
    }
}

void CudaBackend::launch_mla(const Record& r, bool recorded) {
    const uint32_t l = uint32_t(r.layer);
    const int64_t heads = hp_.n_head_at(l), dk = hp_.head_dim_k, dv = hp_.head_dim_v,
                  nope = hp_.head_dim_nope(), rank = hp_.n_lora_kv, width = hp_.mla_cache_width();
    switch (r.kind) {
        case OpKind::MlaNorms:
            if (r.w0.present()) {
                cuda::rms_norm_strided(act(Act::QLatent), r.n, hp_.n_lora_q, hp_.n_lora_q,
                                       r.w0.f32(), hp_.rms_eps, stream_);
            }
            cuda::rms_norm_strided(act(Act::KvLatent), r.n, rank, width, r.w1.f32(), hp_.rms_eps,
                                   stream_);
            break;
        case OpKind::MlaRopeStore:
            cuda::mla_rope_store(rope_, kvs_[size_t(r.seq)], r.layer, int(heads), int(dk),
                                 int(nope), act(Act::Q) + r.row0 * heads * dk,
                                 act(Act::KvLatent) + r.row0 * width, int(width), int(rank), r.n,
                                 position(), stream_, pdl_);
            break;
        case OpKind::MlaAttention: {
            float* q = act(Act::Q) + r.row0 * heads * dk;
            float* q_latent = dev(mla_q_);
            float* o_latent = dev(mla_o_);
            const cuda::HeadRows q_nope{q, heads * dk, dk}, q_rope{q + nope, heads * dk, dk},
                latent_q{q_latent, heads * rank, rank}, latent_o{o_latent, heads * rank, rank},
                out{act(Act::AttnOut) + r.row0 * heads * dv, heads * dv, dv};
            // The query into the latent's space: attn_k_b holds W_uk(h)^T, rank rows of nope per
            // head; attn_kv_b holds W_uk(h) itself as the first nope of each head's rows.
            if (r.w2.present()) {
                cuda::head_products_transposed(r.w2, nope + dv, int(nope), int(heads), q_nope,
                                               latent_q, r.n, stream_);
            } else {
                cuda::head_products(r.w0, 0, rank, rank, int(heads), q_nope, latent_q, r.n,
                                    stream_);
            }
            const cuda::MlaAttentionShape shape{int(heads), int(rank), int(hp_.n_rot),
                                                mla_attention_scale(rope_.config(), hp_)};
            cuda::mla_attention(kvs_[size_t(r.seq)], r.layer, shape, latent_q, q_rope, latent_o,
                                r.n, position(), recorded ? int64_t(n_ctx_) : pos_set_ + r.n,
                                dev(mla_scratch_), stream_);
            // The value heads: W_uv(h), dv rows of rank per head (attn_v_b, or the rows of
            // attn_kv_b after each head's key rows).
            if (r.w2.present()) {
                cuda::head_products(r.w2, nope, nope + dv, dv, int(heads), latent_o, out, r.n,
                                    stream_);
            } else {
                cuda::head_products(r.w1, 0, dv, dv, int(heads), latent_o, out, r.n, stream_);
            }
            break;
        }
        default:
            break;
    }
}

}  // namespace strata::cuda_impl
