// Every tensor a model of a given architecture and shape has: name, role, layer and ggml shape,
// in the order llama.cpp's converters (gguf-py) write them. Used to write synthetic models and to
// check that a file has what its architecture needs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/architecture.h"
#include "model/hparams.h"
#include "model/tensor_role.h"

namespace strata {

// The shape with every optional dimension filled in from the defaults llama.cpp applies when a
// key is absent: n_head_kv = n_head, head_dim_k = n_embd / n_head, head_dim_v = head_dim_k,
// n_rot = head_dim_k, the expert widths (see ArchTraits) and the family's structural flags.
ModelHparams with_layout_defaults(ModelHparams hp);

struct TensorSpec {
    std::string name;  // "blk.3.attn_q.weight"
    TensorRole role = TensorRole::Other;
    int layer = -1;  // -1 outside the blocks
    bool is_bias = false;
    std::vector<uint64_t> shape;  // ggml order: shape[0] is the row length

    uint64_t n_elements() const;
    uint64_t row_length() const { return shape.empty() ? 0 : shape[0]; }
    uint64_t n_rows() const { return row_length() == 0 ? 0 : n_elements() / row_length(); }
};

// The tensors of a model, in file order:
//   token_embd, output_norm, output (absent when tied_output), then per layer
//   attn_norm, attn_q, attn_k, attn_v, [attn_{q,k,v}.bias], [attn_q_norm, attn_k_norm],
//   attn_output, ffn_norm, then either ffn_gate, ffn_up, ffn_down (dense) or
//   ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps
//   [, ffn_gate_inp_shexp, ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp].
// This is the order of the gguf-py-written files in the golden data. Defaults are applied with
// with_layout_defaults(); an architecture without traits gets the llama baseline plus whatever the
// flags in `hp` ask for. The shape must be valid (positive sizes); callers validate user input.
std::vector<TensorSpec> tensor_layout(const ModelHparams& hp);

// Number of parameters (elements) over all tensors of a layout.
uint64_t layout_parameter_count(const std::vector<TensorSpec>& layout);

}  // namespace strata
