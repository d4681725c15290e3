// The forward pass: token ids in, logits out, with the KV cache carrying the context from one
// call to the next.
//
// The engine is the model-order driver. It decides what happens and in which order: the layer
// structure of each architecture family (one short function each, engine/families.cpp, composed
// of the blocks below), the store protocol (every layer's weights come from the WeightStore just
// before the layer runs and are released after it; experts are asked for one by one after
// routing, so the same forward pass serves every residency mode), the routing decisions of MoE
// layers, statistics and the debug dump's names. The arithmetic is a Backend's
// (backend/backend.h): each layer runs on the backend the options assign it, and between two
// backends only the hidden state moves. Prompts are evaluated in batches of up to max_batch
// tokens, generation one token at a time.
//
// An engine holds n_seq sequences, each with its own context (KV cache) of n_ctx positions.
// eval() continues one of them; eval_sequences() continues several in one forward pass, so that
// each weight read serves all of them (continuous batching): rows of one sequence never see
// another's keys, and each row's arithmetic is the same as in a batch of its own.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/debug_dump.h"
#include "engine/routing.h"
#include "gpu/gpu.h"
#include "model/hparams.h"
#include "model/kv_layout.h"
#include "model/rope.h"
#include "plan/execution_table.h"
#include "store/weight_store.h"
#include "util/result.h"

namespace strata::engine {

struct EngineOptions {
    uint32_t n_ctx = 0;  // 0: the model's training context, capped at kDefaultContextCap
    uint32_t n_seq = 1;  // sequences, each with a KV cache of n_ctx positions
    KvType kv_type = KvType::F16;
    int threads = 0;           // 0: physical cores
    uint32_t max_batch = 512;  // prompt tokens evaluated together
    std::string dump_dir;      // non-empty: write named activations there (debug_dump.h)
    // Benchmarks of expert streaming: replay this routing instead of the router's (the output is
    // then not the model's; routing_trace.h).
    std::shared_ptr<const RoutingTrace> forced_routing;
    // Where every block runs (plan/execution_table.h): the compute units, one backend each, and
    // per layer which unit computes what, for decode and for prompt batches. No units: one CPU
    // for everything.
    ExecutionTable execution;
    // How the backends compute (backend/tuning.h), given to each; also the guesses of the next
    // layer's experts the GPU level copies ahead (Tuning::gpu_expert_prefetch).
    Tuning tuning;
    // The CPU kernels the profile measured fastest (backend/kernel_choice.h; the plan's), given
    // to each backend; empty: the best path the CPU runs.
    CpuKernelTable cpu_kernels;
};

// Where the time of a forward pass goes, by kind of operator.
enum class Op { Projection, Attention, Ffn, Experts, Router, LmHead, Elementwise, Count };
const char* op_name(Op op);

// One kind of operator's share of the forward passes: wall time on the host (a GPU backend's
// asynchronous ops show where the host waited), the weight (or KV-cache) bytes it read, and its
// multiply-adds counted as 2 flops each.
struct OpFigures {
    double seconds = 0;
    double bytes = 0;
    double flops = 0;
    OpFigures& operator+=(const OpFigures& o) {
        seconds += o.seconds;
        bytes += o.bytes;
        flops += o.flops;
        return *this;
    }
    OpFigures operator-(const OpFigures& o) const {
        return {seconds - o.seconds, bytes - o.bytes, flops - o.flops};
    }
};

using OpTable = std::array<OpFigures, size_t(Op::Count)>;

struct EngineStats {
    uint64_t tokens = 0;  // tokens evaluated
    uint64_t eval_calls = 0;
    uint64_t weight_bytes = 0;  // weight bytes the forward passes read (store + LM head + rows)
    // Weights' bytes staged from RAM onto the unit that computes them, for prompt batches
    // (Backend::stage).
    uint64_t staged_bytes = 0;
    OpTable ops{};
    std::vector<MoeLayerStats> moe;  // per layer, empty for dense models
};

// Last: the logits of the last token; All: every token's, row after row; Hidden: no logits but
// every token's final hidden state after the output norm (n_embd floats a token), what an
// embedding is pooled from.
enum class LogitsWanted { Last, All, Hidden };

class Engine;
// One layer's evaluation as the family functions see it.
struct LayerArgs {
    int layer;
    const LayerView& w;
    int64_t n;                     // tokens in the batch
    std::span<const SeqRun> runs;  // whose they are and at which positions
};

// One sequence's part of a multi-sequence evaluation.
struct SeqTokens {
    int seq = 0;
    std::span<const int32_t> tokens;
    bool logits = false;  // hand out the logits of its last token
    // Set: the final hidden state of each of its tokens (after the output norm, n_embd floats a
    // token, as LogitsWanted::Hidden gives) is written here in order: what an embedding pools.
    float* hidden = nullptr;
};
using LayerFn = Result<void> (*)(Engine&, const LayerArgs&);

// Creates the backend of one compute unit: the front end's (it knows which backends this build
// has), so that the engine names none of them.
using BackendFactory = Result<std::unique_ptr<Backend>> (*)(const ComputeUnit&,
                                                            const BackendConfig&);

class Engine {
  public:
    // One backend per unit of options.execution, from `make_backend`.
    static Result<std::unique_ptr<Engine>> create(const ModelHparams& hp, WeightStore& store,
                                                  const EngineOptions& options,
                                                  BackendFactory make_backend);

