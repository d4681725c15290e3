#include "model/tensor_validation.h"

#include <string_view>

#include "model/architecture.h"
#include "model/tensor_role.h"

namespace strata {

namespace {

std::string shape_string(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

// ggml pads shapes with trailing 1s; [256] and [256, 1] are the same tensor.
bool same_shape(const TensorInfo& t, const std::vector<uint64_t>& want) {
    for (int d = 0; d < kMaxTensorDims; ++d) {
        const uint64_t w = d < static_cast<int>(want.size()) ? want[d] : 1;
        if (t.shape[d] != w) return false;
    }
    return true;
}

std::string layer_name(int layer, std::string_view base, std::string_view suffix = "weight") {
    return "blk." + std::to_string(layer) + "." + std::string(base) + "." + std::string(suffix);
}

// Checks each tensor the architecture expects as it is named, and remembers which tensors of the
// file were expected, so that memory stays proportional to the file and not to the product of
// layers and experts its metadata claims.
class ExpectedSet {
  public:
    ExpectedSet(const GgufFile& f, const ModelHparams& hp, TensorCheck& out)
        : f_(f), hp_(hp), out_(out), seen_(f.tensors.size(), false) {}

    // `shape` in ggml order (shape[0] = row length); `meaning` is that shape in words for
    // messages ("[n_embd, n_head*head_dim]").
    void add(const std::string& name, const std::vector<uint64_t>& shape, std::string_view meaning,
             bool required = true) {
        const TensorInfo* t = f_.find_tensor(name);
        if (!t) {
            if (required) {
                out_.errors.push_back(f_.path + ": tensor " + name + " is missing; a " + hp_.arch +
                                      " model needs it with shape " + shape_string(shape) + " = " +
                                      std::string(meaning));
            }
            return;
        }
        seen_[static_cast<size_t>(t - f_.tensors.data())] = true;
        if (!same_shape(*t, shape)) {
            out_.errors.push_back(f_.path + ": tensor " + name + " has shape " + t->shape_string() +
                                  " but this " + hp_.arch + " model needs " + shape_string(shape) +
                                  " = " + std::string(meaning));
        }
    }

    bool seen(size_t tensor_index) const { return seen_[tensor_index]; }

  private:
    const GgufFile& f_;
    const ModelHparams& hp_;
    TensorCheck& out_;
    std::vector<bool> seen_;  // by index in f_.tensors
};

void expect_attention(ExpectedSet& e, const ModelHparams& hp, const ArchTraits& traits, int il) {
    const uint64_t embd = hp.n_embd;
    // A gated query: each head's query and output gate side by side.
    const uint64_t q = uint64_t{hp.n_head_at(il)} * hp.head_dim_k * (hp.attn_output_gate ? 2 : 1);
    const uint64_t k = uint64_t{hp.n_head_kv_at(il)} * hp.head_dim_k;
    const uint64_t v = uint64_t{hp.n_head_kv_at(il)} * hp.head_dim_v;
    const uint64_t o = uint64_t{hp.n_head_at(il)} * hp.head_dim_v;
    e.add(layer_name(il, "attn_norm"), {embd}, "[n_embd]");
    e.add(layer_name(il, "attn_q"), {embd, q}, "[n_embd, n_head*head_dim]");
    e.add(layer_name(il, "attn_k"), {embd, k}, "[n_embd, n_head_kv*head_dim]");
    e.add(layer_name(il, "attn_v"), {embd, v}, "[n_embd, n_head_kv*head_dim_v]");
    e.add(layer_name(il, "attn_output"), {o, embd}, "[n_head*head_dim_v, n_embd]");
    // Biases: part of qwen2-style architectures, optional elsewhere (some llama fine-tunes).
    e.add(layer_name(il, "attn_q", "bias"), {q}, "[n_head*head_dim]", traits.qkv_bias);
    e.add(layer_name(il, "attn_k", "bias"), {k}, "[n_head_kv*head_dim]", traits.qkv_bias);
    e.add(layer_name(il, "attn_v", "bias"), {v}, "[n_head_kv*head_dim_v]", traits.qkv_bias);
    e.add(layer_name(il, "attn_output", "bias"), {embd}, "[n_embd]", traits.attn_out_bias);
    if (traits.attn_sinks) {
        e.add(layer_name(il, "attn_sinks"), {hp.n_head_at(il)}, "[n_head]");
    }
    e.add(layer_name(il, "attn_q_norm"), {hp.head_dim_k}, "[head_dim]", traits.qk_norm);
    e.add(layer_name(il, "attn_k_norm"), {hp.head_dim_k}, "[head_dim]", traits.qk_norm);
}

// Multi-head latent attention (deepseek2): the query through its compression (or one attn_q), the
// shared latent and rotary key, the per-head up-projections (attn_k_b and attn_v_b, or attn_kv_b
// in earlier files) and the output.
void expect_mla_attention(ExpectedSet& e, const ModelHparams& hp, int il) {
    const uint64_t embd = hp.n_embd, heads = hp.n_head_at(il), r_q = hp.n_lora_q,
                   r_kv = hp.n_lora_kv, nope = hp.head_dim_nope(), v = hp.head_dim_v;
    const uint64_t q = heads * hp.head_dim_k;
    e.add(layer_name(il, "attn_norm"), {embd}, "[n_embd]");
    if (r_q > 0) {
        e.add(layer_name(il, "attn_q_a"), {embd, r_q}, "[n_embd, q_lora_rank]");
        e.add(layer_name(il, "attn_q_a_norm"), {r_q}, "[q_lora_rank]");
        e.add(layer_name(il, "attn_q_b"), {r_q, q}, "[q_lora_rank, n_head*head_dim]");
    } else {
        e.add(layer_name(il, "attn_q"), {embd, q}, "[n_embd, n_head*head_dim]");
    }
    e.add(layer_name(il, "attn_kv_a_mqa"), {embd, r_kv + hp.n_rot},
          "[n_embd, kv_lora_rank + n_rot]");
    e.add(layer_name(il, "attn_kv_a_norm"), {r_kv}, "[kv_lora_rank]");
    if (hp.mla_kv_b) {
        e.add(layer_name(il, "attn_kv_b"), {r_kv, heads * (nope + v)},
              "[kv_lora_rank, n_head*(head_dim - n_rot + head_dim_v)]");
    } else {
        e.add(layer_name(il, "attn_k_b"), {nope, r_kv, heads},
              "[head_dim - n_rot, kv_lora_rank, n_head]");
        e.add(layer_name(il, "attn_v_b"), {r_kv, v, heads}, "[kv_lora_rank, head_dim_v, n_head]");
    }
    e.add(layer_name(il, "attn_output"), {heads * v, embd}, "[n_head*head_dim_v, n_embd]");
}

// A Gated DeltaNet layer (hybrid families): fused q/k/v, output gate z, the convolution, the
// decay and write-strength projections and their parameters, the gated norm and the output.
// qwen3next's files may fuse q/k/v and z into ssm_in, and always fuse beta and alpha (ssm_ba).
void expect_delta_net(ExpectedSet& e, const ModelHparams& hp, int il) {
    const uint64_t embd = hp.n_embd, conv = hp.conv_channels(), value = hp.ssm_value_dim();
    const uint64_t heads = hp.ssm_dt_rank;
    e.add(layer_name(il, "attn_norm"), {embd}, "[n_embd]");
    if (hp.ssm_fused_qkvz) {
        e.add(layer_name(il, "ssm_in"), {embd, hp.ssm_qkvz_dim()},
              "[n_embd, 2*key_dim + 2*value_dim]");
    } else {
        e.add(layer_name(il, "attn_qkv"), {embd, conv}, "[n_embd, 2*key_dim + value_dim]");
        e.add(layer_name(il, "attn_gate"), {embd, value}, "[n_embd, value_dim]");
    }
    e.add(layer_name(il, "ssm_conv1d"), {hp.ssm_d_conv, conv}, "[d_conv, 2*key_dim + value_dim]");
    e.add(layer_name(il, "ssm_dt", "bias"), {heads}, "[n_v_heads]");
    e.add("blk." + std::to_string(il) + ".ssm_a", {heads}, "[n_v_heads]");
    if (hp.ssm_grouped_heads) {
        e.add(layer_name(il, "ssm_ba"), {embd, 2 * heads}, "[n_embd, 2*n_v_heads]");
    } else {
        e.add(layer_name(il, "ssm_beta"), {embd, heads}, "[n_embd, n_v_heads]");
        e.add(layer_name(il, "ssm_alpha"), {embd, heads}, "[n_embd, n_v_heads]");
    }
    e.add(layer_name(il, "ssm_norm"), {hp.ssm_d_state}, "[head_v_dim]");
    e.add(layer_name(il, "ssm_out"), {value, embd}, "[value_dim, n_embd]");
}

void expect_dense_ffn(ExpectedSet& e, const ModelHparams& hp, int il) {
    const uint64_t embd = hp.n_embd, ff = hp.n_ff_at(il);
    e.add(layer_name(il, "ffn_gate"), {embd, ff}, "[n_embd, n_ff]");
    e.add(layer_name(il, "ffn_up"), {embd, ff}, "[n_embd, n_ff]");
    e.add(layer_name(il, "ffn_down"), {ff, embd}, "[n_ff, n_embd]");
    e.add(layer_name(il, "ffn_gate", "bias"), {ff}, "[n_ff]", false);
    e.add(layer_name(il, "ffn_up", "bias"), {ff}, "[n_ff]", false);
    e.add(layer_name(il, "ffn_down", "bias"), {embd}, "[n_embd]", false);
}

void expect_moe_ffn(ExpectedSet& e, const GgufFile& f, const ModelHparams& hp,
                    const ArchTraits& traits, int il) {
    const uint64_t embd = hp.n_embd, ff = hp.n_ff_exp, n_exp = hp.n_expert;
    e.add(layer_name(il, "ffn_gate_inp"), {embd, n_exp}, "[n_embd, n_expert]");
    // The selection bias of sigmoid routers (DeepSeek-V3, GLM-4.5).
    e.add(layer_name(il, "exp_probs_b", "bias"), {n_exp}, "[n_expert]", traits.selection_bias);
    if (traits.expert_bias) {
        e.add(layer_name(il, "ffn_gate_inp", "bias"), {n_exp}, "[n_expert]");
        e.add(layer_name(il, "ffn_gate_exps", "bias"), {ff, n_exp}, "[n_ff_exp, n_expert]");
        e.add(layer_name(il, "ffn_up_exps", "bias"), {ff, n_exp}, "[n_ff_exp, n_expert]");
        e.add(layer_name(il, "ffn_down_exps", "bias"), {embd, n_exp}, "[n_embd, n_expert]");
    }
    // Experts are either fused into one 3-D tensor per projection, or (older Mixtral files) one
    // 2-D tensor per expert: blk.N.ffn_gate.E.weight.
    const bool split = !f.find_tensor(layer_name(il, "ffn_gate_exps")) &&
                       f.find_tensor(layer_name(il, "ffn_gate.0"));
    if (split) {
        for (uint64_t x = 0; x < n_exp; ++x) {
            const std::string ex = "." + std::to_string(x);
            e.add(layer_name(il, "ffn_gate" + ex), {embd, ff}, "[n_embd, n_ff_exp]");
            e.add(layer_name(il, "ffn_up" + ex), {embd, ff}, "[n_embd, n_ff_exp]");
            e.add(layer_name(il, "ffn_down" + ex), {ff, embd}, "[n_ff_exp, n_embd]");
        }
    } else {
        e.add(layer_name(il, "ffn_gate_exps"), {embd, ff, n_exp}, "[n_embd, n_ff_exp, n_expert]");
        e.add(layer_name(il, "ffn_up_exps"), {embd, ff, n_exp}, "[n_embd, n_ff_exp, n_expert]");
        e.add(layer_name(il, "ffn_down_exps"), {ff, embd, n_exp}, "[n_ff_exp, n_embd, n_expert]");
    }
    if (hp.n_expert_shared > 0) {
        const uint64_t sh = hp.n_ff_shexp;
        if (traits.shared_expert_gate) {
            e.add(layer_name(il, "ffn_gate_inp_shexp"), {embd}, "[n_embd]");
        }
        e.add(layer_name(il, "ffn_gate_shexp"), {embd, sh}, "[n_embd, n_ff_shexp]");
        e.add(layer_name(il, "ffn_up_shexp"), {embd, sh}, "[n_embd, n_ff_shexp]");
        e.add(layer_name(il, "ffn_down_shexp"), {sh, embd}, "[n_ff_shexp, n_embd]");
    }
}

// A multi-token-prediction block (stored after the trunk; never run): a full-attention layer with
// its FFN, plus the projection of [embedding-norm; hidden-norm] back to n_embd and, optionally,
// its own embedding, head and head norm.
void expect_nextn_block(ExpectedSet& e, const GgufFile& f, const ModelHparams& hp,
                        const ArchTraits& traits, int il) {
    const uint64_t embd = hp.n_embd, vocab = hp.n_vocab;
    expect_attention(e, hp, traits, il);
    e.add(layer_name(il, traits.ffn_norm_is_post_attention ? "post_attention_norm" : "ffn_norm"),
          {embd}, "[n_embd]");
    if (hp.is_moe()) {
        expect_moe_ffn(e, f, hp, traits, il);
    } else {
        expect_dense_ffn(e, hp, il);
    }
    e.add(layer_name(il, "nextn.eh_proj"), {2 * embd, embd}, "[2*n_embd, n_embd]");
    e.add(layer_name(il, "nextn.enorm"), {embd}, "[n_embd]");
    e.add(layer_name(il, "nextn.hnorm"), {embd}, "[n_embd]");
    e.add(layer_name(il, "nextn.embed_tokens"), {embd, vocab}, "[n_embd, n_vocab]", false);
    e.add(layer_name(il, "nextn.shared_head_head"), {embd, vocab}, "[n_embd, n_vocab]", false);
    e.add(layer_name(il, "nextn.shared_head_norm"), {embd}, "[n_embd]", false);
}

void expect_all(ExpectedSet& e, const GgufFile& f, const ModelHparams& hp,
                const ArchTraits& traits) {
    const uint64_t embd = hp.n_embd, vocab = hp.n_vocab;
    e.add("token_embd.weight", {embd, vocab}, "[n_embd, n_vocab]");
    e.add("output_norm.weight", {embd}, "[n_embd]");
    // absent when tied, where the family allows it
    e.add("output.weight", {embd, vocab}, "[n_embd, n_vocab]", traits.untied_output);
    e.add("rope_freqs.weight", {hp.n_rot / 2}, "[n_rot/2]", false);  // llama3 frequency factors
    for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
        if (hp.is_recurrent(uint32_t(il))) {
            expect_delta_net(e, hp, il);
        } else if (hp.is_mla()) {
            expect_mla_attention(e, hp, il);
        } else {
            expect_attention(e, hp, traits, il);
        }
        e.add(
            layer_name(il, traits.ffn_norm_is_post_attention ? "post_attention_norm" : "ffn_norm"),
            {embd}, "[n_embd]");
        if (hp.is_moe() && il >= static_cast<int>(hp.n_leading_dense)) {
            expect_moe_ffn(e, f, hp, traits, il);
        } else {
            expect_dense_ffn(e, hp, il);
        }
    }
    for (uint32_t k = 0; k < hp.n_layer_nextn; ++k) {
        expect_nextn_block(e, f, hp, traits, static_cast<int>(hp.n_layer + k));
    }
}

}  // namespace

TensorCheck check_tensors(const GgufFile& f, const ModelHparams& hp) {
    TensorCheck out;
    if (f.tensors.empty()) return out;
    const ArchTraits* traits = find_arch_traits(hp.arch);
    if (!traits) {
        out.errors.push_back(f.path + ": architecture '" + hp.arch + "' is not supported");
        return out;
    }
    ExpectedSet expected(f, hp, out);
    expect_all(expected, f, hp, *traits);
    for (size_t i = 0; i < f.tensors.size(); ++i) {
        if (expected.seen(i)) continue;
        const TensorInfo& t = f.tensors[i];
        const TensorName n = classify_tensor_name(t.name);
        const uint32_t n_layer_all = hp.n_layer + hp.n_layer_nextn;
        if (n.layer >= static_cast<int>(n_layer_all)) {
            out.errors.push_back(f.path + ": tensor " + t.name + " belongs to layer " +
                                 std::to_string(n.layer) + " but the model has only " +
                                 std::to_string(n_layer_all) + " layers (" + hp.arch +
                                 ".block_count)");
        } else {
            out.warnings.push_back(f.path + ": tensor " + t.name + " is not part of a " + hp.arch +
                                   " model and is ignored");
        }
    }
    return out;
}

}  // namespace strata
