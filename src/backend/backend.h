// The backend interface: what the engine computes with.
//
// The engine (engine/) drives a model in model order: embedding, then each layer's blocks, then
// the output head. A backend does the arithmetic of those blocks on memory it owns: the
// activations of the batch being evaluated (named by Act, max_batch rows each) and the KV cache
// of the layers it runs. The engine holds no activation memory of its own; between backends it
// moves activations through host memory (write_act / read_act): the hidden state between two
// backends' layers, and the inputs and outputs of operations another backend computes. Which
// backend computes what is the plan's (plan/execution_table.h); a backend only computes.
//
// The granularity is the block, not a graph IR: the operations below are the ones the
// architecture families are written in, each a whole pass over its inputs (a projection of the
// batch, a layer's attention, an FFN), so a backend can fuse within an operation and a GPU
// backend can capture a whole decode step.
//
// The CPU backend (backend/cpu/) is the reference every other backend is tested against.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/kernel_choice.h"
#include "backend/tuning.h"
#include "gguf/tensor_type.h"
#include "model/expert_entry_memory.h"
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
    // Hybrid (Gated DeltaNet) models:
    Mixed,  // a gated query (n_head x [query, gate] of head_dim_k each), or a delta-net layer's
            // q/k/v before its convolution: conv_channels()
    Gate,   // an output gate: n_head x head_dim_v (attention) or value_dim (delta net's z)
    Beta,   // the delta net's write strength before its sigmoid: n_v_heads
    Alpha,  // the delta net's decay input before softplus: n_v_heads
    // A fused projection's output before its columns are ungrouped (ungroup_columns): qwen3next's
    // ssm_in (q, k, v and z per key head: ssm_qkvz_dim()) or ssm_ba (2 n_v_heads).
    Fused,
    // Multi-head latent attention (deepseek2):
    QLatent,   // the compressed query before attn_q_b: n_lora_q
    KvLatent,  // the compressed keys and values and the shared rotary key: n_lora_kv + n_rot
    Count
};
std::string_view act_name(Act a);

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

// A Gated DeltaNet layer's small tensors (the projections are LinearJobs of the engine's):
// the convolution taps [conv_channels][d_conv], the decay bias and A (= -exp(A_log)) per value
// head, and the output norm [head size].
struct DeltaNetWeights {
    const TensorView* conv1d;
    const TensorView* dt_bias;
    const TensorView* a;
    const TensorView* norm;
};

// A latent-attention layer's per-head up-projections (ModelHparams::is_mla): attn_k_b
// [nope, n_lora_kv, n_head] and attn_v_b [n_lora_kv, head_dim_v, n_head], or attn_kv_b
// [n_lora_kv, n_head x (nope + head_dim_v)] alone (the earlier files; the others absent).
struct MlaWeights {
    const TensorView* k_b;
    const TensorView* v_b;
    const TensorView* kv_b;
};

// One part of each group of a fused projection's row (Backend::ungroup_columns): `width` columns
// that land in `to`, whose rows are `to_cols` wide, at column `to_col` + group x width.
struct ColumnPart {
    Act to{};
    int64_t width = 0;
    int64_t to_col = 0;
    int64_t to_cols = 0;
};
inline constexpr size_t kMaxColumnParts = 4;

// One chosen expert of a batch and the (token * k + choice) slots that chose it, with their
// routing weights.
struct ExpertJob {
    ExpertView expert;
    std::span<const int64_t> slots;
    std::span<const float> weights;
};

// One output of project_to_host: rows x weight->rows() floats in host memory, each plus `bias`
// (F32, where the weight lies; null or absent for none) when given.
struct HostProjection {
    const TensorView* weight;
    float* out;
    const TensorView* bias = nullptr;
};

// Host bytes a prompt batch stages onto the backend that computes them (Backend::stage): a
// tensor's rows, or a stack of experts' matrices (from the first expert's view, `bytes` long).
struct StagePiece {
    const TensorView* view;
    size_t bytes;
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
    // Room for the weights prompt batches stage here from host RAM (Backend::stage): a layer's
    // routed experts and router, or the matrices of one layer another backend runs; 0: none.
    uint64_t staging_bytes = 0;
    // How it computes (tuning.h): which kernels, launch styles and task splits.
    Tuning tuning;
    // The CPU: the kernel path per weight type and phase the profile measured (kernel_choice.h),
    // taken when tuning.cpu_path is Best; empty: the best path the CPU runs for everything.
    CpuKernelTable cpu_kernels;
};

class Backend {
  public:
    virtual ~Backend() = default;

    // "cpu", "cuda:0", ...
    virtual std::string_view name() const = 0;

