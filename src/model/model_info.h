// A model file described: the GGUF as read, its hyper-parameters when the architecture is one
// strata runs, and for every tensor its role, layer and how much of it one generated token reads,
// with byte totals by role, layer and type and the byte range of every expert.
//
// Two questions are kept apart. describe_model() answers "what is in this file" and never fails:
// it describes unsupported architectures and vocabulary-only files as far as they go, and lists
// what stops them from running in `problems`. load_model_info() answers "is this a model strata
// can run": it fails with those problems as an error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "model/tensor_role.h"
#include "util/result.h"

namespace strata {

// One expert's part of a fused expert tensor, as an absolute byte range in the file.
struct ExpertSlice {
    uint32_t expert = 0;
    uint64_t offset = 0;  // absolute file offset of the first byte
    uint64_t n_bytes = 0;
};

struct ModelTensor {
    size_t index = 0;  // position in GgufFile::tensors
    TensorRole role = TensorRole::Other;
    int layer = -1;   // -1 outside the blocks
    int expert = -1;  // old per-expert layout (blk.N.ffn_gate.E.weight): the expert it holds
    bool is_bias = false;

    // Expected fraction of the tensor's bytes read to generate one token:
    //  - 1 for dense weights, norms, biases, the router and shared experts;
    //  - n_expert_used / n_expert for routed-expert weights (each expert is picked with that
    //    probability on average; fused tensors are read in that fraction of their slices);
    //  - 1 / n_vocab for token_embd when the output is untied (one embedding row per token),
    //    1 when it is tied (it is also the LM head, read in full);
    // KV-cache reads depend on the context length and are not counted here.
    double reads_per_token = 1.0;

    // Fused expert tensors ([.., .., n_expert]): each expert is a contiguous slice along the last
    // dimension, expert e at offset + e * expert_slice_bytes. 0 for other tensors.
    uint32_t n_expert_slices = 0;
    uint64_t expert_slice_bytes = 0;

    // The routed experts' matrices. Their biases (gpt-oss: one row per expert) are not: they are
    // small, stay with their layer's tensors and are read whichever experts are chosen.
    bool is_routed_expert() const { return is_expert_role(role) && !is_bias; }
};

// Counts for a group of tensors (a role, a layer, a type, the whole file).
struct ByteTotals {
    uint64_t tensors = 0;
    uint64_t params = 0;  // elements
    uint64_t bytes = 0;
    uint64_t expert_bytes = 0;     // of which routed-expert weights
    double bytes_per_token = 0.0;  // sum of bytes * reads_per_token

    void add(uint64_t n_params, uint64_t n_bytes, double reads_per_token, bool expert);
};

struct ModelInfo {
    GgufFile file;
    std::string arch;                     // general.architecture ("" when the key is missing)
    std::optional<ModelHparams> hparams;  // absent when unsupported or the metadata is incomplete
    std::vector<std::string> problems;    // why the file cannot be run; empty when it can
    std::vector<std::string> warnings;    // worth knowing, but the file can still be run

    std::vector<ModelTensor> tensors;  // parallel to file.tensors

    // Tensors of the multi-token-prediction blocks (hparams->n_layer_nextn) after the trunk:
    // validated, then taken out of file.tensors so that no plan, store or engine counts or reads
    // them. Their bytes stay in the file, unread.
    std::vector<TensorInfo> set_aside;
    ByteTotals set_aside_totals;

    ByteTotals totals;
    ByteTotals non_layer;  // tensors outside the blocks: token_embd, output, ...
    // Layers 0..n_layer-1 and any other layer a tensor names (kept sparse: a broken file may
    // name blk.2000000000).
    std::map<int, ByteTotals> by_layer;
    std::map<TensorRole, ByteTotals> by_role;
    std::map<TensorType, ByteTotals> by_type;

    bool runnable() const { return problems.empty(); }
    bool vocab_only() const { return file.tensors.empty(); }
    const TensorInfo& info(const ModelTensor& t) const { return file.tensors[t.index]; }
    // general.file_type, when the file records it.
    std::optional<uint32_t> file_type() const;
};

// Never fails; see the top of this file.
ModelInfo describe_model(GgufFile file);
// Fails when describe_model() finds problems; the error holds the first few.
Result<ModelInfo> load_model_info(GgufFile file);

// The slices of a fused expert tensor, in expert order; they tile the tensor exactly.
// Empty for tensors that are not fused expert tensors.
std::vector<ExpertSlice> expert_slices(const ModelInfo& info, const ModelTensor& t);

}  // namespace strata