    // Evaluates `tokens` at positions n_past() ... and appends them to the context. `logits`
    // receives n_vocab floats: for the last token (Last), or for every token, row after row
    // (All); or n_embd floats a token (Hidden). An error when the context has no room for them
    // (nothing is evaluated then).
    // `seq` picks the sequence (0 .. n_seq-1).
    Result<void> eval(std::span<const int32_t> tokens, LogitsWanted wanted,
                      std::vector<float>& logits, int seq = 0);
    // Evaluates several sequences' tokens together (at most one entry per sequence), each
    // appended to its own context; `logits` receives n_vocab floats for each entry that asks, in
    // entry order, and an entry's `hidden` its tokens' hidden states. More than max_batch tokens
    // in all are evaluated in several passes, in entry order. An error (a full context, a bad id)
    // evaluates nothing and changes no context.
    Result<void> eval_sequences(std::span<const SeqTokens> inputs, std::vector<float>& logits);

    // Whether sequence `seq` can take `tokens` now (it exists, its context has room, the ids are
    // in the vocabulary): the error eval would give, without evaluating anything.
    Result<void> check_room(std::span<const int32_t> tokens, int seq) const;

    uint32_t n_past(int seq = 0) const { return n_past_[size_t(seq)]; }
    // Forgets every position of sequence `seq` from n_keep on (a new chat turn reusing a common
    // prefix, a new perplexity chunk with 0) and returns the positions kept: n_keep (or fewer when
    // the sequence has fewer), or 0 where what the model keeps cannot be cut there: a hybrid
    // model's recurrent state holds the whole context in a fixed size and cannot be rolled back
    // (it keeps a prefix only when that prefix is the whole context so far), and a
    // sliding-window layer's ring may already have overwritten part of the window before n_keep.
    // With 0 the sequence starts again, state and all, and the caller evaluates the prompt from
    // its start.
    uint32_t truncate(uint32_t n_keep, int seq = 0);

    uint32_t n_seq() const { return uint32_t(n_past_.size()); }
    uint32_t max_batch() const { return max_batch_; }
    uint32_t n_ctx() const { return n_ctx_; }
    uint32_t n_vocab() const { return n_vocab_; }
    int threads() const { return threads_; }
    const ModelHparams& hparams() const { return hp_; }
    WeightStore& store() { return store_; }
    const EngineStats& stats() const { return stats_; }
    void reset_stats();

