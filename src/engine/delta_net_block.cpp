// The Gated DeltaNet block of the hybrid families (qwen35, qwen35moe, qwen3next): the linear
// attention of three layers in four. The projections are ordinary linear jobs of the layer's
// backend; the convolution, the delta rule over the sequence's recurrent state and the gated norm
// are one backend operation (Backend::delta_net).
//
// qwen3next stores some projections fused, their columns grouped per key head (r value heads per
// key head, S the head size): ssm_ba is [beta r | alpha r] per key head, and in files of the
// earlier converters ssm_in is [q S | k S | v r*S | z r*S] per key head. Their output lands in
// Act::Fused and Backend::ungroup_columns moves each part to where qwen35's separate projections
// write it: q, k and v into Mixed ([q: all key heads | k: all key heads | v: all value heads]),
// z into Gate, beta into Beta and alpha into Alpha, the value heads in the file's order (the
// hparams' ssm_key_head pairs them with their key heads).
#include <array>

#include "engine/engine.h"
#include "engine/op_figures.h"

namespace strata::engine {

namespace {

// The parts of ssm_in's groups: q, k, v and z of one key head.
std::array<ColumnPart, 4> qkvz_parts(const ModelHparams& hp) {
    const int64_t S = hp.ssm_d_state, r = hp.ssm_dt_rank / hp.ssm_n_group;
    const int64_t key = int64_t(hp.ssm_key_dim()), channels = int64_t(hp.conv_channels()),
                  value = int64_t(hp.ssm_value_dim());
    return {{{Act::Mixed, S, 0, channels},
             {Act::Mixed, S, key, channels},
             {Act::Mixed, r * S, 2 * key, channels},
             {Act::Gate, r * S, 0, value}}};
}

// The parts of ssm_ba's groups: beta and alpha of one key head's value heads.
std::array<ColumnPart, 2> beta_alpha_parts(const ModelHparams& hp) {
    const int64_t heads = hp.ssm_dt_rank, r = heads / hp.ssm_n_group;
    return {{{Act::Beta, r, 0, heads}, {Act::Alpha, r, 0, heads}}};
}

}  // namespace

Result<void> Engine::delta_net_block(const LayerArgs& a) {
    const int il = a.layer;
    const int64_t n = a.n, d = hp_.n_embd;
    const LayerView& w = a.w;
    const TensorView& out = w.weight(TensorRole::SsmOut);
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
    // The projections: q/k/v and z (fused or not), then beta and alpha (fused or not). A fused
    // projection fills Act::Fused, which one projection at a time uses.
    const int64_t groups = hp_.ssm_n_group;
    const auto project_into = [&](std::span<const LinearJob> jobs) {
        double bytes = 0, flops = 0;
        for (const LinearJob& j : jobs) {
            bytes += view_bytes(*j.weight);
            flops += view_flops(*j.weight, n);
        }
        timed(
            Op::Projection, [&] { be_->linear(jobs, Act::Normed, n); }, bytes, flops);
    };
    const auto ungroup = [&](std::span<const ColumnPart> parts) {
        timed(Op::Elementwise, [&] { be_->ungroup_columns(Act::Fused, groups, parts, n); });
    };
    const TensorView &qkv = w.weight(TensorRole::AttnQkv), &z = w.weight(TensorRole::AttnGate);
    const TensorView &beta = w.weight(TensorRole::SsmBeta), &alpha = w.weight(TensorRole::SsmAlpha);
    const TensorView& beta_alpha = w.weight(TensorRole::SsmBetaAlpha);
    if (hp_.ssm_fused_qkvz) {
        const LinearJob fused[] = {{&w.weight(TensorRole::SsmIn), nullptr, Act::Fused}};
        project_into(fused);
        dump("linear_attn_mixed_qkvz", il, Act::Fused, n, int64_t(hp_.ssm_qkvz_dim()));
        ungroup(qkvz_parts(hp_));
        const LinearJob ba[] = {{&beta_alpha, nullptr, Act::Fused}};
        project_into(ba);
    } else if (hp_.ssm_grouped_heads) {
        const LinearJob jobs[] = {{&qkv, nullptr, Act::Mixed},
                                  {&z, nullptr, Act::Gate},
                                  {&beta_alpha, nullptr, Act::Fused}};
        project_into(jobs);
    } else {
        const LinearJob jobs[] = {{&qkv, nullptr, Act::Mixed},
                                  {&z, nullptr, Act::Gate},
                                  {&beta, nullptr, Act::Beta},
                                  {&alpha, nullptr, Act::Alpha}};
        project_into(jobs);
    }
    if (hp_.ssm_grouped_heads) {
        dump("linear_attn_mixed_ba", il, Act::Fused, n, 2 * int64_t(hp_.ssm_dt_rank));
        ungroup(beta_alpha_parts(hp_));
    }
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
