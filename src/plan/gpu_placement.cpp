// The GPU's placements (gpu_placement.h); the rules are in plan.h.
#include "plan/gpu_placement.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "model/activation_memory.h"
#include "model/kv_layout.h"
#include "util/units.h"

namespace strata::plan_detail {

namespace {

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
// that the host routes where it computes them and the layer's input crosses once, and the
// experts' biases (gpt-oss), which the unit computing them reads.
bool with_experts(const ModelTensor& t) {
    return t.is_routed_expert() || is_expert_role(t.role) || t.role == TensorRole::MoeRouter ||
           t.role == TensorRole::MoeRouterBias;
}

}  // namespace

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

namespace {

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
        return uint64_t(in.options.n_seq) *
               kv_layer_bytes(hp, l, in.n_ctx, in.options.kv_type, in.options.max_batch);
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
        if (in.options.prompt_shipping && staging > 0 && n_layer > 1 &&
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
        if (in.options.prompt_shipping && fits(staging)) {
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
        // The layers whose experts stay in RAM (leading dense layers have none).
        const uint32_t cpu = uint32_t(std::count(s.experts_cpu.begin(), s.experts_cpu.end(), true));
        const uint32_t moe_layers = k + cpu;
        if (cpu == 0) {  // no expert stays in RAM: nothing to ship
            s.g.total -= s.g.prompt_staging;
            s.g.prompt_staging = 0;
        }
        if (!asked) add_expert_cache(s, in, s.g.budget - s.g.total);
        fit_expert_cache(s, in, cpu);
        s.what = k == 0 ? "every layer runs on the GPU, their routed experts stay in RAM, "
                          "computed by the CPU"
                        : "every layer runs on the GPU with the routed experts of the last " +
                              std::to_string(k) + " of " + std::to_string(moe_layers) +
                              " expert layers; those of the first " + std::to_string(cpu) +
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
    if (!in.options.prompt_shipping) {
        plan.notes.push_back(
            "prompt shipping is off (--no-prompt-shipping): prompts compute the CPU's part on the "
            "CPU");
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

}  // namespace

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
    // The GPU's latent attention reads the f16 cache only (cuda/mla.h).
    if (in.hp.is_mla() && in.options.kv_type != KvType::F16) {
        plan.gpu_note = "the GPU's latent attention takes the f16 KV cache (" + in.hp.arch +
                        " with --kv-type " + std::string(kv_type_name(in.options.kv_type)) + ")";
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

}  // namespace strata::plan_detail