    // The blocks family functions are made of. Each adds its result to the residual stream.
    // Pre-norm self-attention: norm, q/k/v (+biases), per-head q/k norms when the layer has
    // them, rope, cache, attention, output projection.
    Result<void> attention_block(const LayerArgs& a);
    // Logits of `rows` rows of the hidden state from first: the head whole, or piece by piece.
    Result<void> output_head(const TensorView& norm, int64_t first, int64_t rows, float* out);
    // Pre-norm Gated DeltaNet (hybrid models' linear attention): norm, the fused q/k/v, output
    // gate, write strength and decay projections (qwen3next's fused ones ungrouped), the
    // backend's delta_net, output projection.
    Result<void> delta_net_block(const LayerArgs& a);
    // Pre-norm multi-head latent attention (deepseek2): norm, the query's and the latent's
    // compressions, their norms, the query heads, the backend's mla_attention (rope, latent
    // cache, absorbed attention, value heads), output projection.
    Result<void> mla_attention_block(const LayerArgs& a);
    // Pre-norm SwiGLU FFN.
    Result<void> dense_ffn_block(const LayerArgs& a);
    // Pre-norm mixture of experts, plus the sigmoid-gated shared expert when the layer has one.
    Result<void> moe_ffn_block(const LayerArgs& a, bool norm_weights);

  private:
    Engine(const ModelHparams& hp, WeightStore& store, const EngineOptions& options);
    Result<void> eval_batch(std::span<const int32_t> tokens, LogitsWanted wanted, float* out,
                            int seq);
    // Embedding and layers of a batch whose rows `runs` describe; each run's sequence advances.
    Result<void> forward(std::span<const int32_t> tokens, std::span<const SeqRun> runs);
    // Weight bytes of a batch of n tokens since `served_before` (the store's count then), with
    // `heads` passes over the LM head.
    void count_batch(int64_t n, uint64_t served_before, int heads);
    // The backend of compute unit u.
    Backend* unit(int u) const { return backends_[size_t(u)].get(); }
    // Checks that each unit the table names can read what it computes where the store keeps it.
    Result<void> check_readers() const;
    // Moves the hidden state of n tokens to `next` when it is not there.
    void switch_to(Backend* next, int64_t n);
    // Moves rows 0..n-1 of `a` (cols wide; 0: n_embd) from one backend to another.
    void cross(Act a, Backend* from, Backend* to, int64_t n, int64_t cols = 0);
    // Normed = RMSNorm(Hidden) with the layer's ffn_norm (post_attention_norm where the family
    // names it so).
    void ffn_norm(const LayerArgs& a);
    // Sequence `seq` starts again: no positions, and every backend's recurrent state forgotten.
    void restart_sequence(int seq);

    // --- Staging (execution_table.h's PromptStaging): a prompt batch's matrices computed on the
    // unit that takes them, with their weights staged there.
    // Stages the layer's projections and FFN matrices (and biases) on `on` (staged_layer_);
    // false when it does not take them (they are then computed where they lie).
    bool stage_matrices(Backend* on, const LayerView& w);
    // The projections `jobs` of the batch: on staged_on_ with their staged weights when the
    // layer's matrices are staged (`in`, in_cols wide, crosses to it and each output back,
    // out_cols[j] wide), else on the layer's backend.
    void project(std::span<const LinearJob> jobs, Act in, int64_t in_cols,
                 std::span<const int64_t> out_cols, int64_t n);
    // The weights a staged operation reads: the staged copy of `v` (a view into w) when the
    // layer's matrices are staged, else v.
    const TensorView& staged(const LayerView& w, const TensorView& v) const;
    // A prompt batch's router and routed experts staged on the unit the table names and routed
    // and computed there; false when it does not take them.
    bool staged_experts(const LayerArgs& a, const TensorView& router, bool norm_weights);

