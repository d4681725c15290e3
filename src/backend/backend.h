// The backend interface: what the engine computes with.
//
// The engine (engine/) drives a model in model order: embedding, then each layer's blocks, then
// the output head. A backend does the arithmetic of those blocks on memory it owns: the
// activations of the batch being evaluated (named by Act, max_batch rows each) and the KV cache
// of the layers it runs. The engine holds no activation memory of its own; between backends it
// moves activations through host memory (write_act / read_act): the hidden state between two
// backends' layers, and the inputs and outputs of operations another backend computes.
//
// The granularity is the block, not a graph IR: the operations below are the ones the
// architecture families are written in, each a whole pass over its inputs (a projection of the
// batch, a layer's attention, an FFN), so a backend can fuse within an operation and a GPU
// backend can capture a whole decode step.
//
// A backend also answers the questions a tier planner asks before it puts a tensor somewhere:
// can it compute this operation on this weight type, can it read memory of that kind, what does
// reading a byte from there cost it, and where should streamed bytes land for it.
//
// The CPU backend (backend/cpu/) is the reference every other backend is tested against.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/tuning.h"
#include "gguf/tensor_type.h"
#include "model/hparams.h"
#include "model/kv_layout.h"
#include "model/rope.h"
#include "model/tensor_view.h"
#include "util/function_ref.h"
#include "util/result.h"

namespace strata {

// The activations a backend holds for one batch. Row lengths (per token):
enum class Act : uint8_t {
    Hidden,   // the residual stream: n_embd
    Normed,   // a normalised copy of it, the input of a block's projections: n_embd
    Q,        // queries, n_head x head_dim_k (rotated)
    K,        // keys, n_head_kv x head_dim_k (rotated)
    V,        // values, n_head_kv x head_dim_v
    AttnOut,  // attention output before its projection: n_head x head_dim_v
    Out,      // a block's output before the residual add: n_embd
    Side,     // a second block output summed into Out (the shared expert): n_embd
    Count
};
std::string_view act_name(Act a);

// The operations a planner asks about, by the weight they read.
enum class BackendOp : uint8_t {
    Linear,     // projections, FFN matrices, routers, the output head
    Embedding,  // rows of the token-embedding table
    Experts,    // routed experts' matrices
    Norm,       // norm weights (F32)
    Count
};

// One output of a multi-linear job: out = in W^T (+ bias), rows of W.rows() floats.
struct LinearJob {
    const TensorView* weight;
    const TensorView* bias;  // may be null or absent
    Act out;
};

// The rows of a batch that continue one sequence: rows row0 .. row0+n-1 are its tokens at
// positions pos0 .. pos0+n-1, and their keys and values go to (and are read from) KV-cache slot
// `seq`. A batch is one run (a prompt, a decode step) or several sequences' runs one after the
// other (continuous batching: every weight read serves them all).
struct SeqRun {
    int seq = 0;
    int64_t row0 = 0;
    int64_t n = 0;
    int64_t pos0 = 0;
};

// One chosen expert of a batch and the (token * k + choice) slots that chose it, with their
// routing weights.
struct ExpertJob {
    ExpertView expert;
    std::span<const int64_t> slots;
    std::span<const float> weights;
};

// Which backend to create: the CPU's, or CUDA's on a GPU.
enum class BackendKind : uint8_t { Cpu, Cuda };
struct BackendSpec {
    BackendKind kind = BackendKind::Cpu;
    int device = 0;  // the GPU, for Cuda
    bool operator==(const BackendSpec&) const = default;
};

// What a backend sizes itself from.
struct BackendConfig {
    ModelHparams hp;
    RopeConfig rope;
    uint32_t n_ctx = 0;  // KV-cache positions of each sequence
    uint32_t n_seq = 1;  // sequences, each with its own KV cache of n_ctx positions
    KvType kv_type = KvType::F16;
    uint32_t max_batch = 512;  // rows of every activation
    int threads = 0;           // CPU threads; 0: physical cores
    std::vector<bool> layers;  // the layers it runs (and caches keys and values for); empty: all
    // A GPU's device bytes for weights that stay in RAM, shipped to it for a prompt batch: a
    // layer's routed experts and router (routed_experts_shipped), or the matrices of one layer
    // the CPU holds (linear_shipped, swiglu_ffn_shipped); 0: none.
    uint64_t prompt_staging = 0;
    // How it computes (tuning.h): which kernels, launch styles and task splits.
    Tuning tuning;
};

// Memory for the GPU level of the expert cache (engine/vram_expert_cache.h): entries of one routed
// expert each, filled from host memory on a copy engine beside compute. An entry holds the
// expert's gate, up and down matrices, each at an offset aligned to kExpertEntryAlign
// (expert_entry_bytes). Every Backend is one (the CPU's keeps none); the level sees only this.
class ExpertEntryMemory {
  public:
    virtual ~ExpertEntryMemory() = default;
    // Allocates `entries` entries of `entry_bytes` once. An error where the backend keeps none
    // (the CPU's) or its memory does not hold them.
    virtual Result<void> reserve_expert_entries(uint64_t entry_bytes, uint32_t entries) = 0;
    // Queues a copy of `from` (host memory, unchanged until the copy lands) into entry `entry`,
    // after every operation queued so far (which may still read the entry's old expert), and
    // returns the view of the entry, to compute with once expert_entry_ready says so.
    virtual Result<ExpertView> load_expert_entry(uint32_t entry, const ExpertView& from) = 0;
    // True once the entry's last copy has landed (never waits).
    virtual bool expert_entry_ready(uint32_t entry) = 0;
    // Waits until every copy queued has landed: their host memory may be reused after.
    virtual void wait_expert_loads() = 0;
};

class Backend : public ExpertEntryMemory {
  public:
    ~Backend() override = default;

