// The placement plan: for a model, a machine (its hardware profile) and memory budgets, where
// every tensor lives while strata runs (GPU memory, RAM or disk), the mode (resident, ffn-stream,
// expert-stream), the sizes of the streaming machinery (pool slots, prefetch lookahead, expert
// cache), the memory it all takes, and the speed limit it implies:
//     tokens/s <= 1 / Σ_tier (bytes read from the tier per token / bandwidth of the tier).
// The plan is a plain value: `strata inspect` prints it (plan_text.h, plan_json.h), tests assert
// on it, and the store sets itself up from it. Every figure is derived from the model,
// the profile and the budgets; PlanOptions can force a mode, slot count or lookahead for
// experiments.
//
// The rules (each one is tested in tests/plan_*_test.cpp):
//  - Mode. Resident when every weight plus the KV cache fits in the RAM budget. Otherwise a
//    mixture-of-experts model goes to expert-stream (every non-expert tensor resident, expert
//    slices read on demand through an expert cache) and a dense one to ffn-stream (attention,
//    norms, embeddings, output head and routers resident; FFN weights streamed a whole layer at a
//    time, as many layers as fit cached in RAM). When even the smallest plan of that mode does
//    not fit, make_plan fails and the error names the minimum budget.
//  - Cached FFN layers are chosen by benefit per byte, reads_per_token x (1/disk - 1/RAM
//    bandwidth): the same for every dense layer, so ties are broken to spread the cached layers
//    evenly over the depth (bisection order 0, n/2, n/4, 3n/4, ...). Spread, not the first ones,
//    because the disk can only read ahead as far as the free slots reach: a run of k cached
//    layers is compute time during which the disk idles once the slots are full, and spreading
//    keeps every such run short, so a lookahead of one or two layers keeps the disk busy.
//  - Lookahead: the smallest L in 1..4 such that L layer reads cover the longest stretch of
//    compute between two streamed FFNs (the attention of the next streamed layer plus the
//    cached layers in between; across the token boundary also the output head and embedding):
//        L = ceil(longest gap / read time of one streamed layer's FFN), clamped to 1..4,
//    where compute time is bytes read / RAM bandwidth (decode is memory-bound) and read time is
//    the layer's FFN bytes / disk bandwidth. Each step of L costs a slot (one layer of RAM that
//    could have been a cached layer), so more than 4 never pays.
//  - Slots: L + 1 (L layers in flight and the one being computed), each the size of the largest
//    streamed layer's FFN, every tensor widened to whole disk blocks as O_DIRECT reads it. The
//    minimum is 2. In expert-stream a slot holds one layer's n_expert_used experts and L is 1:
//    the next layer's experts are known only from its router applied early, one layer ahead.
//  - Expert cache: whatever the budget leaves after resident tensors, KV cache and slots, in
//    whole experts (one expert's gate, up and down slices of one layer). Its hit rate is
//    predicted as capacity / experts, i.e. routing spread evenly; real routing is skewed and
//    local, so the measured rate is higher (strata bench reports both, with prefetch).
//  - Disk bandwidth: the best O_DIRECT read rate the profile measured on the disk holding the
//    model with 1-4 MiB blocks at queue depth >= 4 (the store's reads); failing that, the best
//    rate with blocks >= 1 MiB, then the best of any; 1.5 GB/s (a typical NVMe) when the disk was
//    not measured, said so in the plan's notes.
//  - GPU. When the machine has a GPU and every weight, the KV cache and the GPU backend's
//    activations and scratch (model/activation_memory.h, gpu_activation_bytes) fit in the GPU
//    budget, the plan is resident on the GPU: every tensor in its memory, every layer computed
//    there, and RAM holds only the process, its host-side buffers and the pinned staging the
//    load reads through. The speed limit is then the weights read per token over the GPU's
//    measured read bandwidth.
//  - GPU and CPU together. A model that does not fit the GPU budget is split by layers when it
//    fits VRAM and RAM together: the last layers with the output norm and head (and a tied
//    embedding table, which is the head) in GPU memory, computed there; the first layers and
//    the token-embedding table resident in RAM, computed by the CPU where they lie, which for
//    decode beats copying them over PCIe (the host reads RAM faster than the bus carries it).
//    The GPU takes as many layers as its budget holds beside the head, their KV cache and its
//    buffers, because each of them is then read at the GPU's bandwidth instead of RAM's; the
//    hidden state crosses between the two once per pass. Layers last, not first, so the head,
//    read once per generated token, is on the faster side. rope_freqs stays in RAM in every
//    GPU plan: the host reads it when the engine starts. A mixture-of-experts model has a
//    second split: every tensor but the routed experts (and an untied embedding table) on the
//    GPU with the whole KV cache, then the routed experts of the last layers while they fit; the
//    other layers' experts (with their routers) stay in RAM and the CPU routes and computes
//    them, the layer's normalized input crossing to the host once and the experts' sum back. Of the
//    splits that fit both budgets the plan takes the one with the higher speed limit (the sum over
//    tensors of bytes read per token over their tier's bandwidth). When a split fits the GPU but
//    its CPU part does not fit RAM, the CPU's part streams from disk as the CPU's own plans do:
//    a mixture of experts' routed experts through an expert cache in the RAM left (mode
//    expert-stream, expert split only), a dense model's FFN weights of the CPU's layers through
//    slots with as many of them cached as fit (mode ffn-stream, layer split); the CPU computes
//    them where they land. A model whose split does not fit even so is planned for the CPU alone.
//  - KV-cache reads are not in the predicted traffic: they grow with the position in the
//    context; the limit is the one for a short context.
//  - The budget is a hard ceiling on the process, not on its weights: besides weights, caches,
//    slots and KV cache the plan counts, each as its own line of MemoryPlan, the engine's
//    activations and scratch for its batch and context, its compute threads and the logits it
//    returns (model/activation_memory.h, the same shapes the CPU backend sizes its buffers by),
//    the direct reader's staging and the store's bookkeeping, the process as it stands before
//    the weights are read (code, libraries, the model's description, tokenizer and chat
//    template: measured by the front end, estimated when not), and a slack for the allocator's
//    rounding and the kernel's page tables. Everything placed is what is left after them, so
//    peak RSS, and what a memory cgroup charges, stay at or below the budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/kernel_choice.h"
#include "model/kv_layout.h"
#include "model/model_info.h"
#include "model/streamable.h"
#include "plan/budget.h"
#include "profile/hardware_profile.h"
#include "util/result.h"

