#include "model/tensor_layout.h"

#include <array>

namespace strata {

namespace {

// Appends tensors of one scope (top level or one layer) in file order.
class LayoutBuilder {
  public:
    LayoutBuilder(std::vector<TensorSpec>& out, int layer) : out_(out), layer_(layer) {}

    void weight(TensorRole role, std::vector<uint64_t> shape) {
        add(role, false, std::move(shape));
    }
    void bias(TensorRole role, uint64_t n) { add(role, true, {n}); }
    // A bias of several rows: one per routed expert.
    void bias_rows(TensorRole role, std::vector<uint64_t> shape) {
        add(role, true, std::move(shape));
    }

  private:
    void add(TensorRole role, bool is_bias, std::vector<uint64_t> shape) {
        TensorSpec t;
        t.name = tensor_name(role, layer_, is_bias);
        t.role = role;
        t.layer = layer_;
        t.is_bias = is_bias;
        t.shape = std::move(shape);
        out_.push_back(std::move(t));
    }

    std::vector<TensorSpec>& out_;
    int layer_;
};

// q, k, v (with biases and per-head norms when the family has them) and the output projection.
void add_attention(LayoutBuilder& blk, const ModelHparams& hp) {
    const uint64_t n_embd = hp.n_embd;
    // A gated query carries each head's output gate beside it.
    const uint64_t n_q = uint64_t{hp.n_head} * hp.head_dim_k * (hp.attn_output_gate ? 2 : 1);
    const uint64_t n_k = uint64_t{hp.n_head_kv} * hp.head_dim_k;  // key width (GQA)
    const uint64_t n_v = uint64_t{hp.n_head_kv} * hp.head_dim_v;  // value width
    const uint64_t n_attn_out = uint64_t{hp.n_head} * hp.head_dim_v;
    blk.weight(TensorRole::AttnQ, {n_embd, n_q});
    blk.weight(TensorRole::AttnK, {n_embd, n_k});
    blk.weight(TensorRole::AttnV, {n_embd, n_v});
    if (hp.has_qkv_bias) {
        blk.bias(TensorRole::AttnQ, n_q);
        blk.bias(TensorRole::AttnK, n_k);
        blk.bias(TensorRole::AttnV, n_v);
    }
    if (hp.has_qk_norm) {
        blk.weight(TensorRole::AttnQNorm, {hp.head_dim_k});
        blk.weight(TensorRole::AttnKNorm, {hp.head_dim_k});
    }
    blk.weight(TensorRole::AttnOutput, {n_attn_out, n_embd});
    const ArchTraits* traits = find_arch_traits(hp.arch);
    if (traits && traits->attn_out_bias) blk.bias(TensorRole::AttnOutput, n_embd);
    if (hp.has_attn_sinks) blk.weight(TensorRole::AttnSinks, {hp.n_head});
}

// Multi-head latent attention: the query's compression (or one attn_q), the shared latent and
// rotary key, the per-head up-projections and the output projection.
void add_mla_attention(LayoutBuilder& blk, const ModelHparams& hp) {
    const uint64_t n_embd = hp.n_embd, heads = hp.n_head, nope = hp.head_dim_nope();
    const uint64_t r_q = hp.n_lora_q, r_kv = hp.n_lora_kv, v = hp.head_dim_v;
    if (r_q > 0) {
        blk.weight(TensorRole::AttnQA, {n_embd, r_q});
        blk.weight(TensorRole::AttnQANorm, {r_q});
        blk.weight(TensorRole::AttnQB, {r_q, heads * hp.head_dim_k});
    } else {
        blk.weight(TensorRole::AttnQ, {n_embd, heads * hp.head_dim_k});
    }
    blk.weight(TensorRole::AttnKvAMqa, {n_embd, r_kv + hp.n_rot});
    blk.weight(TensorRole::AttnKvANorm, {r_kv});
    if (hp.mla_kv_b) {
        blk.weight(TensorRole::AttnKvB, {r_kv, heads * (nope + v)});
    } else {
        blk.weight(TensorRole::AttnKB, {nope, r_kv, heads});
        blk.weight(TensorRole::AttnVB, {r_kv, v, heads});
    }
    blk.weight(TensorRole::AttnOutput, {heads * v, n_embd});
}

}  // namespace

ModelHparams with_layout_defaults(ModelHparams hp) {
    const ArchTraits* traits = find_arch_traits(hp.arch);
    if (hp.n_head_kv == 0) hp.n_head_kv = hp.n_head;
    if (hp.head_dim_k == 0 && hp.n_head > 0) hp.head_dim_k = hp.n_embd / hp.n_head;
    if (hp.head_dim_v == 0) hp.head_dim_v = hp.head_dim_k;
    if (hp.n_rot == 0) hp.n_rot = hp.head_dim_k;
    if (traits) {
        hp.has_qkv_bias = hp.has_qkv_bias || traits->qkv_bias;
        hp.has_qk_norm = hp.has_qk_norm || traits->qk_norm;
        hp.has_attn_sinks = hp.has_attn_sinks || traits->attn_sinks;
        hp.has_expert_bias = hp.has_expert_bias || (traits->expert_bias && hp.n_expert > 0);
        hp.ffn_norm_is_post_attention = traits->ffn_norm_is_post_attention;
        // A shape that chose its gating keeps it (a DeepSeek-V3 preset's sigmoid router).
        if (hp.expert_gating == ExpertGating::Softmax) hp.expert_gating = traits->expert_gating;
        hp.expert_activation = traits->expert_activation;
        if (traits->untied_output) hp.tied_output = false;
        if (traits->swa_period > 0 && hp.swa_layers.empty()) {
            for (uint32_t il = 0; il < hp.n_layer; ++il) {
                hp.swa_layers.push_back(il % traits->swa_period < traits->swa_period - 1 ? 1 : 0);
            }
        }
    }
    if (traits && traits->hybrid_delta_net) {
        hp.attn_output_gate = true;
        hp.ssm_grouped_heads = traits->delta_net_grouped;
        if (!traits->delta_net_grouped) hp.ssm_fused_qkvz = false;
        // The published models' full_attention_interval: every fourth layer is full attention.
        if (hp.recurrent_layers.empty()) {
            hp.recurrent_layers.assign(hp.n_layer, false);
            for (uint32_t il = 0; il < hp.n_layer; ++il)
                hp.recurrent_layers[il] = (il + 1) % 4 != 0;
        }
    }
    if (hp.n_expert > 0) {
        if (traits && traits->expert_width_default == ExpertWidthDefault::FfnLength) {
            hp.n_ff_exp = hp.n_ff;  // llama.cpp sizes Mixtral-layout experts with n_ff
        } else if (hp.n_ff_exp == 0 && traits &&
                   traits->expert_width_default == ExpertWidthDefault::Required) {
            hp.n_ff_exp = hp.n_ff;
        } else if (hp.n_ff_exp == 0 && hp.n_expert_used > 0) {
            hp.n_ff_exp = hp.n_ff / hp.n_expert_used;
        }
        if (traits && traits->shared_expert) {
            if (hp.n_expert_shared == 0) hp.n_expert_shared = 1;
            if (hp.n_ff_shexp == 0) {
                hp.n_ff_shexp =
                    traits->shared_width_from_experts ? hp.n_ff_exp * hp.n_expert_shared : hp.n_ff;
            }
        }
        if (traits && traits->selection_bias) hp.has_selection_bias = true;
    }
    return hp;
}

uint64_t TensorSpec::n_elements() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
}

