// An independent reference forward pass for the engine tests: the published model definitions
// written as plainly as possible, to check the engine's families against something that shares
// none of its code paths.
//
// Weights are read straight from the GGUF file and dequantized with quant::dequantize_row;
// hyper-parameters come from the file's metadata keys with the family's defaults written down
// here, not from strata's hparams loader. Everything is computed in double with plain loops and
// no KV cache: every token's attention is recomputed over the whole causal prefix.
//
// Families (llama, qwen2, qwen3, qwen2moe, qwen3moe): RMSNorm pre-norm residual blocks; GQA
// attention with scale 1/sqrt(head_dim); RoPE with theta_i = pos * base^(-2i/n_rot) rotating
// adjacent pairs (llama) or pairs (i, i + n_rot/2) (qwen, NEOX); q/k/v biases when the file has
// them (qwen2, qwen2moe); per-head RMSNorm of q and k before RoPE (qwen3, qwen3moe); SwiGLU FFN;
// MoE: softmax over the router logits, top-k, renormalised when the family says so (Mixtral and
// Qwen3-MoE yes, Qwen2-MoE no), weighted sum of the experts; Qwen2-MoE's shared expert scaled
// by sigmoid(ffn_gate_inp_shexp . x); output_norm then the LM head (token_embd when tied).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace strata::test {

struct ReferenceOptions {
    // Round q, k, v and the softmax weights to F16 where the engine's default KV cache does (its
    // keys and values are F16, and its attention products convert q and the weights to F16).
    // Off: exact arithmetic. On: the engine's results up to float summation order.
    bool f16_attention = false;
};

// What the reference saw, for tolerances and diagnostics.
struct ReferenceTrace {
    // max over layers, heads and (query, key) pairs of scale * |q| * |k|: how strongly rounding
    // q and k can move the attention scores (see engine_reference_forward_test.cpp).
    double max_score_sensitivity = 0;
    // Smallest gap, over tokens and MoE layers, between the router logits of the last chosen
    // expert and the best expert left out: a near-tie could route the engine differently.
    double min_router_gap = 1e300;
};

class ReferenceModel {
  public:
    // Reads the metadata and tensor table; tensors are read on first use.
    explicit ReferenceModel(const std::string& path);

    const std::string& arch() const { return arch_; }
    uint32_t n_vocab() const { return n_vocab_; }
    uint32_t n_expert() const { return n_expert_; }
    bool norm_topk_prob() const { return norm_topk_; }

    // Logits of every position: n_vocab doubles per token, row after row.
    std::vector<double> forward(const std::vector<int32_t>& tokens, const ReferenceOptions& opt,
                                ReferenceTrace* trace = nullptr);

  private:
    const std::vector<float>& tensor(const std::string& name);
    bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

    GgufFile file_;
    std::string arch_;
    uint32_t n_vocab_ = 0, n_embd_ = 0, n_layer_ = 0, n_head_ = 0, n_head_kv_ = 0;
    uint32_t head_dim_ = 0, n_rot_ = 0, n_expert_ = 0, n_used_ = 0;
    double eps_ = 1e-5, rope_base_ = 10000.0;
    bool neox_ = false, norm_topk_ = false;
    std::map<std::string, std::vector<float>> cache_;
};

}  // namespace strata::test