namespace strata {

enum class PlanMode : uint8_t { Resident, FfnStream, ExpertStream };
// How a model larger than the GPU budget shares the GPU with the CPU (the rules above).
enum class GpuSplit : uint8_t { Layers, Experts };
enum class Tier : uint8_t { Gpu, Ram, Disk };
// Why a tensor is where it is: Resident tensors are always in the fast tier (attention, norms,
// embeddings, output head, routers, or everything in resident mode); Cached ones could be
// streamed but the budget keeps them in RAM; Streamed ones are read from disk while running.
enum class TensorUse : uint8_t { Resident, Cached, Streamed };

inline constexpr uint32_t kMinSlots = 2;
inline constexpr uint32_t kMaxLookahead = 4;
inline constexpr double kAssumedDiskBandwidth = 1.5e9;  // when the profile has no disk figure
inline constexpr double kAssumedRamBandwidth = 20e9;    // when the profile has no RAM figure

std::string_view plan_mode_name(PlanMode m);  // "resident", "ffn-stream", "expert-stream"
Result<PlanMode> parse_plan_mode(std::string_view name);
std::string_view gpu_split_name(GpuSplit s);  // "layers", "experts"
Result<GpuSplit> parse_gpu_split(std::string_view name);
std::string_view tier_name(Tier t);             // "gpu", "ram", "disk"
std::string_view tensor_use_name(TensorUse u);  // "resident", "cached", "streamed"

// What the plan assumes of the process when the front end has not measured it: the executable,
// its libraries and runtime, and per token of the vocabulary the model's description and the
// tokenizer built from it (strings, merges, lookup tables).
inline constexpr uint64_t kEstimatedProcessBytes = 16ull << 20;
inline constexpr uint64_t kEstimatedBytesPerVocabToken = 640;
// The direct reader's request tables and, where io_uring is refused, its pread threads. (It has
// no staging to count: the store reads every range widened straight into its place.)
inline constexpr uint64_t kReaderTableBytes = 256ull << 10;
// Pinned host memory a load onto the GPU reads through (store/arena.h's staging chunks).
inline constexpr uint64_t kDeviceStagingHostBytes = 68ull << 20;
// Host memory of the CUDA runtime, the driver and cuBLAS once a GPU backend runs, which a process
// measured before it (the baseline) does not hold yet. On the H200 machine a split run's peak RSS
// was 0.31 GiB above a plan without this line; on an H100 machine a memory cgroup charged a split
// run (expert-stream, --ram 7G) 0.14 GiB above its peak RSS (the kernel's memory for the driver's
// pinned pages and the CUDA libraries' page cache), so this counts both.
inline constexpr uint64_t kGpuRuntimeHostBytes = 448ull << 20;
// Slack for what no line counts exactly: allocator rounding and free lists, code pages first
// touched while running, and the kernel's page tables and I/O rings, which a memory cgroup
// charges too: a fixed part and a share of the budget.
inline constexpr uint64_t kSlackBytes = 4ull << 20;
inline constexpr uint64_t kSlackPerBudget = 128;  // budget / this

// Choices added to every expert's count before the plan ranks them (PlanOptions::expert_counts):
// with fewer real choices than this per expert, chance makes the most chosen look more popular
// than they are (a run of 24 tokens of a 4-layer, 128-expert model predicted 95% for a cache
// of half the experts without it; its next run measured 69%).
inline constexpr uint32_t kExpertCountPrior = 16;

struct PlanOptions {
    uint32_t n_ctx = 0;  // KV-cache positions; 0: the engine's default for the model
    uint32_t n_seq = 1;  // sequences decoded together, each with its own KV cache of n_ctx
    KvType kv_type = KvType::F16;
    uint32_t max_batch = 512;  // prompt tokens evaluated together (at most n_ctx are)
    int threads = 0;           // compute threads; 0: the machine's physical cores
    // Rows of logits one evaluation hands out (perplexity: all of a chunk's), and whether hidden
    // states of a whole context are (embeddings).
    uint32_t logit_rows = 1;
    bool embeddings = false;
    // The process before any weight is read, measured by the front end (process_stats.h:
    // resident memory once the model's description and tokenizer are built); unset: estimated.
    std::optional<uint64_t> baseline;
    std::optional<PlanMode> mode;       // force a mode
    std::optional<uint32_t> slots;      // force the pool slot count (>= 2)
    std::optional<uint32_t> lookahead;  // force the prefetch lookahead (>= 1)
    bool gpu = true;  // false: plan for the CPU only, whatever GPU the profile has
    std::optional<GpuSplit> gpu_split;  // force the split (experiments); unset: the faster
    // GPU memory for the GPU level of the expert cache in an expert split, taken before the
    // routed experts of whole layers; unset: what those leave (0: none).
    std::optional<uint64_t> gpu_expert_cache;
    // A split reserves GPU room for prompt batches to ship RAM's weights through
    // (GpuMemoryPlan::prompt_staging). false: none, prompts compute the CPU's part on the CPU, and
    // the room goes where the GPU's free memory goes (its layers, or the expert cache's GPU level).
    bool prompt_shipping = true;
    // How often each routed expert was chosen in earlier runs (layer * n_expert + expert: the
    // expert cache's statistics, store/coactivation.h). With them the expert caches' hit rates
    // are predicted from the most chosen experts' share of the choices (each count plus
    // kExpertCountPrior, so that a few choices predict little skew); without (or with another
    // shape), as if every expert were as likely.
    std::vector<uint32_t> expert_counts;
    int disk = -1;  // index in profile.disks of the disk holding the model (LoadedProfile::disk)
};

struct TensorPlacement {
    Tier tier = Tier::Ram;
    TensorUse use = TensorUse::Resident;
    StreamUnit unit = StreamUnit::None;  // how a Streamed tensor is read (model/streamable.h)
};

// One layer: the part always resident, and the part the mode streams or caches: the FFN weights
// (dense, shared and routed experts; not the router) in ffn-stream and in resident mode, the
// routed experts in expert-stream.
struct LayerPlan {
    int layer = 0;
    bool on_gpu = false;  // the layer's tensors in GPU memory, computed there (but see below)
    // Its routed experts resident in RAM, computed by the CPU, while the rest of the layer runs
    // on the GPU.
    bool experts_on_cpu = false;
    uint64_t resident_bytes = 0;
    uint64_t ffn_bytes = 0;
    TensorUse ffn_use = TensorUse::Resident;
    double bytes_per_token = 0;  // the whole layer, as ModelInfo counts it
};

struct StreamPlan {
    uint32_t slots = 0;       // 0 when nothing is streamed
    uint64_t slot_bytes = 0;  // each
    uint32_t lookahead = 0;   // layers read ahead of the one being computed
    uint32_t block_size = 0;  // disk block reads are widened to
    bool slots_forced = false, lookahead_forced = false;
    uint32_t streamed_layers = 0, cached_layers = 0;  // ffn-stream
    // The lookahead derivation (ffn-stream; 0 otherwise).
    double layer_read_seconds = 0;   // the quickest streamed layer's FFN read
    double longest_gap_seconds = 0;  // compute between two streamed FFNs, at most
};

struct ExpertCachePlan {
    uint64_t expert_bytes = 0;      // one expert of one layer (gate, up, down), widened to blocks
    uint64_t experts = 0;           // routed experts in the model (layers x n_expert)
    uint64_t capacity = 0;          // experts the cache holds
    uint32_t experts_per_slot = 0;  // n_expert_used
    double hit_rate = 0;            // predicted: capacity / experts
};

struct MemoryPlan {
    uint64_t resident_weights = 0;
    uint64_t cached_weights = 0;  // cached FFN layers
    uint64_t expert_cache = 0;
    uint64_t slots = 0;
    uint64_t row_buffers = 0;  // embedding rows and LM head chunks read by rows
    uint64_t kv_cache = 0;
    uint64_t activations = 0;  // the engine's: activations, scratch, threads, logits
    uint64_t io_buffers = 0;   // the direct reader's tables, the store's bookkeeping
    uint64_t baseline = 0;     // the process before the weights (code, tokenizer, ...)
    bool baseline_measured = false;
    uint64_t slack = 0;   // allocator rounding, page tables
    uint64_t total = 0;   // the sum of the above; never above budget
    uint64_t budget = 0;  // the RAM budget
    // Of kv_cache: hybrid models' fixed-size recurrent state (model/kv_layout.h) of the layers
    // the CPU computes, whatever the context; 0 for others.
    uint64_t recurrent_state = 0;

