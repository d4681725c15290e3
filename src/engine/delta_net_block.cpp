// The Gated DeltaNet block of the hybrid families (qwen35, qwen35moe): the linear attention of
// three layers in four. The projections are ordinary linear jobs of the layer's backend; the
// convolution, the delta rule over the sequence's recurrent state and the gated norm are one
// backend operation (Backend::delta_net).
#include "engine/engine.h"
#include "engine/op_figures.h"

namespace strata::engine {

Result<void> Engine::delta_net_block(const LayerArgs& a) {
    const int il = a.layer;
    const int64_t n = a.n, d = hp_.n_embd;
    const LayerView& w = a.w;
    const TensorView &qkv = w.weight(TensorRole::AttnQkv), &z = w.weight(TensorRole::AttnGate),
                     &beta = w.weight(TensorRole::SsmBeta), &alpha = w.weight(TensorRole::SsmAlpha),
                     &out = w.weight(TensorRole::SsmOut);
    const DeltaNetWeights small{&w.weight(TensorRole::SsmConv1d), &w.bias(TensorRole::SsmDt),
                                &w.weight(TensorRole::SsmA), &w.weight(TensorRole::SsmNorm)};
    for (const TensorView* v : {small.conv1d, small.dt_bias, small.a, small.norm}) {
        if (!v->present() || v->type != TensorType::F32) {
            return err("layer " + std::to_string(il) +
                       ": the delta net's ssm_conv1d, ssm_dt, ssm_a and ssm_norm must be F32");
        }
    }
    staged_on_ = nullptr;  // a CPU-only block: nothing is staged elsewhere

    timed(Op::Elementwise,
          [&] { be_->rms_norm(Act::Hidden, w.weight(TensorRole::AttnNorm), Act::Normed, n); });
    dump("attn_norm", il, Act::Normed, n, d);
    timed(
        Op::Projection,
        [&] {
            const LinearJob jobs[] = {{&qkv, nullptr, Act::Mixed},
                                      {&z, nullptr, Act::Gate},
                                      {&beta, nullptr, Act::Beta},
                                      {&alpha, nullptr, Act::Alpha}};
            be_->linear(jobs, Act::Normed, n);
        },
        view_bytes(qkv) + view_bytes(z) + view_bytes(beta) + view_bytes(alpha),
        view_flops(qkv, n) + view_flops(z, n) + view_flops(beta, n) + view_flops(alpha, n));
    const int64_t channels = int64_t(hp_.conv_channels()), value = int64_t(hp_.ssm_value_dim());
    dump("linear_attn_qkv_mixed", il, Act::Mixed, n, channels);
    dump("z", il, Act::Gate, n, value);

    // The delta rule reads and writes each value head's S x S state once per token.
    const double S = hp_.ssm_d_state, heads = hp_.ssm_dt_rank;
    timed(
        Op::Attention, [&] { be_->delta_net(il, small, a.runs); }, 0,
        8.0 * heads * S * S * double(n));
    dump("attn_output_gated", il, Act::AttnOut, n, value);
    timed(
        Op::Projection,
        [&] {
            const LinearJob jobs[] = {{&out, nullptr, Act::Out}};
            be_->linear(jobs, Act::AttnOut, n);
        },
        view_bytes(out), view_flops(out, n));
    dump("linear_attn_out", il, Act::Out, n, d);
    be_->add(Act::Hidden, Act::Out, n);
    dump("ffn_inp", il, Act::Hidden, n, d);
    return {};
}

}  // namespace strata::engine
