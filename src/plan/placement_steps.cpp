// The steps both placements share (placement_steps.h).
#include "plan/placement_steps.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace strata::plan_detail {

std::optional<Sizes> forced_sizes(const PlanOptions& o) {
    if (o.slots && o.lookahead) return Sizes{*o.slots, *o.lookahead};
    if (o.slots) return Sizes{*o.slots, *o.slots - 1};
    if (o.lookahead) return Sizes{*o.lookahead + 1, *o.lookahead};
    return std::nullopt;
}

void set_layer_rows(Plan& plan, const ModelBytes& mb, const std::vector<TensorUse>& uses) {
    for (size_t l = 0; l < mb.layers.size(); ++l) {
        LayerPlan& row = plan.layers[l];
        row.resident_bytes = mb.layers[l].resident;
        row.ffn_bytes = mb.layers[l].stream;
        row.ffn_use = uses[l];
    }
}

void place_tensors(Plan& plan, const Inputs& in, PlanMode group, const std::vector<TensorUse>& uses,
                   const DeepStreaming& deep) {
    for (size_t i = 0; i < in.model.tensors.size(); ++i) {
        const ModelTensor& t = in.model.tensors[i];
        TensorPlacement& p = plan.tensors[i];
        if (p.tier == Tier::Gpu) continue;
        const StreamUnit unit =
            stream_unit(t, plan_detail::stream_set(group), deep, in.hp.tied_output);
        if (unit == StreamUnit::Rows) {
            p = {Tier::Disk, TensorUse::Streamed, unit};
        } else if (unit != StreamUnit::None && static_cast<size_t>(t.layer) < uses.size()) {
            p.use = uses[t.layer];
            p.tier = p.use == TensorUse::Streamed ? Tier::Disk : Tier::Ram;
            if (p.use == TensorUse::Streamed) p.unit = unit;
        }
    }
}

FfnSizing size_ffn_stream(Plan& plan, const Inputs& in, const ModelBytes& mb, uint64_t slot,
                          uint64_t fixed, const std::optional<Sizes>& forced) {
    const uint64_t budget = plan.memory.budget;
    FfnSizing f;
    if (mb.stream() <= budget - fixed) {
        // Only with a forced ffn-stream: every FFN layer fits, nothing is streamed.
        f.cached = plan_detail::pick_cached_layers(mb, budget - fixed);
    } else if (forced) {
        f.sizes = *forced;
        f.cached = plan_detail::pick_cached_layers(mb, budget - fixed - f.sizes.slots * slot);
        f.gaps = plan_detail::compute_gaps(mb, f.cached, in.ram.bandwidth, in.disk.rate.bandwidth);
    } else {
        // The smallest lookahead that covers the longest compute gap; each step costs a slot.
        for (uint32_t l = 1; l <= kMaxLookahead; ++l) {
            if (fixed + (l + 1) * slot > budget) {
                plan.notes.push_back("the lookahead is limited to " + std::to_string(l - 1) +
                                     " by the RAM budget");
                break;
            }
            f.sizes = {l + 1, l};
            f.cached = plan_detail::pick_cached_layers(mb, budget - fixed - f.sizes.slots * slot);
            f.gaps =
                plan_detail::compute_gaps(mb, f.cached, in.ram.bandwidth, in.disk.rate.bandwidth);
            if (f.gaps.lookahead_needed <= l) break;
            if (l == kMaxLookahead) {
                plan.notes.push_back("the longest compute gap would need a lookahead of " +
                                     std::to_string(f.gaps.lookahead_needed) + "; capped at " +
                                     std::to_string(kMaxLookahead));
            }
        }
    }
    return f;
}

std::vector<TensorUse> apply_ffn_sizing(Plan& plan, const Inputs& in, const ModelBytes& mb,
                                        uint64_t slot, const FfnSizing& f) {
    std::vector<TensorUse> uses(mb.layers.size(), TensorUse::Resident);
    StreamPlan& s = plan.stream;
    for (size_t l = 0; l < mb.layers.size(); ++l) {
        if (mb.layers[l].stream == 0) continue;
        uses[l] = f.cached[l] ? TensorUse::Cached : TensorUse::Streamed;
        (f.cached[l] ? s.cached_layers : s.streamed_layers) += 1;
    }
    if (s.streamed_layers > 0) {
        s.slots = f.sizes.slots;
        s.lookahead = f.sizes.lookahead;
        s.slot_bytes = slot;
        s.slots_forced = in.options.slots.has_value();
        s.lookahead_forced = in.options.lookahead.has_value();
        s.layer_read_seconds = f.gaps.layer_read_seconds;
        s.longest_gap_seconds = f.gaps.longest_gap_seconds;
    }
    return uses;
}

bool has_expert_counts(const Inputs& in) {
    const std::vector<uint32_t>& c = in.options.expert_counts;
    return in.hp.is_moe() && c.size() == size_t(in.hp.n_layer) * in.hp.n_expert &&
           std::any_of(c.begin(), c.end(), [](uint32_t x) { return x > 0; });
}

double chosen_share(const Inputs& in, const std::vector<bool>& in_layer, uint64_t first,
                    uint64_t count) {
    std::vector<uint32_t> counts;
    uint64_t experts = 0;
    const bool measured = has_expert_counts(in);
    for (uint32_t l = 0; l < in.hp.n_layer; ++l) {
        if (!in_layer[l]) continue;
        experts += in.hp.n_expert;
        if (!measured) continue;
        const auto* c = &in.options.expert_counts[size_t(l) * in.hp.n_expert];
        for (uint32_t e = 0; e < in.hp.n_expert; ++e) counts.push_back(c[e] + kExpertCountPrior);
    }
    if (experts == 0 || first >= experts) return 0;
    count = std::min(count, experts - first);
    if (!measured) return double(count) / double(experts);
    std::sort(counts.begin(), counts.end(), std::greater<>());
    double total = 0, taken = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        total += counts[i];
        if (i >= first && i < first + count) taken += counts[i];
    }
    return total > 0 ? taken / total : double(count) / double(experts);
}

void set_expert_stream(Plan& plan, const Inputs& in, uint64_t experts, uint64_t unit,
                       const Sizes& sizes, uint64_t slot, uint64_t room, double hit_rate) {
    ExpertCachePlan& c = plan.expert_cache;
    c.experts = experts;
    c.expert_bytes = unit;
    c.experts_per_slot = in.hp.n_expert_used;
    c.capacity = unit ? std::min(c.experts, room / unit) : 0;
    c.hit_rate = hit_rate;
    StreamPlan& s = plan.stream;
    s.slots = sizes.slots;
    s.lookahead = sizes.lookahead;
    s.slot_bytes = slot;
    s.slots_forced = in.options.slots.has_value();
    s.lookahead_forced = in.options.lookahead.has_value();
}

}  // namespace strata::plan_detail