    // --- Routed experts (engine/experts.cpp).
    // Sizes the routing scratch and sets up the GPU level of the expert cache the table asks for.
    Result<void> set_up_experts(const EngineOptions& options);
    Result<void> routed_experts(const LayerArgs& a, const TensorView& router, bool norm_weights);
    // The chosen experts (jobs_, expert_ids_) of a layer whose experts `xb` computes: those the
    // GPU level serves on its GPU, the rest on xb, their sum in be_'s Out.
    // `split`: the GPU level serves some (gpu_views_, by job).
    Result<void> compute_experts(int layer, int64_t n, int k, Backend* xb, bool together,
                                 bool split);
    // The router of layer + 1 when the store wants guesses of its experts and rb can apply it to
    // the last token's input of this layer (rb's Normed, into next_logits_; guessing_); null
    // otherwise.
    const TensorView* next_router(int layer, int64_t n, Backend* rb);
    void dump(std::string_view name, int layer, Act a, int64_t rows, int64_t cols);
    // Runs f and counts its time, and the bytes and flops given, against `op`.
    template <typename F>
    void timed(Op op, F&& f, double bytes = 0, double flops = 0);

    ModelHparams hp_;
    WeightStore& store_;
    ExecutionTable table_;
    std::vector<std::unique_ptr<Backend>> backends_;  // one per compute unit
    Backend* be_ = nullptr;                           // the backend holding the hidden state now
    // The unit computing the current prompt batch's staged matrices and their staged views
    // (stage_matrices), or null.
    Backend* staged_on_ = nullptr;
    LayerView staged_layer_;
    LayerFn layer_fn_ = nullptr;
    DebugDump dump_;
    uint32_t n_ctx_ = 0;
    uint32_t n_vocab_ = 0;
    uint32_t max_batch_ = 512;
    std::vector<int32_t> row_ids_;  // 0..max_batch-1: rows of an embedding table in batch order
    std::vector<uint32_t> n_past_;  // per sequence
    // Per sequence, one past the highest position whose keys were stored since it last started
    // over: what truncate() checks the sliding-window rings against.
    std::vector<uint32_t> kv_written_;
    KvType kv_type_ = KvType::F16;
    std::vector<int32_t> batch_tokens_;  // eval_sequences' batch, assembled
    std::vector<SeqRun> batch_runs_;
    // eval_sequences' bookkeeping, kept so that a decode step allocates nothing once warm: the
    // sequences seen in one call, their positions before it, a batch's rows with logits.
    std::vector<char> seen_;
    std::vector<std::pair<int, uint32_t>> start_;
    std::vector<int64_t> logit_rows_;
    struct HiddenRows {
        int64_t first, rows;  // of the batch
        float* out;
    };
    std::vector<HiddenRows> hidden_rows_;  // a batch's rows whose hidden states go out
    int threads_ = 0;
    std::shared_ptr<const RoutingTrace> forced_routing_;
    EngineStats stats_;

    // Host memory of the driver, sized once: routing of a batch, activations crossing between
    // backends (as wide as the widest), page-locked when a unit takes staged work (its copies
    // then run at the bus's speed).
    std::vector<float> router_logits_, crossing_;
    gpu::HostPin crossing_pin_;
    std::vector<int32_t> choice_, guess_;
    std::vector<float> weight_, guess_weight_;
    std::vector<int64_t> users_;  // the slots of each chosen expert, expert by expert
    std::vector<float> user_weights_;
    std::vector<ExpertJob> jobs_;      // the chosen experts of a layer
    std::vector<ExpertJob> cpu_jobs_;  // of those, the ones the CPU computes
    std::vector<ExpertJob> gpu_jobs_;  // and the ones the GPU level serves
    std::vector<int> expert_ids_;
    RoutingScratch routing_;
    std::vector<const ExpertView*> gpu_views_;  // per job: its GPU level entry, or null
    std::vector<float> next_logits_;  // the next layer's router on this layer's last input
    bool guessing_ = false;           // next_logits_ hold this layer's guess of the next's
};

// The layer function of an architecture family, nullptr when strata cannot run it.
LayerFn layer_function(std::string_view arch);

}  // namespace strata::engine
