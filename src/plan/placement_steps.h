// The steps of make_plan that the CPU's placements (plan.cpp: resident, ffn-stream,
// expert-stream) and the GPU's (gpu_placement.cpp: resident on the GPU, or split with the CPU,
// whose CPU part streams as the CPU's modes do) both take: what they work from, where tensors
// go, the ffn-stream sizing and the expert cache's figures. Internal to plan/.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/model_info.h"
#include "model/streamable.h"
#include "plan/plan.h"
#include "plan/plan_layers.h"
#include "plan/tier_rates.h"

namespace strata::plan_detail {

// What every placement step works from.
struct Inputs {
    const ModelInfo& model;
    const ModelHparams& hp;
    const PlanOptions& options;
    TierRate ram, gpu;
    DiskRatePick disk;
    uint64_t kv_bytes = 0;
    uint32_t n_ctx = 0;
    // Held whatever is placed: the engine's activations, I/O buffers, the process, slack.
    MemoryPlan overhead{};
    uint64_t fixed() const { return kv_bytes + overhead_bytes(); }
    uint64_t overhead_bytes() const {
        return overhead.activations + overhead.io_buffers + overhead.baseline + overhead.slack;
    }
};

// Slot count and lookahead when either is forced; nullopt when both are left to the plan.
struct Sizes {
    uint32_t slots = 0, lookahead = 0;
};
std::optional<Sizes> forced_sizes(const PlanOptions& o);

// plan.layers' byte counts from `mb`, and the use of each layer's streamed part.
void set_layer_rows(Plan& plan, const ModelBytes& mb, const std::vector<TensorUse>& uses);

// Tier and use of every tensor from its layer's use of the streamed group; tensors read by rows
// stream always. Tensors a split put in GPU memory stay there.
void place_tensors(Plan& plan, const Inputs& in, PlanMode group, const std::vector<TensorUse>& uses,
                   const DeepStreaming& deep = {});

// How ffn-stream holds the streamable part of the layers in `mb` (layers with stream 0 take no
// part) in RAM: which layers stay cached, the slots and lookahead the rest stream through.
struct FfnSizing {
    std::vector<bool> cached;
    plan_detail::GapFigures gaps;
    Sizes sizes;
};

// The sizing for slots of `slot` bytes once `fixed` bytes are held (plan.h, the lookahead and
// slot rules), within plan.memory.budget; notes what limits it. PRECONDITION: fixed plus the
// smallest slot count fits the budget.
FfnSizing size_ffn_stream(Plan& plan, const Inputs& in, const ModelBytes& mb, uint64_t slot,
                          uint64_t fixed, const std::optional<Sizes>& forced);

// plan.stream from a sizing; the use of each layer's streamable part.
std::vector<TensorUse> apply_ffn_sizing(Plan& plan, const Inputs& in, const ModelBytes& mb,
                                        uint64_t slot, const FfnSizing& f);

// True when the options carry earlier runs' counts of this model's expert choices.
bool has_expert_counts(const Inputs& in);

// The share of the choices among the experts of the layers `in_layer` names that the experts
// ranked first .. first + count - 1 by how often earlier runs chose them (kExpertCountPrior
// added to each) take: what a cache of `count` entries holding them serves, behind one of
// `first` that holds the ones before. Without counts, every expert as likely: count over the
// experts.
double chosen_share(const Inputs& in, const std::vector<bool>& in_layer, uint64_t first,
                    uint64_t count);

// plan.expert_cache and plan.stream of expert-stream: `experts` routed experts that stream, of
// `unit` bytes each, through `sizes.slots` slots of `slot` bytes, the cache taking `room` bytes
// and serving `hit_rate` of the choices that reach it (chosen_share).
void set_expert_stream(Plan& plan, const Inputs& in, uint64_t experts, uint64_t unit,
                       const Sizes& sizes, uint64_t slot, uint64_t room, double hit_rate);

}  // namespace strata::plan_detail