    // What the process holds whatever it loads (baseline and slack), and what one model adds.
    uint64_t process() const { return baseline + slack; }
    uint64_t model() const { return total - process(); }
};

// GPU memory of a plan that uses the GPU (all zero otherwise).
struct GpuMemoryPlan {
    uint64_t weights = 0;
    uint64_t kv_cache = 0;     // of the layers on the GPU
    uint64_t activations = 0;  // the GPU backend's activations, staging and scratch
    // A split's room for what prompt batches ship from RAM: one CPU layer's routed experts and
    // router (an expert split; batches that use most of them), or one CPU layer's matrices (a
    // dense model's layer split; batches of ModelHparams::batch_ships_layers). 0: prompts
    // compute them on the CPU.
    uint64_t prompt_staging = 0;
    // An expert split's GPU level of the expert cache (engine/vram_expert_cache.h):
    // `expert_entries` entries of `expert_entry_bytes` (the largest expert's matrices), for the
    // experts the CPU computes; the GPU computes those it holds. 0: none.
    uint64_t expert_cache = 0;
    uint32_t expert_entries = 0;
    uint64_t expert_entry_bytes = 0;
    double expert_hit_rate = 0;  // predicted: entries / the CPU's experts
    uint64_t total = 0;          // never above budget
    uint64_t budget = 0;         // the GPU budget
    // Of kv_cache: the recurrent state of the hybrid models' delta-net layers on the GPU.
    uint64_t recurrent_state = 0;
};

struct TierTraffic {
    Tier tier = Tier::Ram;
    uint64_t stored_bytes = 0;   // weights living in the tier (slots and caches not counted)
    double bytes_per_token = 0;  // read from the tier per generated token
    double bandwidth = 0;        // bytes/s used for the prediction
    std::string bandwidth_source;
    double seconds_per_token = 0;
};

struct Plan {
    PlanMode mode = PlanMode::Resident;
    bool mode_forced = false;
    std::string reason;  // why this mode, in words
    Budgets budgets;
    uint32_t n_ctx = 0;
    uint32_t n_seq = 1;  // KV caches of n_ctx positions (sequences decoded together)
    KvType kv_type = KvType::F16;
    uint32_t batch = 0;  // rows the engine evaluates together: PlanOptions::max_batch, <= n_ctx
    int threads = 0;     // compute threads the engine runs with
    // The profile's CPU kernel table for the model's weight types (backend/kernel_choice.h): the
    // path the CPU backend takes per type and phase; empty when the profile has none.
    CpuKernelTable cpu_kernels;

