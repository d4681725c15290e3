// make_plan: the mode, the place of every tensor, the streaming sizes and the speed limit. The
// rules are in plan.h; the per-layer arithmetic in plan_layers.h; the steps the CPU's and the
// GPU's placements share in placement_steps.h; the GPU's placements in gpu_placement.h.
#include "plan/plan.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/activation_memory.h"
#include "model/kv_layout.h"
#include "plan/gpu_placement.h"
#include "plan/placement_steps.h"
#include "plan/plan_layers.h"
#include "plan/tier_rates.h"
#include "util/thread_pool.h"
#include "util/units.h"

namespace strata {

using plan_detail::FfnSizing;
using plan_detail::Inputs;
using plan_detail::ModelBytes;
using plan_detail::Sizes;

using plan_detail::apply_ffn_sizing;
using plan_detail::chosen_share;
using plan_detail::forced_sizes;
using plan_detail::gpu_host_overhead;
using plan_detail::has_expert_counts;
using plan_detail::place_on_gpu;
using plan_detail::place_tensors;
using plan_detail::set_expert_stream;
using plan_detail::set_layer_rows;
using plan_detail::size_ffn_stream;

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
        // its state (at most one entry per expert); the routers' selection biases as floats.
        const uint64_t keys = uint64_t(hp.n_layer) * hp.n_expert;
        m.io_buffers += keys * (8 + 8 + 4 + 2 * uint64_t(hp.n_expert)) + keys * 256;
        if (hp.has_selection_bias) m.io_buffers += keys * sizeof(float);
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
    // The recurrent state lives with its layer's KV cache: in GPU memory for the GPU's layers.
    const uint64_t state = uint64_t(in.options.n_seq) * recurrent_state_bytes(in.hp);
    uint64_t gpu_state = 0;
    for (uint32_t l = 0; l < in.hp.n_layer && l < plan.layers.size(); ++l) {
        if (in.hp.is_recurrent(l) && (plan.gpu_resident() || plan.layers[l].on_gpu)) {
            gpu_state += uint64_t(in.options.n_seq) *
                         (recurrent_conv_bytes(in.hp) + recurrent_delta_bytes(in.hp));
        }
    }
    plan.gpu_memory.recurrent_state = gpu_state;
    m.recurrent_state = state - gpu_state;
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

// The types of the model's matrices (tensors of two or more dimensions): the products' weights.
std::vector<TensorType> matrix_types(const ModelInfo& model) {
    std::vector<TensorType> types;
    for (const ModelTensor& t : model.tensors) {
        const TensorInfo& info = model.file.tensors[t.index];
        if (info.n_dims < 2) continue;
        if (std::find(types.begin(), types.end(), info.type) == types.end()) {
            types.push_back(info.type);
        }
    }
    return types;
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
    in.kv_bytes =
        uint64_t(options.n_seq) * kv_cache_bytes(hp, in.n_ctx, options.kv_type, options.max_batch);
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
    if (profile.cpu_kernels)
        plan.cpu_kernels = profile.cpu_kernels->table.for_types(matrix_types(model));
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
