// The plan as JSON: what `strata inspect --json` prints under "plan", every field of the Plan
// value, so scripts and benchmarks can read the plan strata would run with. plan_from_json reads
// it back (tests check the round trip; bench tools read saved plans).
//
// {
//   "mode": "resident" | "ffn-stream" | "expert-stream", "mode_forced": bool, "reason": string,
//   "budgets": {"ram", "gpu_mem", "ram_from_flag", "gpu_from_flag", "warnings": [string]},
//   "n_ctx": int, "n_seq": int (KV caches of n_ctx), "kv_type": "f16" | "q8_0", "batch": int,
//   "threads": int, "memory": {"resident_weights", "cached_weights", "expert_cache", "slots",
//   "kv_cache",
//              "activations", "io_buffers", "baseline", "baseline_measured": bool, "slack",
//              "total", "budget"},                          bytes of RAM; total <= budget
//   "stream": {"slots", "slot_bytes", "lookahead", "block_size", "slots_forced",
//              "lookahead_forced", "streamed_layers", "cached_layers", "layer_read_seconds",
//              "longest_gap_seconds"},
//   "expert_cache": {"expert_bytes", "experts", "capacity", "experts_per_slot", "hit_rate"},
//   "gpu_device", "gpu_layers", "cpu_expert_layers", "gpu_note",
//   "gpu_memory": {"weights", "kv_cache", "activations", "prompt_staging", "expert_cache",
//                  "expert_entries", "expert_entry_bytes", "expert_hit_rate", "total", "budget"},
//   "tiers": [{"tier": "gpu" | "ram" | "disk", "stored_bytes", "bytes_per_token", "bandwidth",
//              "bandwidth_source", "seconds_per_token"}],   in that order
//   "tokens_per_second": number,                        the speed limit
//   "bound": "gpu" | "ram" | "disk",                     the tier with the largest time
//   "layers": [{"layer", "resident_bytes", "ffn_bytes", "ffn_use", "bytes_per_token"}],
//   "tensors": [{"name", "tier", "use"}],                one per tensor, in file order
//   "notes": [string],
//   "execution": the table the engine runs (execution_table.h: execution_table_json),
//   "cpu_kernels": the CPU kernels per weight type and phase (backend/kernel_choice.h:
//                  kernel_table_json)
// }
// "use" and "ffn_use" are "resident", "cached" or "streamed" (TensorUse).
#pragma once

#include <nlohmann/json.hpp>

#include "model/model_info.h"
#include "plan/plan.h"
#include "util/result.h"

namespace strata {

// `model` gives the tensor names; it must be the model the plan was made for.
nlohmann::json plan_json(const Plan& plan, const ModelInfo& model);
Result<Plan> plan_from_json(const nlohmann::json& j);

}  // namespace strata