    std::vector<TensorPlacement> tensors;  // parallel to ModelInfo::tensors
    DeepStreaming deep;                    // what ffn-stream streams beyond FFN layers
    std::vector<LayerPlan> layers;         // 0..n_layer-1
    StreamPlan stream;
    ExpertCachePlan expert_cache;  // expert-stream only
    MemoryPlan memory;
    int gpu_device = -1;      // the GPU the plan uses (for every layer, or gpu_layers); -1: none
    uint32_t gpu_layers = 0;  // layers computed on the GPU (LayerPlan::on_gpu)
    uint32_t cpu_expert_layers = 0;  // of those, layers whose routed experts the CPU computes
    GpuMemoryPlan gpu_memory;
    std::string gpu_note;            // why the plan does not use a GPU (empty when it does)
    std::vector<TierTraffic> tiers;  // gpu, ram, disk

    // Every layer on the GPU; or some on the GPU and the rest on the CPU.
    bool gpu_resident() const {
        return gpu_device >= 0 && gpu_layers == layers.size() && cpu_expert_layers == 0;
    }
    bool gpu_split() const { return gpu_device >= 0 && !gpu_resident(); }

    double tokens_per_second = 0;  // the speed limit
    // A split that ships RAM's weights to the GPU for each prompt batch (prompt_staging): the
    // prompt's limit from the bus, a batch of `batch` tokens per crossing of every CPU layer's
    // experts and router (or, in a dense layer split, every CPU layer's weights) at the measured
    // pinned host-to-device rate. 0: not such a split, or no rate measured.
    double prompt_tokens_per_second = 0;
    // What bounds it: the bus (Ram: shipping RAM's weights), or the disk when the CPU's layers
    // stream their FFNs and reading them takes longer than shipping them.
    Tier prompt_bound = Tier::Ram;
    Tier bound = Tier::Ram;  // the tier with the largest time per token
    std::vector<std::string> notes;

    const TierTraffic& traffic(Tier t) const { return tiers[static_cast<size_t>(t)]; }
};

// Fails when the model cannot be run, when the budget is too small for any plan (the error names
// the minimum), or when a forced mode or size cannot work.
Result<Plan> make_plan(const ModelInfo& model, const HardwareProfile& profile,
                       const Budgets& budgets, const PlanOptions& options = {});

}  // namespace strata
