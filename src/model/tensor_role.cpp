#include "model/tensor_role.h"

#include <array>
#include <charconv>

namespace strata {

namespace {

struct RoleName {
    TensorRole role;
    std::string_view base;  // GGUF base name inside a block or at top level
    std::string_view display;
};

// One table for both directions (name -> role, role -> name).
constexpr std::array<RoleName, 49> kRoles = {{
    {TensorRole::TokenEmbedding, "token_embd", "token_embd"},
    {TensorRole::OutputNorm, "output_norm", "output_norm"},
    {TensorRole::Output, "output", "output"},
    {TensorRole::RopeFreqs, "rope_freqs", "rope_freqs"},
    {TensorRole::AttnNorm, "attn_norm", "attn_norm"},
    {TensorRole::AttnQ, "attn_q", "attn_q"},
    {TensorRole::AttnK, "attn_k", "attn_k"},
    {TensorRole::AttnV, "attn_v", "attn_v"},
    {TensorRole::AttnQkv, "attn_qkv", "attn_qkv"},
    {TensorRole::AttnOutput, "attn_output", "attn_output"},
    {TensorRole::AttnQNorm, "attn_q_norm", "attn_q_norm"},
    {TensorRole::AttnKNorm, "attn_k_norm", "attn_k_norm"},
    {TensorRole::AttnPostNorm, "post_attention_norm", "attn_post_norm"},
    {TensorRole::AttnSinks, "attn_sinks", "attn_sinks"},
    {TensorRole::AttnOther, "", "attn_other"},
    {TensorRole::FfnNorm, "ffn_norm", "ffn_norm"},
    {TensorRole::FfnPostNorm, "post_ffw_norm", "ffn_post_norm"},
    {TensorRole::FfnGate, "ffn_gate", "ffn_gate"},
    {TensorRole::FfnUp, "ffn_up", "ffn_up"},
    {TensorRole::FfnDown, "ffn_down", "ffn_down"},
    {TensorRole::MoeRouter, "ffn_gate_inp", "moe_router"},
    {TensorRole::MoeRouterBias, "exp_probs_b", "moe_router_bias"},
    {TensorRole::ExpertGate, "ffn_gate_exps", "expert_gate"},
    {TensorRole::ExpertUp, "ffn_up_exps", "expert_up"},
    {TensorRole::ExpertDown, "ffn_down_exps", "expert_down"},
    {TensorRole::ExpertGateUp, "ffn_gate_up_exps", "expert_gate_up"},
    {TensorRole::SharedGate, "ffn_gate_shexp", "shared_gate"},
    {TensorRole::SharedUp, "ffn_up_shexp", "shared_up"},
    {TensorRole::SharedDown, "ffn_down_shexp", "shared_down"},
    {TensorRole::SharedExpertGate, "ffn_gate_inp_shexp", "shared_expert_gate"},
    {TensorRole::AttnGate, "attn_gate", "attn_gate"},
    {TensorRole::SsmConv1d, "ssm_conv1d", "ssm_conv1d"},
    {TensorRole::SsmDt, "ssm_dt", "ssm_dt"},
    {TensorRole::SsmA, "ssm_a", "ssm_a"},
    {TensorRole::SsmBeta, "ssm_beta", "ssm_beta"},
    {TensorRole::SsmAlpha, "ssm_alpha", "ssm_alpha"},
    {TensorRole::SsmNorm, "ssm_norm", "ssm_norm"},
    {TensorRole::SsmOut, "ssm_out", "ssm_out"},
    {TensorRole::SsmIn, "ssm_in", "ssm_in"},
    {TensorRole::SsmBetaAlpha, "ssm_ba", "ssm_ba"},
    {TensorRole::AttnQA, "attn_q_a", "attn_q_a"},
    {TensorRole::AttnQANorm, "attn_q_a_norm", "attn_q_a_norm"},
    {TensorRole::AttnQB, "attn_q_b", "attn_q_b"},
    {TensorRole::AttnKvAMqa, "attn_kv_a_mqa", "attn_kv_a_mqa"},
    {TensorRole::AttnKvANorm, "attn_kv_a_norm", "attn_kv_a_norm"},
    {TensorRole::AttnKB, "attn_k_b", "attn_k_b"},
    {TensorRole::AttnVB, "attn_v_b", "attn_v_b"},
    {TensorRole::AttnKvB, "attn_kv_b", "attn_kv_b"},
    {TensorRole::Other, "", "other"},
}};

const RoleName* find_role(TensorRole r) {
    for (const auto& e : kRoles) {
        if (e.role == r) return &e;
    }
    return nullptr;
}

std::optional<int> parse_int(std::string_view s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v < 0) return std::nullopt;
    return v;
}

}  // namespace

std::string_view tensor_role_name(TensorRole r) {
    const RoleName* e = find_role(r);
    return e ? e->display : "other";
}

