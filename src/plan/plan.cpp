// make_plan: the mode, the place of every tensor, the streaming sizes and the speed limit. The
// rules are in plan.h; the per-layer arithmetic in plan_layers.h.
#include "plan/plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "model/activation_memory.h"
#include "model/kv_layout.h"
#include "plan/plan_layers.h"
#include "plan/tier_rates.h"
#include "util/thread_pool.h"
#include "util/units.h"

namespace strata {

using plan_detail::GapFigures;
using plan_detail::ModelBytes;

std::string_view plan_mode_name(PlanMode m) {
    switch (m) {
        case PlanMode::Resident:
            return "resident";
        case PlanMode::FfnStream:
            return "ffn-stream";
        case PlanMode::ExpertStream:
            return "expert-stream";
    }
    return "?";
}

Result<PlanMode> parse_plan_mode(std::string_view name) {
    for (PlanMode m : {PlanMode::Resident, PlanMode::FfnStream, PlanMode::ExpertStream}) {
        if (name == plan_mode_name(m)) return m;
    }
    return err("unknown mode '", std::string(name),
               "': expected resident, ffn-stream or expert-stream");
}

std::string_view gpu_split_name(GpuSplit s) {
    return s == GpuSplit::Layers ? "layers" : "experts";
}

Result<GpuSplit> parse_gpu_split(std::string_view name) {
    for (GpuSplit s : {GpuSplit::Layers, GpuSplit::Experts}) {
        if (name == gpu_split_name(s)) return s;
    }
    return err("unknown split '", std::string(name), "': expected layers or experts");
}

std::string_view tier_name(Tier t) {
    switch (t) {
        case Tier::Gpu:
            return "gpu";
        case Tier::Ram:
            return "ram";
        case Tier::Disk:
            return "disk";
    }
    return "?";
}

std::string_view tensor_use_name(TensorUse u) {
    switch (u) {
        case TensorUse::Resident:
            return "resident";
        case TensorUse::Cached:
            return "cached";
        case TensorUse::Streamed:
            return "streamed";
    }
    return "?";
}

namespace {

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

std::string kv_phrase(const Inputs& in) {
    const std::string seqs =
        in.options.n_seq > 1 ? std::to_string(in.options.n_seq) + " sequences of " : std::string();
    return "the KV cache (" + format_bytes(in.kv_bytes) + " for " + seqs +
           std::to_string(in.n_ctx) + " tokens)";
}

// The lines besides weights and KV cache, in words, for the errors that name a minimum.
std::string overhead_phrase(const Inputs& in) {
    const MemoryPlan& o = in.overhead;
    return "the engine's activations (" + format_bytes(o.activations) + "), the process (" +
           format_bytes(o.baseline) + (o.baseline_measured ? ", measured" : ", estimated") +
           "), I/O buffers (" + format_bytes(o.io_buffers) + ") and slack (" +
           format_bytes(kSlackBytes) + " and 1/" + std::to_string(kSlackPerBudget) +
           " of the budget)";
}

// The lines of MemoryPlan that do not depend on the placement (plan.h says what each holds).
MemoryPlan overhead_lines(const ModelInfo& model, const ModelHparams& hp, const PlanOptions& o,
                          uint32_t n_ctx, uint64_t budget, int threads) {
    MemoryPlan m;
    ActivationShape shape;
    shape.max_batch = o.max_batch;
    shape.n_ctx = n_ctx;
    shape.kv_type = o.kv_type;
    shape.threads = threads;
    shape.logit_rows = o.logit_rows;
    m.activations = activation_memory(model, shape).total();
    if (o.embeddings) m.activations += uint64_t(n_ctx) * hp.n_embd * sizeof(float);
    m.io_buffers = kReaderTableBytes;
    if (hp.is_moe()) {
        // The expert store's maps per (layer, expert): where it is cached, its use count and
        // frequency, co-activation counts with every expert of the next layer; per cache entry
        // its state (at most one entry per expert).
        const uint64_t keys = uint64_t(hp.n_layer) * hp.n_expert;
        m.io_buffers += keys * (8 + 8 + 4 + 2 * uint64_t(hp.n_expert)) + keys * 256;
    }
    m.baseline_measured = o.baseline.has_value();
    m.baseline = o.baseline.value_or(kEstimatedProcessBytes +
                                     uint64_t(hp.n_vocab) * kEstimatedBytesPerVocabToken);
    m.slack = kSlackBytes + budget / kSlackPerBudget;
    return m;
}

// The smallest budget that holds `need` bytes and the slack that budget implies (kSlackBytes and
// 1/kSlackPerBudget of it): the minimum an error names, so that giving it is enough.
uint64_t smallest_budget(uint64_t need) {
    const auto holds = [need](uint64_t b) { return b >= need + kSlackBytes + b / kSlackPerBudget; };
    uint64_t b = (need + kSlackBytes) / (kSlackPerBudget - 1) * kSlackPerBudget;
    while (!holds(b)) ++b;
    while (b > 0 && holds(b - 1)) --b;
    return b;
}

Error too_small(const Plan& plan, const std::string& parts, uint64_t minimum) {
    // The flag suggested is rounded up to whole MiB: a rounded "1.44 GiB" may be just too small.
    const uint64_t mib = (minimum + (1u << 20) - 1) >> 20;
    return err("the RAM budget of ", format_bytes(plan.memory.budget),
               " is too small for this model: ", parts, " need at least ", format_bytes(minimum),
               "; give --ram ", std::to_string(mib), "M or more, or a shorter --ctx");
}

Result<void> check_overrides(const PlanOptions& o) {
    if (o.slots && *o.slots < kMinSlots) {
        return err("--slots ", std::to_string(*o.slots), ": at least ", std::to_string(kMinSlots),
                   " slots are needed (one being computed, one being read)");
    }
    if (o.lookahead && *o.lookahead < 1) return err("--lookahead must be at least 1");
    if (o.slots && o.lookahead && *o.slots < *o.lookahead + 1) {
        return err("--slots ", std::to_string(*o.slots), " cannot hold a lookahead of ",
                   std::to_string(*o.lookahead), " layers and the one being computed");
    }
    return {};
}

// Slot count and lookahead when either is forced; nullopt when both are left to the plan.
struct Sizes {
    uint32_t slots = 0, lookahead = 0;
};
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

// Tier and use of every tensor from its layer's use of the streamed group; tensors read by rows
// stream always. Tensors a split put in GPU memory stay there.
void place_tensors(Plan& plan, const Inputs& in, PlanMode group, const std::vector<TensorUse>& uses,
                   const DeepStreaming& deep = {}) {
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

// What deeper streaming a plan uses, in words, for its notes.
void note_deep_streaming(Plan& plan, const Inputs& in, const plan_detail::ModelBytes& mb) {
    const DeepStreaming& d = plan.deep;
    if (d.embedding_rows) {
        plan.notes.push_back(
            "the token-embedding table does not fit beside the rest: each batch reads the rows it "
            "looks up from disk");
    }
    if (d.head_rows) {
        plan.notes.push_back("the LM head does not fit either: it is read from disk in chunks of " +
                             format_bytes(kHeadChunkBytes) + " at every generated token");
    }
    if (d.head_rows && in.hp.tied_output) {
        plan.notes.push_back("the LM head is the token-embedding table (tied): lookups read rows");
    }
    if (d.whole_layers) {
        plan.notes.push_back(
            "attention and norms do not fit either: whole layers stream through the slots");
    }
    if (mb.rows_streamed > 0) {
        plan.notes.push_back(format_bytes(mb.rows_streamed) + " read by rows into " +
                             format_bytes(mb.row_buffers) + " of row buffers");
    }
}

Result<void> place_resident(Plan& plan, const Inputs& in) {
    const uint64_t need = in.model.totals.bytes + in.fixed();
    if (need > plan.memory.budget) {
        return err("the RAM budget of ", format_bytes(plan.memory.budget),
                   " is too small for resident mode: the weights (",
                   format_bytes(in.model.totals.bytes), "), ", kv_phrase(in), ", ",
                   overhead_phrase(in), " need ", format_bytes(need));
    }
    const ModelBytes mb =
        plan_detail::model_bytes(in.model, PlanMode::FfnStream, in.disk.block_size);
    set_layer_rows(plan, mb, std::vector<TensorUse>(mb.layers.size(), TensorUse::Resident));
    return {};
}

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

// plan.stream from a sizing; the use of each layer's streamable part.
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

Result<void> place_ffn_stream(Plan& plan, const Inputs& in) {
    const std::optional<Sizes> forced = forced_sizes(in.options);
    const uint32_t min_slots = forced ? forced->slots : kMinSlots;
    const uint64_t budget = plan.memory.budget;
    // The shallowest streaming whose minimum fits the budget. From FFN layers alone, each step
    // goes one deeper (the embedding table by rows, then the LM head by chunks, then whole
    // layers) and is kept only when it lowers the minimum: a table smaller than its row buffers
    // stays resident. Steps trade RAM for disk reads per token, so none is taken once one fits.
    struct Level {
        DeepStreaming deep;
        ModelBytes mb;
        uint64_t slot = 0, fixed = 0, minimum = 0;
    };
    const auto measure = [&](const DeepStreaming& d) {
        Level l{d, plan_detail::model_bytes(in.model, PlanMode::FfnStream, in.disk.block_size, d)};
        for (const auto& layer : l.mb.layers) l.slot = std::max(l.slot, layer.stream_widened);
        l.fixed = l.mb.resident() + l.mb.row_buffers + in.fixed();
        l.minimum = smallest_budget(l.fixed - in.overhead.slack + min_slots * l.slot);
        return l;
    };
    std::optional<Level> chosen;
    Level best = measure({});
    if (best.minimum <= budget) chosen = best;
    for (bool DeepStreaming::*step : {&DeepStreaming::embedding_rows, &DeepStreaming::head_rows,
                                      &DeepStreaming::whole_layers}) {
        if (chosen) break;
        DeepStreaming d = best.deep;
        d.*step = true;
        // A tied table is the head: it streams with the head's step.
        if (in.hp.tied_output && step == &DeepStreaming::embedding_rows) continue;
        Level l = measure(d);
        if (l.minimum >= best.minimum) continue;
        best = std::move(l);
        if (best.minimum <= budget) chosen = best;
    }
    if (!chosen) {
        const Level& l = best;  // the smallest minimum any depth reaches
        return too_small(
            plan,
            "the resident tensors (" + format_bytes(l.mb.resident()) + "), " + kv_phrase(in) +
                (l.mb.row_buffers ? ", row buffers (" + format_bytes(l.mb.row_buffers) + ")"
                                  : std::string()) +
                ", " + std::to_string(min_slots) +
                (l.deep.whole_layers ? " slots of a whole layer (" : " FFN slots (") +
                format_bytes(min_slots * l.slot) + "), " + overhead_phrase(in),
            l.minimum);
    }
    plan.deep = chosen->deep;
    const ModelBytes& mb = chosen->mb;
    const uint64_t slot = chosen->slot, fixed = chosen->fixed;
    plan.memory.row_buffers = mb.row_buffers;
    note_deep_streaming(plan, in, mb);
    if (plan.deep.whole_layers || plan.deep.head_rows || plan.deep.embedding_rows) {
        // choose_mode said what stays resident; deeper streaming keeps less.
        const size_t cut = plan.reason.find(": attention, norms");
        if (cut != std::string::npos) plan.reason.resize(cut);
        plan.reason += plan.deep.whole_layers
                           ? ": even attention does not fit, so whole layers stream, and the "
                             "embedding table and LM head are read by rows"
                           : ": the FFN weights stream and the embedding table (and LM head) are "
                             "read by rows";
    }

    const FfnSizing sizing = size_ffn_stream(plan, in, mb, slot, fixed, forced);
    const std::vector<TensorUse> uses = apply_ffn_sizing(plan, in, mb, slot, sizing);
    if (plan.stream.streamed_layers == 0) {
        plan.notes.push_back("every FFN layer fits in the budget: nothing is streamed");
    }
    set_layer_rows(plan, mb, uses);
    place_tensors(plan, in, PlanMode::FfnStream, uses, plan.deep);
    return {};
}

// True when the options carry earlier runs' counts of this model's expert choices.
bool has_expert_counts(const Inputs& in) {
    const std::vector<uint32_t>& c = in.options.expert_counts;
    return in.hp.is_moe() && c.size() == size_t(in.hp.n_layer) * in.hp.n_expert &&
           std::any_of(c.begin(), c.end(), [](uint32_t x) { return x > 0; });
}

// The share of the choices among the experts of the layers `in_layer` names that the experts
// ranked first .. first + count - 1 by how often earlier runs chose them (kExpertCountPrior
// added to each) take: what a cache of
// `count` entries holding them serves, behind one of `first` that holds the ones before. Without
// counts, every expert as likely: count over the experts.
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

// plan.expert_cache and plan.stream of expert-stream: `experts` routed experts that stream, of
// `unit` bytes each, through `sizes.slots` slots of `slot` bytes, the cache taking `room` bytes
// and serving `hit_rate` of the choices that reach it (chosen_share).
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

Result<void> place_expert_stream(Plan& plan, const Inputs& in) {
    const ModelBytes mb =
        plan_detail::model_bytes(in.model, PlanMode::ExpertStream, in.disk.block_size);
    const uint64_t unit = plan_detail::expert_unit_bytes(in.model, in.disk.block_size);
    const uint32_t per_slot = in.hp.n_expert_used;
    const uint64_t slot = per_slot * unit;
    const Sizes sizes = forced_sizes(in.options).value_or(Sizes{kMinSlots, 1});
    const uint64_t fixed = mb.resident() + in.fixed();
    const uint64_t minimum = smallest_budget(fixed - in.overhead.slack + sizes.slots * slot);
    if (minimum > plan.memory.budget) {
        return too_small(plan,
                         "the resident tensors (everything but the routed experts: " +
                             format_bytes(mb.resident()) + "), " + kv_phrase(in) + ", " +
                             std::to_string(sizes.slots) + " slots of " + std::to_string(per_slot) +
                             " experts (" + format_bytes(sizes.slots * slot) + "), " +
                             overhead_phrase(in),
                         minimum);
    }
    uint64_t experts = 0;
    std::vector<bool> streamed(in.hp.n_layer, false);
    for (size_t l = 0; l < mb.layers.size(); ++l) {
        streamed[l] = mb.layers[l].stream > 0;
        experts += streamed[l] ? in.hp.n_expert : 0;
    }
    const uint64_t room = plan.memory.budget - fixed - sizes.slots * slot;
    set_expert_stream(plan, in, experts, unit, sizes, slot, room,
                      chosen_share(in, streamed, 0, unit ? room / unit : 0));

    std::vector<TensorUse> uses(mb.layers.size(), TensorUse::Resident);
    for (size_t l = 0; l < mb.layers.size(); ++l) {
        if (mb.layers[l].stream > 0) uses[l] = TensorUse::Streamed;
    }
    set_layer_rows(plan, mb, uses);
    place_tensors(plan, in, PlanMode::ExpertStream, uses);
    return {};
}

// Tensors the host reads itself, kept in RAM in every GPU plan: rope_freqs becomes the rope
// configuration when the engine starts.
bool host_only(const ModelTensor& t) {
    return t.layer < 0 && t.role == TensorRole::RopeFreqs;
}

// Outside the layers, what goes with the output head to the GPU in a split: its norm, its
// matrix, and the embedding table when that is the head (tied).
bool with_head(const ModelTensor& t, bool tied) {
    return t.layer < 0 && (t.role == TensorRole::Output || t.role == TensorRole::OutputNorm ||
                           (tied && t.role == TensorRole::TokenEmbedding));
}

// In a layer, what goes with the routed experts where they are computed: the router too, so
// that the host routes where it computes them and the layer's input crosses once.
bool with_experts(const ModelTensor& t) {
    return t.is_routed_expert() || t.role == TensorRole::MoeRouter ||
           t.role == TensorRole::MoeRouterBias;
}

// RAM a plan using the GPU needs besides weights and KV cache: the process, its host-side
// buffers (logits, routing), the load's pinned staging, the CUDA runtime's host memory, and with
// `cpu_threads` > 0 the CPU backend of a split with its threads.
MemoryPlan gpu_host_overhead(const Inputs& in, int cpu_threads) {
    MemoryPlan host = in.overhead;
    ActivationShape shape;
    shape.max_batch = in.options.max_batch;
    shape.n_ctx = in.n_ctx;
    shape.kv_type = in.options.kv_type;
    shape.threads = std::max(cpu_threads, 1);
    shape.logit_rows = in.options.logit_rows;
    const ActivationMemory act = activation_memory(in.model, shape);
    host.activations = (cpu_threads > 0 ? act.total() : act.engine + act.logits + act.threads) +
                       kDeviceStagingHostBytes + kGpuRuntimeHostBytes;
    // A split's activations crossing between the two backends (the engine's crossing buffer).
    if (cpu_threads > 0) {
        host.activations += uint64_t(batch_rows(in.options.max_batch, in.n_ctx)) *
                            uint64_t(widest_crossing(in.hp)) * sizeof(float);
    }
    if (in.options.embeddings) host.activations += uint64_t(in.n_ctx) * in.hp.n_embd * 4;
    return host;
}

// One way of sharing a model between the GPU and the CPU (plan.h, "GPU and CPU together").
struct Split {
    std::vector<bool> gpu;          // per tensor: in GPU memory
    std::vector<bool> layer_gpu;    // per layer: computed on the GPU
    std::vector<bool> experts_cpu;  // per layer: routed experts in RAM, computed by the CPU
    GpuMemoryPlan g;
    uint64_t host_weights = 0, host_kv = 0;
    double seconds = 0;  // per generated token, from the tiers' bandwidths
    std::string what;    // in words
    // The CPU's routed experts read from disk through an expert cache (stream_cpu_experts):
    // `experts` of them, of `unit` bytes, `sizes.slots` slots of `slot_bytes`, the cache in
    // `cache_room` bytes.
    bool experts_streamed = false;
    uint64_t experts = 0, unit = 0, cache_room = 0;
    double ram_hit_rate = 0;  // of the choices the GPU level misses
    Sizes sizes;
    uint64_t slot_bytes = 0;
    // The CPU's layers' FFN weights streamed from disk through slots, those that fit cached
    // (stream_cpu_layers); `ffn` covers the CPU's layers only.
    bool layers_streamed = false;
    FfnSizing ffn;
    ModelBytes ffn_bytes;
};

// Room for the GPU level of the expert cache (engine/vram_expert_cache.h) in a split: as many
// entries of the largest expert as `room` holds.
void add_expert_cache(Split& s, const Inputs& in, uint64_t room) {
    const uint64_t entry = plan_detail::expert_entry_bytes(in.model);
    if (entry == 0) return;
    const uint64_t entries = std::min<uint64_t>(room / entry, UINT32_MAX);
    s.g.expert_entries = uint32_t(entries);
    s.g.expert_entry_bytes = entry;
    s.g.expert_cache = entries * entry;
    s.g.total += s.g.expert_cache;
}

// The level then holds at most the experts the CPU keeps (`cpu` layers of them), and none when
// it could not hold one token's choices in a layer: too few to earn their copies.
void fit_expert_cache(Split& s, const Inputs& in, uint32_t cpu) {
    const uint64_t cpu_experts = uint64_t(cpu) * in.hp.n_expert;
    uint64_t entries = std::min<uint64_t>(s.g.expert_entries, cpu_experts);
    if (entries < std::max(1u, in.hp.n_expert_used)) entries = 0;
    s.g.total -= s.g.expert_cache;
    s.g.expert_entries = uint32_t(entries);
    s.g.expert_cache = entries * s.g.expert_entry_bytes;
    s.g.total += s.g.expert_cache;
    if (entries == 0) s.g.expert_entry_bytes = 0;
    s.g.expert_hit_rate = chosen_share(in, s.experts_cpu, 0, entries);
}

// The two splits. `layers`: the last layers with the head, as many as fit. `experts` (MoE): every
// tensor but the routed experts and the untied embedding table on the GPU, then the routed
// experts of the last layers while they fit; the rest of the experts in RAM for the CPU. Either
// is empty (gpu empty) when it cannot fit the GPU budget.
Split make_split(const Plan& plan, const Inputs& in, bool by_experts) {
    const ModelHparams& hp = in.hp;
    const uint32_t n_layer = hp.n_layer;
    Split s;
    s.g.budget = plan.budgets.gpu_mem;
    s.g.activations = gpu_activation_bytes(hp, {in.options.max_batch, in.n_ctx});
    std::vector<uint64_t> layer_weights(n_layer, 0), layer_experts(n_layer, 0);
    uint64_t head_weights = 0;
    for (const ModelTensor& t : in.model.tensors) {
        const uint64_t bytes = in.model.info(t).n_bytes;
        if (t.layer >= 0 && uint32_t(t.layer) < n_layer) {
            (with_experts(t) ? layer_experts : layer_weights)[size_t(t.layer)] += bytes;
        } else if (with_head(t, hp.tied_output)) {
            head_weights += bytes;
        }
    }
    const auto layer_kv = [&](uint32_t l) {
        return uint64_t(in.options.n_seq) * kv_layer_bytes(hp, l, in.n_ctx, in.options.kv_type);
    };
    const auto fits = [&](uint64_t add) { return s.g.total + add <= s.g.budget; };
    s.layer_gpu.assign(n_layer, false);
    s.experts_cpu.assign(n_layer, false);
    s.g.weights = head_weights;
    s.g.total = s.g.weights + s.g.activations;
    uint32_t k = 0;
    if (!by_experts) {
        // Room to ship one CPU layer's matrices to the GPU for a prompt batch (the CPU multiplies
        // a batch at a fraction of the speed PCIe brings them at; dense models: a MoE model's
        // layer split computes its CPU layers there), taken before the GPU's own layers as in
        // the expert split below, when a layer still fits beside it.
        const uint64_t staging =
            hp.is_moe() ? 0 : *std::max_element(layer_weights.begin(), layer_weights.end());
        const uint32_t last = n_layer - 1;
        if (staging > 0 && n_layer > 1 &&
            fits(staging + layer_weights[last] + layer_experts[last] + layer_kv(last))) {
            s.g.prompt_staging = staging;
            s.g.total += staging;
        }
        // At least one layer stays on the CPU: a model whose every layer fits is resident on
        // the GPU (place_on_gpu).
        while (k + 1 < n_layer) {
            const uint32_t l = n_layer - 1 - k;
            if (!fits(layer_weights[l] + layer_experts[l] + layer_kv(l))) break;
            s.g.weights += layer_weights[l] + layer_experts[l];
            s.g.kv_cache += layer_kv(l);
            s.g.total += layer_weights[l] + layer_experts[l] + layer_kv(l);
            s.layer_gpu[l] = true;
            ++k;
        }
        if (k == 0) return {};
        s.what = "the last " + std::to_string(k) + " of " + std::to_string(n_layer) +
                 " layers and the output head run on the GPU, the first " +
                 std::to_string(n_layer - k) + " on the CPU";
    } else {
        for (uint32_t l = 0; l < n_layer; ++l) {
            s.g.weights += layer_weights[l];
            s.g.kv_cache += layer_kv(l);
            s.g.total += layer_weights[l] + layer_kv(l);
            s.layer_gpu[l] = true;
            s.experts_cpu[l] = layer_experts[l] > 0;
        }
        if (s.g.total > s.g.budget) return {};
        // Room to ship one CPU layer's experts and router to the GPU for a prompt batch (the
        // CPU computes a batch's experts at a fraction of the speed PCIe brings them at), taken
        // before the GPU's own expert layers: a prompt gains far more than one layer costs decode.
        const uint64_t staging = *std::max_element(layer_experts.begin(), layer_experts.end());
        if (fits(staging)) {
            s.g.prompt_staging = staging;
            s.g.total += staging;
        }
        // The GPU level of the expert cache: the room asked for before whole layers' experts,
        // or (by default) what they leave.
        const std::optional<uint64_t>& asked = in.options.gpu_expert_cache;
        if (asked && *asked > 0) add_expert_cache(s, in, std::min(*asked, s.g.budget - s.g.total));
        for (uint32_t l = n_layer; l-- > 0;) {
            if (!s.experts_cpu[l] || !fits(layer_experts[l])) break;
            s.g.weights += layer_experts[l];
            s.g.total += layer_experts[l];
            s.experts_cpu[l] = false;
            ++k;
        }
        const uint32_t cpu = n_layer - k;
        if (cpu == 0) {  // no expert stays in RAM: nothing to ship
            s.g.total -= s.g.prompt_staging;
            s.g.prompt_staging = 0;
        }
        if (!asked) add_expert_cache(s, in, s.g.budget - s.g.total);
        fit_expert_cache(s, in, cpu);
        s.what = k == 0 ? "every layer runs on the GPU, their routed experts stay in RAM, "
                          "computed by the CPU"
                        : "every layer runs on the GPU with the routed experts of the last " +
                              std::to_string(k) + " of " + std::to_string(n_layer) +
                              " layers; those of the first " + std::to_string(cpu) +
                              " stay in RAM, computed by the CPU";
    }
    s.gpu.assign(in.model.tensors.size(), false);
    for (size_t i = 0; i < in.model.tensors.size(); ++i) {
        const ModelTensor& t = in.model.tensors[i];
        bool gpu = with_head(t, hp.tied_output);
        if (t.layer >= 0 && uint32_t(t.layer) < n_layer) {
            gpu = s.layer_gpu[size_t(t.layer)] &&
                  !(with_experts(t) && s.experts_cpu[size_t(t.layer)]);
        }
        s.gpu[i] = gpu;
        const uint64_t bytes = in.model.info(t).n_bytes;
        if (!gpu) s.host_weights += bytes;
        // The GPU level's hits among the CPU's experts are read by the GPU.
        const double on_gpu = gpu ? 1.0 : t.is_routed_expert() ? s.g.expert_hit_rate : 0.0;
        s.seconds += double(bytes) * t.reads_per_token *
                     (on_gpu / in.gpu.bandwidth + (1 - on_gpu) / in.ram.bandwidth);
    }
    for (uint32_t l = 0; l < n_layer; ++l) {
        if (!s.layer_gpu[l]) s.host_kv += layer_kv(l);
    }
    return s;
}

// RAM the CPU's part of a split needs with `weights` bytes of its weights resident: those, its KV
// cache and what the process holds besides.
uint64_t host_need(const Split& s, const MemoryPlan& host, uint64_t weights) {
    return weights + s.host_kv + host.activations + host.io_buffers + host.baseline + host.slack;
}

// The expert split of a model whose CPU part does not fit the RAM budget: the CPU's routed
// experts stay on disk and are read through an expert cache in what RAM is left (tiers d then b,
// as in expert-stream mode: the router picks, the store reads, the CPU computes). False when even
// its smallest cache (the slots alone) does not fit, with `refused` saying what would be needed.
bool stream_cpu_experts(Split& s, const Inputs& in, const MemoryPlan& host, uint64_t budget,
                        std::string& refused) {
    uint64_t streamed = 0;
    double per_token = 0;
    for (const ModelTensor& t : in.model.tensors) {
        if (t.layer < 0 || !t.is_routed_expert() || !s.experts_cpu[size_t(t.layer)]) continue;
        const uint64_t bytes = in.model.info(t).n_bytes;
        streamed += bytes;
        // The GPU level's hits never reach the RAM level or the disk.
        per_token += double(bytes) * t.reads_per_token * (1 - s.g.expert_hit_rate);
    }
    const uint64_t unit = plan_detail::expert_unit_bytes(in.model, in.disk.block_size);
    if (streamed == 0 || unit == 0) return false;
    const Sizes sizes = forced_sizes(in.options).value_or(Sizes{kMinSlots, 1});
    const uint64_t slot = uint64_t(in.hp.n_expert_used) * unit;
    const uint64_t fixed = host_need(s, host, s.host_weights - streamed);
    if (fixed + sizes.slots * slot > budget) {
        refused = "; with " + s.what + " and their experts read from disk, the CPU's part (" +
                  format_bytes(s.host_weights - streamed) + " of resident weights, " +
                  format_bytes(s.host_kv) + " of KV cache, " + std::to_string(sizes.slots) +
                  " expert slots of " + format_bytes(slot) +
                  " and the process) needs more than the RAM budget (" + format_bytes(budget) + ")";
        return false;
    }
    for (uint32_t l = 0; l < in.hp.n_layer; ++l) s.experts += s.experts_cpu[l] ? in.hp.n_expert : 0;
    s.unit = unit;
    s.cache_room = budget - fixed - sizes.slots * slot;
    const uint64_t capacity = std::min(s.experts, s.cache_room / unit);
    // Among the choices the GPU level misses: the next most chosen experts, behind its entries.
    const double vram = s.g.expert_hit_rate;
    const double hit =
        vram < 1 ? chosen_share(in, s.experts_cpu, s.g.expert_entries, capacity) / (1 - vram) : 0;
    s.ram_hit_rate = hit;
    // Cache hits are read from RAM, misses from disk (predict_traffic counts them the same way).
    s.seconds += per_token * (hit / in.ram.bandwidth + (1 - hit) / in.disk.rate.bandwidth -
                              1 / in.ram.bandwidth);
    s.host_weights -= streamed;
    s.experts_streamed = true;
    s.sizes = sizes;
    s.slot_bytes = slot;
    s.what +=
        ", read from disk through an expert cache of " + std::to_string(capacity) + " experts";
    return true;
}

// The layer split of a model whose CPU part does not fit the RAM budget: the FFN weights of the
// CPU's layers stream from disk through slots as in ffn-stream, as many of them cached in RAM as
// fit (tiers d then b: the CPU computes them where they land). False when the slots alone do not
// fit, with `refused` saying what would be needed.
bool stream_cpu_layers(Split& s, Plan& plan, const Inputs& in, const MemoryPlan& host,
                       std::string& refused) {
    ModelBytes mb = plan_detail::model_bytes(in.model, PlanMode::FfnStream, in.disk.block_size);
    uint64_t slot = 0, streamable = 0;
    for (size_t l = 0; l < mb.layers.size(); ++l) {
        plan_detail::LayerBytes& x = mb.layers[l];
        if (s.layer_gpu[l]) {  // the GPU's layers take no part; their compute is quick
            x = {};
            continue;
        }
        slot = std::max(slot, x.stream_widened);
        streamable += x.stream;
    }
    if (streamable == 0) return false;
    const std::optional<Sizes> forced = forced_sizes(in.options);
    const uint32_t min_slots = forced ? forced->slots : kMinSlots;
    const uint64_t fixed = host_need(s, host, s.host_weights - streamable);
    if (fixed + min_slots * slot > plan.memory.budget) {
        refused = "; with " + s.what + " and their FFN weights read from disk, the CPU's part (" +
                  format_bytes(s.host_weights - streamable) + " of resident weights, " +
                  format_bytes(s.host_kv) + " of KV cache, " + std::to_string(min_slots) +
                  " FFN slots of " + format_bytes(slot) +
                  " and the process) needs more than the RAM budget (" +
                  format_bytes(plan.memory.budget) + ")";
        return false;
    }
    s.ffn = size_ffn_stream(plan, in, mb, slot, fixed, forced);
    double disk_per_token = 0;
    uint64_t cached = 0;
    for (size_t l = 0; l < mb.layers.size(); ++l) {
        if (mb.layers[l].stream == 0) continue;
        if (s.ffn.cached[l]) {
            cached += mb.layers[l].stream;
        } else {
            disk_per_token += mb.layers[l].stream_per_token;
        }
    }
    s.seconds += disk_per_token * (1 / in.disk.rate.bandwidth - 1 / in.ram.bandwidth);
    s.host_weights -= streamable - cached;
    s.layers_streamed = true;
    s.slot_bytes = slot;
    s.ffn_bytes = std::move(mb);
    s.what += ", their FFN weights read from disk (" + format_bytes(cached) + " of " +
              format_bytes(streamable) + " cached in RAM)";
    return true;
}

// Splits the model between the GPU and the CPU when the whole model does not fit the GPU budget
// (plan.h, "GPU and CPU together"): of the splits that fit both budgets, the one with the higher
// speed limit. False (with a note why, nothing else changed) when none does.
bool place_gpu_split(Plan& plan, const Inputs& in, const GpuProfile& gpu,
                     const std::string& whole) {
    const int device = gpu.index;
    const ModelHparams& hp = in.hp;
    const MemoryPlan host = gpu_host_overhead(in, plan.threads);
    std::optional<Split> best;
    std::string refused;
    for (bool by_experts : {false, true}) {
        if (by_experts && !hp.is_moe()) continue;
        if (in.options.gpu_split && by_experts != (*in.options.gpu_split == GpuSplit::Experts)) {
            continue;
        }
        Split s = make_split(plan, in, by_experts);
        if (s.gpu.empty()) continue;
        if (host_need(s, host, s.host_weights) > plan.memory.budget) {
            refused = "; with " + s.what + ", the CPU's part (" + format_bytes(s.host_weights) +
                      " of weights, " + format_bytes(s.host_kv) +
                      " of KV cache and the process) needs more than the RAM budget (" +
                      format_bytes(plan.memory.budget) + ")";
            const bool streamed =
                in.options.mode != PlanMode::Resident &&
                (by_experts ? stream_cpu_experts(s, in, host, plan.memory.budget, refused)
                            : !hp.is_moe() && stream_cpu_layers(s, plan, in, host, refused));
            if (!streamed) continue;
            // Streamed experts are not in RAM as the stacks a batch ships. Streamed FFN layers
            // are, in their slots, when their layer runs: a batch ships them from there.
            if (s.experts_streamed) {
                s.g.total -= s.g.prompt_staging;
                s.g.prompt_staging = 0;
            }
        }
        if (!best || s.seconds < best->seconds) best = std::move(s);
    }
    if (!best) {
        plan.gpu_note = whole + (refused.empty() ? ", and not one layer fits beside the output "
                                                   "head and the GPU buffers"
                                                 : refused);
        plan.notes.push_back(plan.gpu_note + ": planned for the CPU");
        return false;
    }
    if (best->g.prompt_staging > 0) {
        best->what += std::string("; prompt batches ship each of ") +
                      (hp.is_moe() ? "those layers' experts" : "the CPU's layers' matrices") +
                      " to the GPU (" + format_bytes(best->g.prompt_staging) + " of GPU memory)";
    }
    const Split& s = *best;
    plan.gpu_device = device;
    plan.gpu_memory = s.g;
    plan.mode = s.experts_streamed  ? PlanMode::ExpertStream
                : s.layers_streamed ? PlanMode::FfnStream
                                    : PlanMode::Resident;
    plan.reason = whole + ": " + s.what + " (GPU " + format_bytes(s.g.weights) + " of weights, " +
                  format_bytes(s.g.kv_cache) + " of KV cache; RAM " + format_bytes(s.host_weights) +
                  (s.experts_streamed || s.layers_streamed ? " resident" : "") + ")";
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
        plan.tensors[i] = {s.gpu[i] ? Tier::Gpu : Tier::Ram, TensorUse::Resident, StreamUnit::None};
    }
    std::vector<TensorUse> uses(hp.n_layer, TensorUse::Resident);
    if (s.experts_streamed) {
        for (uint32_t l = 0; l < hp.n_layer; ++l) {
            if (s.experts_cpu[l]) uses[l] = TensorUse::Streamed;
        }
        set_expert_stream(plan, in, s.experts, s.unit, s.sizes, s.slot_bytes, s.cache_room,
                          s.ram_hit_rate);
    }
    if (s.layers_streamed) uses = apply_ffn_sizing(plan, in, s.ffn_bytes, s.slot_bytes, s.ffn);
    if (plan.mode != PlanMode::Resident) place_tensors(plan, in, plan.mode, uses);
    const ModelBytes mb = plan_detail::model_bytes(
        in.model, s.experts_streamed ? PlanMode::ExpertStream : PlanMode::FfnStream,
        in.disk.block_size);
    set_layer_rows(plan, mb, uses);
    plan.gpu_layers = 0;
    plan.cpu_expert_layers = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        plan.layers[l].on_gpu = s.layer_gpu[l];
        plan.layers[l].experts_on_cpu = s.experts_cpu[l];
        plan.gpu_layers += s.layer_gpu[l] ? 1 : 0;
        plan.cpu_expert_layers += s.experts_cpu[l] ? 1 : 0;
    }
    if (s.g.prompt_staging > 0 && gpu.host_to_device_pinned_bandwidth > 0 &&
        (hp.is_moe() ? hp.batch_ships_experts(plan.batch) : hp.batch_ships_layers(plan.batch))) {
        // Per batch: every CPU layer's experts and router, or every CPU layer's weights. Those
        // read from disk take the disk's time too (predict_traffic).
        uint64_t shipped = 0;
        for (const ModelTensor& t : in.model.tensors) {
            if (t.layer < 0 || uint32_t(t.layer) >= hp.n_layer) continue;
            const size_t l = size_t(t.layer);
            if (hp.is_moe() ? s.experts_cpu[l] && with_experts(t) : !s.layer_gpu[l]) {
                shipped += in.model.info(t).n_bytes;
            }
        }
        if (shipped > 0) {
            plan.prompt_tokens_per_second =
                double(plan.batch) * gpu.host_to_device_pinned_bandwidth / double(shipped);
        }
    }
    return true;
}

// Resident on GPU 0 when the weights, the KV cache and the GPU backend's buffers fit its budget
// and RAM holds the rest of the process; split by layers between it and the CPU when they fit
// together (place_gpu_split); false (nothing changed) otherwise.
bool place_on_gpu(Plan& plan, const Inputs& in, const HardwareProfile& profile) {
    if (profile.gpus.empty()) {
        plan.gpu_note = "no GPU (" +
                        (profile.gpu_note.empty() ? std::string("none found") : profile.gpu_note) +
                        ")";
        return false;
    }
    if (!in.options.gpu) {
        plan.gpu_note = "the plan was asked for the CPU";
        return false;
    }
    if (plan.budgets.gpu_mem == 0) {
        plan.gpu_note = "a GPU budget of 0";
        return false;
    }
    GpuMemoryPlan g;
    g.budget = plan.budgets.gpu_mem;
    for (const ModelTensor& t : in.model.tensors) {
        if (!host_only(t)) g.weights += in.model.info(t).n_bytes;
    }
    g.kv_cache = in.kv_bytes;
    g.activations = gpu_activation_bytes(in.hp, {in.options.max_batch, in.n_ctx});
    g.total = g.weights + g.kv_cache + g.activations;
    const std::string gpu = profile.gpus.front().name;
    if (g.total > g.budget) {
        const std::string whole =
            "the weights (" + format_bytes(g.weights) + "), KV cache (" + format_bytes(g.kv_cache) +
            ") and GPU buffers (" + format_bytes(g.activations) +
            ") need more than the GPU budget (" + format_bytes(g.budget) + " of " + gpu + ")";
        return place_gpu_split(plan, in, profile.gpus.front(), whole);
    }
    // RAM: the process, its host-side buffers (logits, routing) and the load's pinned staging.
    const MemoryPlan host = gpu_host_overhead(in, 0);
    const uint64_t ram_need = host.activations + host.io_buffers + host.baseline + host.slack;
    if (ram_need > plan.memory.budget) {
        plan.gpu_note = "the GPU holds the model but the RAM budget (" +
                        format_bytes(plan.memory.budget) + ") is too small for the process (" +
                        format_bytes(ram_need) + ")";
        plan.notes.push_back(plan.gpu_note + ": planned for the CPU");
        return false;
    }
    plan.gpu_device = profile.gpus.front().index;
    plan.gpu_memory = g;
    plan.mode = PlanMode::Resident;
    plan.reason = "the weights (" + format_bytes(g.weights) + "), KV cache (" +
                  format_bytes(g.kv_cache) + ") and GPU buffers (" + format_bytes(g.activations) +
                  ") fit in the GPU budget (" + format_bytes(g.budget) + " of " + gpu +
                  "): every layer runs on the GPU";
    plan.gpu_layers = in.hp.n_layer;
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
        plan.tensors[i] = {host_only(in.model.tensors[i]) ? Tier::Ram : Tier::Gpu,
                           TensorUse::Resident, StreamUnit::None};
    }
    const ModelBytes mb =
        plan_detail::model_bytes(in.model, PlanMode::FfnStream, in.disk.block_size);
    set_layer_rows(plan, mb, std::vector<TensorUse>(mb.layers.size(), TensorUse::Resident));
    for (LayerPlan& l : plan.layers) l.on_gpu = true;
    return true;
}

