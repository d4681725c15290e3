// The JSON description of a model file: what `strata inspect --json` prints and what the HTTP
// server returns. One object; later versions add keys (e.g. a "plan" object) and never change the
// meaning of existing ones. Sizes are in bytes, counts are integers.
//
// {
//   "file": {"path", "version", "size", "alignment", "data_offset", "tensor_count",
//            "metadata_count"},
//   "architecture": "llama" | null,          general.architecture
//   "name": string | null,                   general.name
//   "runnable": bool,                        false exactly when "problems" is not empty
//   "problems": [string],                    what stops the file from running
//   "warnings": [string],
//   "file_type": {"id": 15, "name": "Q4_K_M"} | null,   general.file_type
//   "tokenizer": {"model": string | null, "pre": string | null, "tokens": int | null},
//   "hparams": {...} | null,                 ModelHparams field by field (see hparams_json);
//                                            null when the architecture is unsupported or the
//                                            metadata is incomplete
//   "totals": TOTALS,                        all tensors
//   "tensor_types": {"Q4_K": TOTALS, ...},   by tensor type
//   "by_role": {"attn_q": TOTALS, ...},      by tensor role (tensor_role_name)
//   "by_layer": [{"layer": 0, ...TOTALS}, ...],   layers 0..n_layer-1 in order, plus any other
//                                            layer a tensor names
//   "non_layer": TOTALS,                     token_embd, output, output_norm, rope_freqs
//   "metadata": {KEY: {"type": "u32", "value": 2048}, ...}   every key. Arrays are
//            {"type": "array", "element_type": "string", "length": 151646, "value": [...]};
//            "value" is left out of arrays longer than kJsonArrayLimit unless full_metadata
//   "tensors": [TENSOR, ...]                 only with ModelJsonOptions::tensors
//   "plan": PLAN | null,                     added by `strata inspect` (plan/plan_json.h); null
//   "plan_note": string                      with a note saying why when there is no plan
// }
// TOTALS = {"tensors", "params", "bytes", "expert_bytes", "bytes_per_token"}; bytes_per_token is
//          the expected bytes read per generated token (ModelTensor::reads_per_token), without
//          the KV cache.
// TENSOR = {"name", "role", "layer": int | null, "expert": int | null (old per-expert layout),
//           "bias": bool, "type", "shape": [ggml order], "params", "bytes", "offset" (absolute),
//           "reads_per_token", "expert_slices": [{"expert", "offset", "bytes"}] (fused expert
//           tensors only)}
//
// Metadata strings may hold invalid UTF-8: dump with error_handler_t::replace.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "model/model_info.h"

namespace strata {

inline constexpr size_t kJsonArrayLimit = 128;

struct ModelJsonOptions {
    bool tensors = false;        // add the "tensors" array
    bool full_metadata = false;  // give every metadata array in full (a vocabulary: megabytes)
};

nlohmann::json model_info_json(const ModelInfo& info, const ModelJsonOptions& options = {});
nlohmann::json hparams_json(const ModelHparams& hp);

}  // namespace strata