    // "cpu", "cuda:0", ...
    virtual std::string_view name() const = 0;

    // --- What a tier planner asks.
    // True when the backend computes `op` on weights of `type`.
    virtual bool supports(BackendOp op, TensorType type) const = 0;
    // True when its kernels can read weights in memory of this kind in place.
    virtual bool can_read(MemoryPlace where) const = 0;
    // Bytes per second it reads weights from `where` at (0: it cannot): what a byte costs it.
    virtual double read_bandwidth(MemoryPlace where) const = 0;
    // Where bytes streamed for it should land: host RAM for the CPU, pinned RAM for a GPU.
    virtual MemoryKind staging_memory() const = 0;

    // --- Activations in and out, n rows of `cols` floats in host memory (rows packed, as the
    // operations write them: Q of a layer is n_head_at(layer) x head_dim_k wide): the hidden
    // state between two backends' layers, a layer's normalized input and routed experts' output
    // when another backend computes its experts, the inputs and outputs of projections another
    // backend computes (linear_shipped).
    virtual void write_act(Act a, const float* x, int64_t n, int64_t cols) = 0;
    virtual void read_act(Act a, float* x, int64_t n, int64_t cols) = 0;
    // The first `rows` rows of an activation, readable on the host (a copy where it must be),
    // valid until the next operation. For debug dumps: never on the hot path.
    virtual const float* peek(Act a, int64_t rows) = 0;

    // --- The operations. n is the batch's token count (<= max_batch); `runs` say which
    // sequence and position each row is (they cover rows 0..n-1 in order). Row-wise operations
    // read and write rows 0..n-1 of their activations.

    // Hidden = rows `tokens` of the embedding table.
    virtual void embed(const TensorView& table, std::span<const int32_t> tokens) = 0;
    // out = in / rms(in) * weight (per row; eps from the model).
    virtual void rms_norm(Act in, const TensorView& weight, Act out, int64_t n) = 0;
    // Several projections of the same input as one job (q, k and v; gate and up).
    virtual void linear(std::span<const LinearJob> jobs, Act in, int64_t n) = 0;
    // Per-head RMS norms of Q and K when the layer has them (absent views: none), rotary
    // position embedding of Q and K, and K and V stored in the layer's KV cache of each row's
    // sequence.
    virtual void rope_store_kv(int layer, const TensorView& q_norm, const TensorView& k_norm,
                               std::span<const SeqRun> runs) = 0;
    // AttnOut = causal attention of Q over the layer's cached keys and values, each row over its
    // own sequence's.
    virtual void attention(int layer, std::span<const SeqRun> runs) = 0;
    // out = down(silu(gate in) * up in).
    virtual void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                            Act in, Act out, int64_t n) = 0;
    // Each row of `rows` scaled by sigmoid(gate . in) (gate: one row of n_embd).
    virtual void sigmoid_gate(const TensorView& gate, Act in, Act rows, int64_t n) = 0;
    // into += from (the residual add, and summing block outputs).
    virtual void add(Act into, Act from, int64_t n) = 0;
    // out = rows first_row.. of `in` times W^T, into host memory (router logits, rows x W.rows()).
    virtual void project_to_host(const TensorView& w, Act in, int64_t first_row, int64_t rows,
                                 float* out) = 0;
    // Both projections of the same rows (a layer's router and the next layer's, applied early):
    // a backend may read `in` once and run them as one job. By default one after the other.
    virtual void project_pair_to_host(const TensorView& a, const TensorView& b, Act in,
                                      int64_t first_row, int64_t rows, float* out_a, float* out_b) {
        project_to_host(a, in, first_row, rows, out_a);
        project_to_host(b, in, first_row, rows, out_b);
    }