    // True when its kernels can read weights in memory of this kind in place (the engine checks
    // the execution table against it once, at set-up).
    virtual bool can_read(MemoryPlace where) const = 0;

    // --- Activations in and out, n rows of `cols` floats in host memory (rows packed, as the
    // operations write them: Q of a layer is n_head_at(layer) x head_dim_k wide): the hidden
    // state between two backends' layers, a layer's normalized input and routed experts' output
    // when another backend computes its experts, the inputs and outputs of projections another
    // backend computes with weights staged there (stage).
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
    // own sequence's. `sinks` (absent: none) holds one F32 logit per query head that joins the
    // head's softmax denominator and weighs no value (gpt-oss). A layer the hparams mark as
    // windowed (ModelHparams::is_swa) lets a query at position p see only keys p - n_swa + 1 .. p,
    // and its cache need hold no more (model/kv_layout.h: kv_layer_positions, a ring).
    virtual void attention(int layer, const TensorView& sinks, std::span<const SeqRun> runs) = 0;
    // --- Hybrid models (qwen35, qwen3next). A backend that runs no recurrent layer need not
    // implement these: its factory refuses such models, and the defaults abort.
    // Q (n_head x head_dim_k) and Gate (n_head x head_dim_k) from Mixed, where each head's query
    // and gate lie side by side.
    virtual void split_query_gate(int layer, int64_t n);
    // rows[i] *= sigmoid(gate[i]) over `cols` values of each of n rows (gated attention output).
    virtual void sigmoid_mul(Act rows, Act gate, int64_t cols, int64_t n);
    // Each of n rows of `from` is `groups` groups of the parts' columns side by side, [part 0 |
    // part 1 | ...] in every group; part p of group g is copied to its activation at column
    // to_col + g x width (qwen3next's fused projections, grouped per key head, into the places
    // qwen35's separate ones fill). At most kMaxColumnParts parts; their destinations are
    // disjoint from `from` and from each other.
    virtual void ungroup_columns(Act from, int64_t groups, std::span<const ColumnPart> parts,
                                 int64_t n);
    // A Gated DeltaNet layer after its projections, per row of its sequence's run (rows of a run
    // in order, continuing that sequence's recurrent state of this layer):
    //   x   = silu(causal conv1d of Mixed over the last d_conv inputs, the state's included)
    //   q,k = L2-normalised key heads of x (eps rms_eps), v = the value heads of x
    //   g   = A * softplus(Alpha + dt_bias), beta = sigmoid(Beta)          (per value head)
    //   S   = exp(g) S;  S += beta (v - S k) k^T;  o = S q / sqrt(head size)  (value head h reads
    //                                                 key head hparams.ssm_key_head(h))
    //   AttnOut = RMSNorm(o) * norm * silu(Gate)                               (per value head)
    // A prompt's run may compute the same in chunks (a parallel form); the state afterwards is
    // the same as after its tokens one by one.
    virtual void delta_net(int layer, const DeltaNetWeights& w, std::span<const SeqRun> runs);
    // Forgets the recurrent state of sequence `seq` (every layer's), as at its first token.
    virtual void reset_recurrent(int /*seq*/) {}

    // --- Multi-head latent attention (deepseek2). A backend that runs no latent-attention layer
    // need not implement these: its factory refuses such models, and the defaults abort.
    // RMS norms in place, with the model's eps: each row of QLatent (n_lora_q values) with
    // `q_norm` when present (absent: the model has no query compression), and the latent part of
    // each row of KvLatent (its first n_lora_kv values) with `kv_norm`.
    virtual void mla_latent_norms(const TensorView& q_norm, const TensorView& kv_norm, int64_t n);
    // A latent-attention layer after its projections, Q holding each head's [nope | rope] query
    // and KvLatent the normalised latent and the rotary key. Per row of each run:
    //   the last n_rot values of each query head and the rotary key are rotated, and the row's
    //   [latent | rotary key] is cached at its position;
    //   q'(h)   = [W_uk(h)^T q_nope(h) | q_rope(h)]   (the query taken into the latent's space)
    //   o(h)    = sum_p softmax_p(scale q'(h) . c_p) latent_p   over the cached rows c_p of the
    //             sequence up to the row's position; scale = mla_attention_scale (model/rope.h)
    //   AttnOut = W_uv(h) o(h) for each head h
    // with W_uk(h), W_uv(h) head h's key and value up-projections (w). This equals attention
    // of the decompressed heads (keys [W_uk(h) latent_p | rope key], values W_uv(h) latent_p),
    // which a prompt batch may compute instead.
    virtual void mla_attention(int layer, const MlaWeights& w, std::span<const SeqRun> runs);