std::vector<TensorSpec> tensor_layout(const ModelHparams& hparams) {
    const ModelHparams hp = with_layout_defaults(hparams);
    const uint64_t n_embd = hp.n_embd;
    const bool shared_expert = hp.is_moe() && hp.n_ff_shexp > 0;

    std::vector<TensorSpec> out;
    LayoutBuilder top(out, -1);
    top.weight(TensorRole::TokenEmbedding, {n_embd, hp.n_vocab});
    top.weight(TensorRole::OutputNorm, {n_embd});
    if (!hp.tied_output) top.weight(TensorRole::Output, {n_embd, hp.n_vocab});

    const TensorRole ffn_norm =
        hp.ffn_norm_is_post_attention ? TensorRole::AttnPostNorm : TensorRole::FfnNorm;
    const ArchTraits* traits = find_arch_traits(hp.arch);
    const bool shared_gate = traits && traits->shared_expert_gate;
    const auto add_ffn = [&](LayoutBuilder& blk, uint32_t il) {
        blk.weight(ffn_norm, {n_embd});
        if (!hp.is_moe_layer(il)) {
            blk.weight(TensorRole::FfnGate, {n_embd, hp.n_ff});
            blk.weight(TensorRole::FfnUp, {n_embd, hp.n_ff});
            blk.weight(TensorRole::FfnDown, {hp.n_ff, n_embd});
            return;
        }
        const uint64_t n_ff_exp = hp.n_ff_exp, n_expert = hp.n_expert;
        blk.weight(TensorRole::MoeRouter, {n_embd, n_expert});
        if (hp.has_expert_bias) blk.bias(TensorRole::MoeRouter, n_expert);
        if (hp.has_selection_bias) blk.bias(TensorRole::MoeRouterBias, n_expert);
        blk.weight(TensorRole::ExpertGate, {n_embd, n_ff_exp, n_expert});
        blk.weight(TensorRole::ExpertUp, {n_embd, n_ff_exp, n_expert});
        blk.weight(TensorRole::ExpertDown, {n_ff_exp, n_embd, n_expert});
        if (hp.has_expert_bias) {
            blk.bias_rows(TensorRole::ExpertGate, {n_ff_exp, n_expert});
            blk.bias_rows(TensorRole::ExpertUp, {n_ff_exp, n_expert});
            blk.bias_rows(TensorRole::ExpertDown, {n_embd, n_expert});
        }
        if (shared_expert) {
            if (shared_gate) blk.weight(TensorRole::SharedExpertGate, {n_embd});
            blk.weight(TensorRole::SharedGate, {n_embd, hp.n_ff_shexp});
            blk.weight(TensorRole::SharedUp, {n_embd, hp.n_ff_shexp});
            blk.weight(TensorRole::SharedDown, {hp.n_ff_shexp, n_embd});
        }
    };
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        LayoutBuilder blk(out, static_cast<int>(il));
        blk.weight(TensorRole::AttnNorm, {n_embd});
        if (hp.is_recurrent(il)) {
            const uint64_t conv = hp.conv_channels(), value = hp.ssm_value_dim();
            if (hp.ssm_fused_qkvz) {
                blk.weight(TensorRole::SsmIn, {n_embd, hp.ssm_qkvz_dim()});
            } else {
                blk.weight(TensorRole::AttnQkv, {n_embd, conv});
                blk.weight(TensorRole::AttnGate, {n_embd, value});
            }
            blk.weight(TensorRole::SsmConv1d, {hp.ssm_d_conv, conv});
            blk.bias(TensorRole::SsmDt, hp.ssm_dt_rank);
            blk.weight(TensorRole::SsmA, {hp.ssm_dt_rank});
            if (hp.ssm_grouped_heads) {
                blk.weight(TensorRole::SsmBetaAlpha, {n_embd, 2 * uint64_t{hp.ssm_dt_rank}});
            } else {
                blk.weight(TensorRole::SsmBeta, {n_embd, hp.ssm_dt_rank});
                blk.weight(TensorRole::SsmAlpha, {n_embd, hp.ssm_dt_rank});
            }
            blk.weight(TensorRole::SsmNorm, {hp.ssm_d_state});
            blk.weight(TensorRole::SsmOut, {value, n_embd});
        } else if (hp.is_mla()) {
            add_mla_attention(blk, hp);
        } else {
            add_attention(blk, hp);
        }
        add_ffn(blk, il);
    }
    // Multi-token-prediction blocks after the trunk: a full-attention layer and its FFN, then the
    // block's own tensors (the projection of [embedding-norm; hidden-norm], the two norms and the
    // head's norm).
    for (uint32_t k = 0; k < hp.n_layer_nextn; ++k) {
        const int il = static_cast<int>(hp.n_layer + k);
        LayoutBuilder blk(out, il);
        blk.weight(TensorRole::AttnNorm, {n_embd});
        add_attention(blk, hp);
        add_ffn(blk, uint32_t(il));
        const std::string prefix = "blk." + std::to_string(il) + ".nextn.";
        const auto own = [&](std::string_view base, std::vector<uint64_t> shape) {
            TensorSpec t;
            t.name = prefix + std::string(base) + ".weight";
            t.layer = il;
            t.shape = std::move(shape);
            out.push_back(std::move(t));
        };
        own("eh_proj", {2 * n_embd, n_embd});
        own("enorm", {n_embd});
        own("hnorm", {n_embd});
        own("shared_head_norm", {n_embd});
    }
    return out;
}

uint64_t layout_parameter_count(const std::vector<TensorSpec>& layout) {
    uint64_t n = 0;
    for (const auto& t : layout) n += t.n_elements();
    return n;
}

}  // namespace strata