PlanMode choose_mode(Plan& plan, const Inputs& in) {
    const uint64_t need = in.model.totals.bytes + in.fixed();
    const std::string figures = "the weights (" + format_bytes(in.model.totals.bytes) + "), " +
                                kv_phrase(in) + " and what the process needs besides (" +
                                format_bytes(in.overhead_bytes()) + ")";
    const std::string budget = "the RAM budget (" + format_bytes(plan.memory.budget) + ")";
    if (need <= plan.memory.budget) {
        plan.reason = figures + " fit in " + budget;
        return PlanMode::Resident;
    }
    if (in.hp.is_moe()) {
        plan.reason = figures + " need more than " + budget +
                      ": every other tensor stays resident and the routed experts are streamed";
        return PlanMode::ExpertStream;
    }
    plan.reason = figures + " need more than " + budget +
                  ": attention, norms, embeddings and output head stay resident and the FFN "
                  "weights are streamed";
    return PlanMode::FfnStream;
}

// Bytes per token from each tier, and the speed limit they imply.
void predict_traffic(Plan& plan, const Inputs& in) {
    plan.tiers = {
        {Tier::Gpu, 0, 0, in.gpu.bandwidth,
         plan.gpu_device >= 0 ? in.gpu.source
                              : in.gpu.source + "; unused: the model is planned for the CPU",
         0},
        {Tier::Ram, 0, 0, in.ram.bandwidth, in.ram.source, 0},
        {Tier::Disk, 0, 0, in.disk.rate.bandwidth, in.disk.rate.source, 0}};
    for (size_t i = 0; i < in.model.tensors.size(); ++i) {
        const ModelTensor& t = in.model.tensors[i];
        const uint64_t bytes = in.model.info(t).n_bytes;
        TierTraffic& tier = plan.tiers[static_cast<size_t>(plan.tensors[i].tier)];
        tier.stored_bytes += bytes;
        tier.bytes_per_token += static_cast<double>(bytes) * t.reads_per_token;
    }
    if (const double vram = plan.gpu_memory.expert_hit_rate; vram > 0) {
        // Hits in the GPU level of the expert cache are read by the GPU, not from RAM or disk.
        for (size_t i = 0; i < in.model.tensors.size(); ++i) {
            const ModelTensor& t = in.model.tensors[i];
            if (!t.is_routed_expert() || plan.tensors[i].tier == Tier::Gpu) continue;
            const double hits = double(in.model.info(t).n_bytes) * t.reads_per_token * vram;
            plan.tiers[static_cast<size_t>(plan.tensors[i].tier)].bytes_per_token -= hits;
            plan.tiers[static_cast<size_t>(Tier::Gpu)].bytes_per_token += hits;
        }
    }
    if (plan.mode == PlanMode::ExpertStream) {
        // Hits in the expert cache are read from RAM instead of disk.
        TierTraffic& disk = plan.tiers[static_cast<size_t>(Tier::Disk)];
        const double hits = disk.bytes_per_token * plan.expert_cache.hit_rate;
        disk.bytes_per_token -= hits;
        plan.tiers[static_cast<size_t>(Tier::Ram)].bytes_per_token += hits;
    }
    double total = 0, worst = -1;
    for (TierTraffic& t : plan.tiers) {
        t.seconds_per_token = t.bandwidth > 0 ? t.bytes_per_token / t.bandwidth : 0;
        total += t.seconds_per_token;
        if (t.seconds_per_token > worst) {
            worst = t.seconds_per_token;
            plan.bound = t.tier;
        }
    }
    plan.tokens_per_second = total > 0 ? 1.0 / total : 0;
    // A prompt batch reads each streamed layer once, as a token does, beside the bus's copies:
    // the slower of the two bounds a split that ships.
    const TierTraffic& disk = plan.tiers[static_cast<size_t>(Tier::Disk)];
    plan.prompt_bound = Tier::Ram;
    if (plan.prompt_tokens_per_second > 0 &&
        disk.seconds_per_token > double(plan.batch) / plan.prompt_tokens_per_second) {
        plan.prompt_tokens_per_second = double(plan.batch) / disk.seconds_per_token;
        plan.prompt_bound = Tier::Disk;
    }
}