    // out = down(silu(gate in) * up in).
    virtual void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                            Act in, Act out, int64_t n) = 0;
    // Each row of `rows` scaled by sigmoid(gate . in) (gate: one row of n_embd).
    virtual void sigmoid_gate(const TensorView& gate, Act in, Act rows, int64_t n) = 0;
    // into += from (the residual add, and summing block outputs).
    virtual void add(Act into, Act from, int64_t n) = 0;
    // Rows first_row.. of `in` times each job's W^T, into host memory (rows x W.rows() each):
    // router logits, and with a second job the next layer's router applied early to the same
    // rows, which a backend may run as one job reading `in` once.
    virtual void project_to_host(std::span<const HostProjection> jobs, Act in, int64_t first_row,
                                 int64_t rows) = 0;

    // Routed experts for a batch of n tokens with k choices each (each expert's FFN as the hparams
    // say: expert_activation, and the biases its ExpertView carries, the down bias added before
    // the routing weight): begin_experts, then one
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
    // job instead of one per expert, with the same results as expert() on each in turn.
    // `beside` is host work the calling thread does while the backend's own workers start on the
    // jobs (the CPU's pool, which the caller joins once it is done), so that it costs the step no
    // time of its own; a backend without workers runs it first.
    virtual void experts(std::span<const ExpertJob> jobs, Act in, FunctionRef<void()> beside) = 0;
    virtual void end_experts(Act out, int64_t n) = 0;

    // Routing and experts in one operation, for a layer whose experts all lie where this
    // backend reads them (a resident MoE layer on a GPU), so the router's choices never leave
    // the device: router logits plus `router_bias` (F32, absent in most families), the gating
    // the hparams name (softmax then the top k, gpt-oss' top k then their softmax, or sigmoid
    // scores), `selection_bias` (F32, one per expert, absent in most families) added to the
    // scores to choose, group-limited top-k as the hparams say (lower id first on ties), the
    // chosen scores as weights, with norm_weights renormalised to sum 1, then times the
    // hparams' expert_weights_scale, as engine::route_token decides; then the chosen experts'
    // FFNs (the hparams' activation, the biases `experts.first` carries as expert 0's rows, each
    // next expert one bias row further), their weighted sum in `out`. Returns false, having done
    // nothing, when it does not take this batch: the engine then routes on the host (above).
    virtual bool routed_experts(const TensorView& router, const TensorView& router_bias,
                                const TensorView& selection_bias, const ExpertStack& experts, int k,
                                bool norm_weights, Act in, Act out, int64_t n) = 0;
    // --- Staging: weights a prompt batch computes here though they lie in host RAM (a layer
    // whose matrices or experts stay in RAM beside a GPU, ExecutionTable's PromptStaging). The
    // backend copies the pieces into its staging room (BackendConfig::staging_bytes) on its own
    // copy engine, so the copies run beside what it and other backends compute, and points
    // staged[i] at piece i's copy (the same type, shape and strides). An operation given a
    // staged view waits for that view's copy alone. The room holds one set at a time: a new
    // stage() first waits for the operations that read the previous one. False, having staged
    // nothing, when it has no room, the pieces do not fit it, or one is not in host memory: the
    // engine then computes them where they lie.
    virtual bool stage(std::span<const StagePiece> /*pieces*/, std::span<TensorView> /*staged*/) {
        return false;
    }

    // The memory of the GPU level of the expert cache on this backend; null where it keeps none
    // (the CPU's).
    virtual ExpertEntryMemory* expert_entry_memory() { return nullptr; }

    // The output norm and the LM head: normalize_output leaves rows first_row.. of Hidden
    // normalised in Normed; then head_logits, for a piece of the head (vocabulary rows
    // vocab_first.. of it, the whole head or one of the pieces a store hands out), writes those
    // columns of the logits into host memory (rows x n_vocab).
    virtual void normalize_output(const TensorView& norm, int64_t first_row, int64_t rows) = 0;
    virtual void head_logits(const TensorView& piece, int64_t vocab_first, int64_t n_vocab,
                             int64_t rows, float* logits) = 0;

    // Rows first_row.. of Hidden normalised by `norm` into host memory (rows x n_embd).
    void output_norm(const TensorView& norm, int64_t first_row, int64_t rows, float* out,
                     int64_t n_embd) {
        normalize_output(norm, first_row, rows);
        read_act(Act::Normed, out, rows, n_embd);
    }
    // Logits of rows first_row.. of Hidden through the whole head (rows x head.rows()).
    void output_head(const TensorView& norm, const TensorView& head, int64_t first_row,
                     int64_t rows, float* logits) {
        normalize_output(norm, first_row, rows);
        head_logits(head, 0, head.rows(), rows, logits);
    }
};

}  // namespace strata