bool is_expert_role(TensorRole r) {
    return r == TensorRole::ExpertGate || r == TensorRole::ExpertUp ||
           r == TensorRole::ExpertDown || r == TensorRole::ExpertGateUp;
}

bool is_ffn_role(TensorRole r) {
    switch (r) {
        case TensorRole::FfnGate:
        case TensorRole::FfnUp:
        case TensorRole::FfnDown:
        case TensorRole::MoeRouter:
        case TensorRole::MoeRouterBias:
        case TensorRole::SharedGate:
        case TensorRole::SharedUp:
        case TensorRole::SharedDown:
        case TensorRole::SharedExpertGate:
            return true;
        default:
            return is_expert_role(r);
    }
}

bool is_attention_role(TensorRole r) {
    switch (r) {
        case TensorRole::AttnQ:
        case TensorRole::AttnK:
        case TensorRole::AttnV:
        case TensorRole::AttnQkv:
        case TensorRole::AttnOutput:
        case TensorRole::AttnQNorm:
        case TensorRole::AttnKNorm:
        case TensorRole::AttnSinks:
        case TensorRole::AttnOther:
        case TensorRole::AttnGate:
        case TensorRole::SsmConv1d:
        case TensorRole::SsmDt:
        case TensorRole::SsmA:
        case TensorRole::SsmBeta:
        case TensorRole::SsmAlpha:
        case TensorRole::SsmNorm:
        case TensorRole::SsmOut:
        case TensorRole::SsmIn:
        case TensorRole::SsmBetaAlpha:
        case TensorRole::AttnQA:
        case TensorRole::AttnQANorm:
        case TensorRole::AttnQB:
        case TensorRole::AttnKvAMqa:
        case TensorRole::AttnKvANorm:
        case TensorRole::AttnKB:
        case TensorRole::AttnVB:
        case TensorRole::AttnKvB:
            return true;
        default:
            return false;
    }
}

bool is_norm_role(TensorRole r) {
    switch (r) {
        case TensorRole::OutputNorm:
        case TensorRole::AttnNorm:
        case TensorRole::AttnQNorm:
        case TensorRole::AttnKNorm:
        case TensorRole::AttnPostNorm:
        case TensorRole::FfnNorm:
        case TensorRole::FfnPostNorm:
        case TensorRole::SsmNorm:
        case TensorRole::AttnQANorm:
        case TensorRole::AttnKvANorm:
            return true;
        default:
            return false;
    }
}

TensorName classify_tensor_name(std::string_view name) {
    TensorName out;
    // Strip ".weight" / ".bias" (some tensors, e.g. attn_sinks, have neither).
    std::string_view base = name;
    if (base.ends_with(".weight")) {
        base.remove_suffix(7);
    } else if (base.ends_with(".bias")) {
        base.remove_suffix(5);
        out.is_bias = true;
    }
    if (base.starts_with("blk.")) {
        base.remove_prefix(4);
        const size_t dot = base.find('.');
        if (dot == std::string_view::npos) return out;
        auto layer = parse_int(base.substr(0, dot));
        if (!layer) return out;
        out.layer = *layer;
        base.remove_prefix(dot + 1);
        // Old Mixtral layout: blk.N.ffn_gate.E.weight, one tensor per expert.
        const size_t dot2 = base.rfind('.');
        if (dot2 != std::string_view::npos) {
            if (auto e = parse_int(base.substr(dot2 + 1))) {
                const std::string_view stem = base.substr(0, dot2);
                TensorRole r = TensorRole::Other;
                if (stem == "ffn_gate")
                    r = TensorRole::ExpertGate;
                else if (stem == "ffn_up")
                    r = TensorRole::ExpertUp;
                else if (stem == "ffn_down")
                    r = TensorRole::ExpertDown;
                if (r != TensorRole::Other) {
                    out.role = r;
                    out.expert = *e;
                    return out;
                }
            }
        }
        for (const auto& e : kRoles) {
            if (!e.base.empty() && e.base == base) {
                out.role = e.role;
                return out;
            }
        }
        // Attention variants without a role of their own.
        if (base.starts_with("attn_")) out.role = TensorRole::AttnOther;
        return out;
    }
    for (const auto& e : kRoles) {
        if (!e.base.empty() && e.base == base) {
            out.role = e.role;
            return out;
        }
    }
    return out;
}

std::string tensor_name(TensorRole role, int layer, bool bias) {
    const RoleName* e = find_role(role);
    std::string base = e && !e->base.empty() ? std::string(e->base) : std::string("unknown");
    std::string out = layer >= 0 ? "blk." + std::to_string(layer) + "." + base : base;
    // The reference converter writes the DeltaNet's A without a suffix.
    if (role == TensorRole::SsmA && !bias) return out;
    return out + (bias ? ".bias" : ".weight");
}

}  // namespace strata