void count_memory(Plan& plan, const Inputs& in) {
    MemoryPlan& m = plan.memory;
    // With a GPU, RAM holds the tensors and KV cache of the CPU's layers (none when the GPU has
    // them all), the process and its host-side buffers.
    for (size_t i = 0; i < in.model.tensors.size(); ++i) {
        if (plan.tensors[i].tier == Tier::Gpu) continue;
        const uint64_t bytes = in.model.info(in.model.tensors[i]).n_bytes;
        if (plan.tensors[i].use == TensorUse::Resident) m.resident_weights += bytes;
        if (plan.tensors[i].use == TensorUse::Cached) m.cached_weights += bytes;
    }
    m.expert_cache = plan.expert_cache.capacity * plan.expert_cache.expert_bytes;
    m.slots = plan.stream.slots * plan.stream.slot_bytes;
    m.kv_cache = in.kv_bytes - plan.gpu_memory.kv_cache;
    m.activations = in.overhead.activations;
    if (plan.gpu_resident()) {
        m.activations = gpu_host_overhead(in, 0).activations;
    } else if (plan.gpu_split()) {
        m.activations = gpu_host_overhead(in, plan.threads).activations;
    }
    m.io_buffers = in.overhead.io_buffers;
    m.baseline = in.overhead.baseline;
    m.baseline_measured = in.overhead.baseline_measured;
    m.slack = in.overhead.slack;
    m.total = m.resident_weights + m.cached_weights + m.expert_cache + m.slots + m.row_buffers +
              m.kv_cache + m.activations + m.io_buffers + m.baseline + m.slack;
}

}  // namespace