    // Routed experts for a batch of n tokens with k choices each: begin_experts, then one
    // `expert` call for each chosen expert with the (token * k + choice) slots that chose it and
    // their routing weights, then end_experts, which writes the weighted sum of each token's k
    // outputs (summed in choice order) to `out`. With `some_slots`, the calls cover only some of
    // the slots (the others computed elsewhere, as the GPU's cached experts beside the CPU's):
    // the slots no call covers count as zero in the sum.
    virtual void begin_experts(int64_t n, int k, bool some_slots) = 0;
    virtual void expert(const ExpertView& e, std::span<const int64_t> slots,
                        std::span<const float> weights, Act in) = 0;
    // Every chosen expert at once, between begin_experts and end_experts, for experts whose
    // views all stay valid until end_experts (a resident store's): a backend may run them as one
    // job instead of one per expert. The same results as expert() on each in turn, which is
    // what it does by default.
    virtual void experts(std::span<const ExpertJob> jobs, Act in) {
        for (const ExpertJob& j : jobs) expert(j.expert, j.slots, j.weights, in);
    }
    // experts(), with `beside`: host work the calling thread does while the backend's own
    // workers start on the jobs (the CPU's pool, which the caller joins once it is done), so
    // that it costs the step no time of its own. By default it runs first.
    virtual void experts_beside(std::span<const ExpertJob> jobs, Act in,
                                FunctionRef<void()> beside) {
        beside();
        experts(jobs, in);
    }
    virtual void end_experts(Act out, int64_t n) = 0;

    // Routing and experts in one operation, for a layer whose experts all lie where this
    // backend reads them (a resident MoE layer on a GPU), so the router's choices never leave
    // the device: router logits, softmax, the top k (lower id first on ties) and, with
    // norm_weights, their weights renormalised to sum 1, as engine::route_token decides; then
    // the chosen experts' SwiGLU FFNs, their weighted sum in `out`. Returns false, having done
    // nothing, when it does not take this batch: the engine then routes on the host (above).
    virtual bool routed_experts(const TensorView& router, const ExpertStack& experts, int k,
                                bool norm_weights, Act in, Act out, int64_t n) = 0;
    // routed_experts for a layer this backend runs whose router and experts lie in host RAM: it
    // copies them into its prompt staging first (BackendConfig::prompt_staging), which pays for
    // a prompt batch that uses most experts several times (the CPU computing them would take
    // longer than the bus takes to bring them). False, having done nothing, when it has no
    // staging or they do not fit it, or routed_experts would not take the batch.
    virtual bool routed_experts_shipped(const TensorView& /*router*/,
                                        const ExpertStack& /*experts*/, int /*k*/,
                                        bool /*norm_weights*/, Act /*in*/, Act /*out*/,
                                        int64_t /*n*/) {
        return false;
    }
    // linear and swiglu_ffn for a prompt batch of a layer another backend runs, whose weights
    // (and biases) lie in host RAM: copied into this backend's prompt staging first, then
    // computed as its own. The engine moves the input here and the outputs back (write_act,
    // read_act). Pays for a batch where the CPU computing those matrices takes longer than the
    // bus takes to bring them (ModelHparams::batch_ships_layers). False, having done nothing,
    // when it has no staging or they do not fit it.
    virtual bool linear_shipped(std::span<const LinearJob> /*jobs*/, Act /*in*/, int64_t /*n*/) {
        return false;
    }
    virtual bool swiglu_ffn_shipped(const TensorView& /*gate*/, const TensorView& /*up*/,
                                    const TensorView& /*down*/, Act /*in*/, Act /*out*/,
                                    int64_t /*n*/) {
        return false;
    }
    // The host tensors a prompt batch of a layer another backend runs is about to ship (its
    // matrices and biases, in the order its shipped operations use them): a backend that can
    // starts copying them all now, on its own copy engine, so the copies run beside the other
    // backend's work (the CPU's attention), and each shipped operation then waits only for its
    // own pieces. By default nothing: each shipped operation copies its own.
    virtual void ship_ahead(std::span<const TensorView* const> /*views*/) {}

    // --- ExpertEntryMemory: by default none.
    Result<void> reserve_expert_entries(uint64_t /*entry_bytes*/, uint32_t /*entries*/) override {
        return err(std::string(name()) + " keeps no expert entries");
    }
    Result<ExpertView> load_expert_entry(uint32_t /*entry*/, const ExpertView& /*from*/) override {
        return err(std::string(name()) + " keeps no expert entries");
    }
    bool expert_entry_ready(uint32_t /*entry*/) override { return false; }
    void wait_expert_loads() override {}

    // Rows first_row.. of Hidden normalised by `norm` into host memory (rows x n_embd).
    virtual void output_norm(const TensorView& norm, int64_t first_row, int64_t rows,
                             float* out) = 0;
    // Logits of rows first_row.. of Hidden: output norm, then the head, into host memory (rows x
    // head.rows()). The normalised rows are left in Normed.
    virtual void output_head(const TensorView& norm, const TensorView& head, int64_t first_row,
                             int64_t rows, float* logits) = 0;
    // The same for a head the store hands out in pieces of rows: normalize_output leaves rows
    // first_row.. of Hidden normalised in Normed; then head_logits, for each piece (vocabulary
    // rows vocab_first.. of the head), writes those columns of the logits (rows x n_vocab).
    virtual void normalize_output(const TensorView& norm, int64_t first_row, int64_t rows) = 0;
    virtual void head_logits(const TensorView& piece, int64_t vocab_first, int64_t n_vocab,
                             int64_t rows, float* logits) = 0;
};

}  // namespace strata