Result<Plan> make_plan(const ModelInfo& model, const HardwareProfile& profile,
                       const Budgets& budgets, const PlanOptions& options) {
    if (!model.hparams || !model.runnable()) {
        return err("no plan: the model cannot be run",
                   model.problems.empty() ? "" : ": " + model.problems.front());
    }
    STRATA_TRY(check_overrides(options));
    const ModelHparams& hp = *model.hparams;
    STRATA_TRY(check_kv_type(hp, options.kv_type));  // the engine would refuse it
    if (options.gpu_split == GpuSplit::Experts && !hp.is_moe()) {
        return err("--gpu-split experts needs a mixture-of-experts model; ", model.arch,
                   " here is dense");
    }
    Inputs in{
        model, hp, options, ram_rate(profile), gpu_rate(profile), disk_rate(profile, options.disk)};
    in.n_ctx = options.n_ctx ? options.n_ctx : default_context(hp);
    if (options.n_seq == 0) return err("a plan needs at least one sequence");
    in.kv_bytes = uint64_t(options.n_seq) * kv_cache_bytes(hp, in.n_ctx, options.kv_type);
    if (options.max_batch == 0) return err("the batch must be at least one token");
    const int threads = options.threads > 0 ? options.threads : physical_core_count();
    in.overhead = overhead_lines(model, hp, options, in.n_ctx, budgets.ram, threads);

    Plan plan;
    plan.budgets = budgets;
    plan.n_ctx = in.n_ctx;
    plan.n_seq = options.n_seq;
    plan.kv_type = options.kv_type;
    plan.batch = batch_rows(options.max_batch, in.n_ctx);
    plan.threads = threads;
    plan.memory.budget = budgets.ram;
    plan.tensors.assign(model.tensors.size(), TensorPlacement{});
    plan.layers.resize(hp.n_layer);
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        plan.layers[l].layer = static_cast<int>(l);
        auto it = model.by_layer.find(static_cast<int>(l));
        if (it != model.by_layer.end()) plan.layers[l].bytes_per_token = it->second.bytes_per_token;
    }
    for (const TierRate* r : {&in.ram, &in.disk.rate}) {
        if (!r->measured) plan.notes.push_back(r->source);
    }
    if (has_expert_counts(in)) {
        uint64_t choices = 0;
        for (uint32_t c : options.expert_counts) choices += c;
        plan.notes.push_back("expert cache hit rates predicted from " + format_count(choices) +
                             " expert choices of earlier runs");
    }

    if ((!options.mode || *options.mode == PlanMode::Resident) && place_on_gpu(plan, in, profile)) {
        plan.stream.block_size = in.disk.block_size;
        count_memory(plan, in);
        predict_traffic(plan, in);
        return plan;
    }
    if (options.mode) {
        if (*options.mode == PlanMode::ExpertStream && !hp.is_moe()) {
            return err("--mode expert-stream needs a mixture-of-experts model; ", model.arch,
                       " here is dense");
        }
        plan.mode = *options.mode;
        plan.mode_forced = true;
        plan.reason = "forced (--mode " + std::string(plan_mode_name(plan.mode)) + ")";
    } else {
        plan.mode = choose_mode(plan, in);
    }
    switch (plan.mode) {
        case PlanMode::Resident:
            STRATA_TRY(place_resident(plan, in));
            break;
        case PlanMode::FfnStream:
            STRATA_TRY(place_ffn_stream(plan, in));
            break;
        case PlanMode::ExpertStream:
            STRATA_TRY(place_expert_stream(plan, in));
            break;
    }
    plan.stream.block_size = in.disk.block_size;
    count_memory(plan, in);
    predict_traffic(plan, in);
    return plan;
}

}  // namespace strata
