// The CUDA backend's class, private to its files (the rest of the code base sees only
// make_cuda_backend, cuda_backend.h). Its methods live in one file per concern:
//   cuda_backend.cpp  construction, activations, the block operations and their launches;
//   cuda_graphs.cpp   the decode step's tape and its CUDA graphs (recording, capture, replay);
//   cuda_experts.cpp  routed experts: from the host's choices, from the expert entries, and
//                     routed on the device;
//   cuda_staging.cpp  weights staged from host memory for a prompt batch;
//   cuda_hybrid.cpp   the hybrid models' operations (Gated DeltaNet, the gated query).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/expert_entries.h"
#include "backend/cuda/kv_cache_gpu.h"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/moe_route.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/quant_matmul.h"
#include "backend/cuda/rope_kv.h"
#include "gpu/gpu.h"
#include "util/result.h"

// Its own namespace, in which the kernels' names (strata::cuda) read unqualified.
namespace strata::cuda_impl {

using namespace cuda;

// Logit rows computed and copied back at a time: bounds the device buffer for the head's output
// (rows x n_vocab floats) when a whole batch's logits are asked for.
inline constexpr int64_t kLogitRowsPerChunk = 16;

struct GpuShapes {
    int64_t rows = 0;  // batch rows
    int64_t d = 0, q = 0, k = 0, v = 0, attn = 0, ff = 0;
    // Hybrid models (0 for others): Act::Mixed, Act::Gate, Act::Beta and Act::Alpha, and
    // Act::Fused (qwen3next).
    int64_t mixed = 0, gate = 0, v_heads = 0, fused = 0;
    // Latent-attention models (0 for others): Act::QLatent and Act::KvLatent.
    int64_t q_latent = 0, kv_latent = 0;
    int64_t n_expert_used = 0;
    int64_t max_cols = 0, max_weight = 0;
};

// The operations a decode step is made of, recorded instead of launched (see CudaBackend's
// comment on graphs). A record holds everything its launch needs; position and token are read
// from device memory, so a recorded step replays unchanged at any position.
enum class OpKind : uint8_t {
    Embed,
    RmsNorm,
    Linear,
    RopeStoreKv,
    Attention,
    Ffn,
    SigmoidGate,
    Add,
    Head,
    Experts,  // routed on the device: router, top-k, the chosen experts, their weighted sum
    // Hybrid models (cuda_hybrid.cpp):
    SplitQueryGate,  // Mixed -> Q and Gate
    SigmoidMul,      // a *= sigmoid(b) over `cols` values of n rows
    DeltaNet,        // a run of a sequence (seq, row0, n): w0..w3 conv1d, dt_bias, a, norm
    UngroupColumns,  // a's rows of `cols` groups of `parts` into the parts' activations
    // Latent-attention models (cuda_mla.cpp):
    MlaNorms,      // QLatent's rows with w0 (when present), KvLatent's latents with w1
    MlaRopeStore,  // a run (seq, row0, n): Q's rotary parts and KvLatent's rows, cached
    MlaAttention   // a chunk of a run: w0 w1 attn_k_b attn_v_b, or w2 attn_kv_b
};

// The most projections of one input a Linear record holds (q, k and v).
inline constexpr size_t kMaxJobs = 3;

struct Record {
    OpKind kind{};
    Act a{}, b{};  // input and output activations
    int layer = 0;
    int64_t n = 0;
    TensorView w0, w1, w2;  // weights (zeroed when unused)
    // Linear: the outputs of w0, w1, w2 (b is outs[0]) and their biases (null when none).
    std::array<Act, kMaxJobs> outs{};
    std::array<const float*, kMaxJobs> biases{};
    // Experts: w0 the router, w1 w2 w3 expert 0's gate, up and down, the strides to the next
    // expert, the number of experts and k.
    TensorView w3{};
    std::array<size_t, 3> strides{};
    int n_expert = 0, k = 0;
    // Experts: the router's bias is biases[0]; how the chosen experts and weights come from its
    // logits, the experts' biases (none where null) and the activation joining gate and up.
    RouteSpec route{};
    ExpertBiases expert_biases{};
    Glu glu{};
    // RopeStoreKv, Attention: the sequence whose KV cache the rows use, and the first row.
    int seq = 0;
    int64_t row0 = 0;
    int64_t cols = 0;  // SigmoidMul: values per row; UngroupColumns: groups per row
    std::array<ColumnPart, kMaxColumnParts> parts{};  // UngroupColumns (width 0: unused)
};

// The weights of a record, in order.
inline constexpr TensorView Record::*kWeights[kMaxJobs] = {&Record::w0, &Record::w1, &Record::w2};

// The device-side parameters of a step: what changes from one decode step to the next.
struct StepParams {
    int32_t pos = 0;    // position of the batch's first token
    int32_t token = 0;  // the token of a one-token step
};

// Ops a decode step may hold before it must run (a guard against a caller that never syncs).
inline constexpr size_t kMaxTape = 16384;
// Graphs kept for replay: a split step's tapes (two per layer at most) of the largest models.
inline constexpr size_t kMaxGraphs = 512;

// CUDA graphs: a decode step (a batch of one token) is a few hundred small kernels, and
// launching them one by one costs more than some of them take. So a one-token batch is recorded
// (the ops append to a tape and launch nothing) until the host needs a result (logits, router
// logits, the hidden state); then the tape runs. A one-token batch whose hidden state (or its
// experts' output) arrives from another backend is recorded from there on too. When the tape is
// one run before (the same ops on the same weights: every decode step of a resident model is
// one tape, a step of a model split with the CPU a few, one between each two crossings), the
// graph captured from it is replayed with a new position and token; otherwise the tape is
// captured into a new graph first, kept beside the others (the least recently used goes past
// kMaxGraphs). Tuning::cuda_graphs false (and STRATA_CUDA_PROFILE=1, which times every op)
// launches the tape's ops directly instead (CudaBackend::use_graphs_). Either way the tape is
// launched as a whole, so ops that fuse with their neighbour (a residual add and the next norm) run
// as one kernel.

class CudaBackend final : public Backend {
  public:
    CudaBackend(const BackendConfig& config, int device)
        : hp_(config.hp),
          device_(device),
          use_graphs_(config.tuning.cuda_graphs && !OpProfile::requested()),
          pdl_(config.tuning.pdl) {
        name_ = "cuda:" + std::to_string(device);
    }

    Result<void> init(const BackendConfig& config);
    ~CudaBackend() override;

    // ---- activations and block operations (cuda_backend.cpp)

    std::string_view name() const override { return name_; }

    bool can_read(MemoryPlace where) const override {
        return where.kind == MemoryKind::Device && where.device == device_;
    }

    void write_act(Act a, const float* x, int64_t n, int64_t cols) override;
    void read_act(Act a, float* x, int64_t n, int64_t cols) override;
    const float* peek(Act a, int64_t rows) override;

    void embed(const TensorView& table, std::span<const int32_t> tokens) override;
    void rms_norm(Act in, const TensorView& weight, Act out, int64_t n) override;
    void linear(std::span<const LinearJob> jobs, Act in, int64_t n) override;
    // One op per sequence of the batch, each at its own position (a decode step is one).
    void rope_store_kv(int layer, const TensorView& qn, const TensorView& kn,
                       std::span<const SeqRun> runs) override;
    void attention(int layer, const TensorView& sinks, std::span<const SeqRun> runs) override;
    void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down, Act in,
                    Act out, int64_t n) override;
    void sigmoid_gate(const TensorView& gate, Act in, Act rows, int64_t n) override;
    void add(Act into, Act from, int64_t n) override;
    // ---- hybrid models (cuda_hybrid.cpp)
    void split_query_gate(int layer, int64_t n) override;
    void sigmoid_mul(Act rows, Act gate, int64_t cols, int64_t n) override;
    void ungroup_columns(Act from, int64_t groups, std::span<const ColumnPart> parts,
                         int64_t n) override;
    // One record per run: the convolution and the delta rule over the sequence's state in its
    // KV cache (kv_cache_gpu.h), captured in a decode step's graph like attention.
    void delta_net(int layer, const DeltaNetWeights& w, std::span<const SeqRun> runs) override;
    void reset_recurrent(int seq) override;
    // ---- latent attention (cuda_mla.cpp)
    void mla_latent_norms(const TensorView& q_norm, const TensorView& kv_norm, int64_t n) override;
    void mla_attention(int layer, const MlaWeights& w, std::span<const SeqRun> runs) override;
    void project_to_host(std::span<const HostProjection> jobs, Act in, int64_t first_row,
                         int64_t rows) override;
    void normalize_output(const TensorView& norm, int64_t first_row, int64_t rows) override;
    void head_logits(const TensorView& piece, int64_t vocab_first, int64_t n_vocab, int64_t rows,
                     float* logits) override;

    // ---- routed experts (cuda_experts.cpp)

    void begin_experts(int64_t n, int k, bool some_slots) override;
    ExpertEntryMemory* expert_entry_memory() override { return &entry_memory_; }
    void expert(const ExpertView& e, std::span<const int64_t> slots, std::span<const float> weights,
                Act in) override;
    // Experts in the expert entries, all of one layer (one shape and types), as one job: every
    // slot's entry, position and weight copied in once, then the int8 matvec for all the slots
    // at once (matvec_q8.h) and their weighted scatter. Others one by one.
    void experts(std::span<const ExpertJob> jobs, Act in, FunctionRef<void()> beside) override;
    void end_experts(Act out, int64_t n) override;
    bool routed_experts(const TensorView& router, const TensorView& router_bias,
                        const TensorView& selection_bias, const ExpertStack& experts, int k,
                        bool norm_weights, Act in, Act out, int64_t n) override;

    // ---- weights staged for a prompt batch (cuda_staging.cpp)

    // The pieces copied in one go on copy_stream_, each followed by its event; an operation that
    // reads a staged view has the stream wait for that piece's event (await_staged).
    bool stage(std::span<const StagePiece> pieces, std::span<TensorView> staged) override;

  private:
    // ---- device memory and small accessors

    static size_t bytes(int64_t floats) { return sizeof(float) * size_t(floats); }
    Result<gpu::DeviceBuffer> floats(int64_t count) {
        return gpu::DeviceBuffer::allocate(bytes(std::max<int64_t>(1, count)), device_);
    }
    Result<gpu::DeviceBuffer> ints(int64_t count) {
        return gpu::DeviceBuffer::allocate(sizeof(int32_t) * size_t(std::max<int64_t>(1, count)),
                                           device_);
    }
    static float* dev(const gpu::DeviceBuffer& b) { return reinterpret_cast<float*>(b.data()); }
    float* act(Act a) const { return dev(acts_[size_t(a)]); }
    // Floats per row of each activation.
    int64_t act_cols(Act a) const;
    float* scalar() const { return dev(scalar_); }
    float* host_out() const { return dev(host_out_); }
    StepParams* step_dev() const { return reinterpret_cast<StepParams*>(step_.data()); }
    StepParams& step_host() { return *reinterpret_cast<StepParams*>(step_pinned_.data()); }
    const int32_t* position() const { return &step_dev()->pos; }

    // ---- launching ops (cuda_backend.cpp)

    // Launches one op on the stream. A recorded op (replayable in a graph) takes the token and
    // the position from the step parameters, and attention is sized for the whole context.
    // `quantized`: the op's input is already quantized as that type for the int8 matvec (by the
    // norm ahead of it, which also writes `q8` when given).
    void launch(const Record& r, bool recorded, TensorType quantized = TensorType::F32,
                cuda::Q8Rows q8 = {});

    // An op launched outside the recorded kinds, timed like them when profiling.
    template <typename F>
    void profiled(const char* what, const TensorView& w, int64_t n, F&& f) {
        if (!profile_) {
            f();
            return;
        }
        profile_->begin(stream_);
        f();
        std::string name = std::string(what) + " " + std::string(tensor_type_name(w.type)) + " " +
                           std::to_string(w.ne[0]) + "x" + std::to_string(w.rows()) +
                           (n == 1 ? " n=1" : " n>1");
        profile_->end(stream_, std::move(name), view_bytes(w) * (what[0] == 'e' ? 3 : 1));
    }

    static uint64_t view_bytes(const TensorView& t) {
        return t.present() ? uint64_t(t.row_bytes) * uint64_t(t.rows()) : 0;
    }
    static uint64_t weight_bytes(const Record& r);
    std::string profile_name(const Record& r) const;
    void launch_op(const Record& r, bool recorded, TensorType quantized, cuda::Q8Rows q8);

    void to_host(float* dst, const float* src, int64_t count);
    // The hybrid models' records (cuda_hybrid.cpp).
    void launch_hybrid(const Record& r);
    // The latent-attention records (cuda_mla.cpp).
    void launch_mla(const Record& r, bool recorded);
    void expect_device(const TensorView& t) const;
    // out = down(glu(gate x + gate_bias, up x + up_bias)) + down_bias (null biases: none).
    void ffn(const TensorView& gate, const TensorView& up, const TensorView& down, const float* x,
             float* out, int64_t n, TensorType quantized = TensorType::F32,
             const float* gate_bias = nullptr, const float* up_bias = nullptr,
             const float* down_bias = nullptr, Glu glu = {});

    // ---- the decode step's tape and its graphs (cuda_graphs.cpp)

    // The position kernels read (StepParams::pos on the device). A recorded step carries it in
    // the step parameters copied in when the graph runs; a direct launch sets it once per batch,
    // in stream order.
    void position_is(int64_t pos0);
    void add_record(const Record& r);
    // An op: recorded during a decode step, launched at once otherwise.
    void run(const Record& r);

    struct Graph {
        std::vector<Record> tape;  // what it was captured from
        cudaGraphExec_t exec = nullptr;
        uint64_t used = 0;  // graph_clock_ at its last replay
    };

    // Runs what was recorded: the cached graph when the tape is the one it was captured from,
    // else a graph captured from it now (or, with graphs off, the tape's launches one by one).
    void flush();
    // A graph of the tape, kept for replay in place of the least recently used one when
    // kMaxGraphs are kept.
    Graph& capture();
    // The launches of a recorded step: its parameters copied in, then its ops, the ones that
    // fuse with the next taken together.
    void launch_tape();
    // The activation type `next` quantizes the norm's output to for the int8 matvec, when it
    // is the norm's only reader among the ops that follow (a projection or FFN right after it);
    // F32 otherwise.
    TensorType quantized_after(const Record& norm, const Record* next) const;
    // A residual add followed by the norm of the sum (every block boundary of a decode step):
    // one kernel does both.
    static bool fuses_into_norm(const Record& add, const Record* norm);
    void launch_add_norm(const Record& add, const Record& norm, cuda::Q8Rows q8);

    // ---- routed experts (cuda_experts.cpp)

    void zero_slots();
    bool entries_job(std::span<const ExpertJob> jobs, Act in);
    // The conditions of routed_experts but where the weights lie.
    bool takes_routing(const TensorView& router, const TensorView& router_bias,
                       const TensorView& selection_bias, const ExpertStack& experts, int k,
                       int64_t n) const;
    // Routing and experts on the device (routed_experts): the router's logits, each token's
    // top k, then for one token its k experts directly; for a batch the n * k slots grouped by
    // expert, each expert's slots multiplied as one int8 tensor-core GEMM per matrix (or, for
    // types it does not take, slot by slot with int8 matvecs), and scattered back weighted.
    void routed(const Record& r);

    // ---- weights staged for a prompt batch (cuda_staging.cpp)

    static size_t matrix_bytes(const TensorView& v) { return v.row_bytes * size_t(v.rows()); }

    static size_t aligned(size_t bytes) {
        return (bytes + kStageAlign - 1) / kStageAlign * kStageAlign;
    }

    // Has the stream wait for the copy of `v` when it is a staged piece whose copy it has not
    // waited for yet; nothing for any other view (a pointer comparison).
    void await_staged(const TensorView& v);

    // ---- state

    ModelHparams hp_;
    int device_ = 0;
    bool use_graphs_;  // a decode step's tape replays as a CUDA graph (Tuning::cuda_graphs)
    Pdl pdl_;          // how its kernels launch (Tuning::pdl)
    Glu glu_{};        // the routed experts' activation (hp_.expert_activation)
    std::string name_;
    GpuShapes shapes_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t staging_free_ = nullptr;
    std::vector<GpuKvCache> kvs_;  // one per sequence
    GpuRope rope_;
    GpuAttention attention_;
    std::unique_ptr<Matmul> matmul_;
    std::array<gpu::DeviceBuffer, size_t(Act::Count)> acts_;
    gpu::DeviceBuffer gate_, up_, scalar_, host_out_, ids_, step_;
    // Latent attention: a chunk's queries in the latent's space, its latent outputs, and the
    // attention's split partials (mla.h).
    gpu::DeviceBuffer mla_q_, mla_o_, mla_scratch_;
    // Staging (stage): a layer's router and routed experts, or the matrices and biases of a layer
    // another backend runs, copied from host RAM for a prompt batch. staged_done_[i] follows
    // piece i's copy on copy_stream_, and staging_read_ the kernels that read the staging before.
    static constexpr size_t kStageAlign = 256;
    static constexpr size_t kMaxStaged = 16;  // a layer's matrices and biases, with room
    struct Staged {
        const std::byte* at;
        bool awaited;
    };
    gpu::DeviceBuffer staging_;
    std::vector<Staged> staged_pieces_;
    std::array<cudaEvent_t, kMaxStaged> staged_done_{};
    cudaStream_t copy_stream_ = nullptr;
    cudaEvent_t staging_read_ = nullptr;
    gpu::PinnedBuffer step_pinned_;
    uint32_t n_ctx_ = 0;
    bool recording_ = false;
    std::vector<Record> tape_;
    std::deque<Graph> graphs_;  // a deque: references stay valid as it grows
    uint64_t graph_clock_ = 0, graphs_captured_ = 0;
    std::unique_ptr<OpProfile> profile_;
    gpu::DeviceBuffer slot_out_, x_rows_, y_rows_, slot_ids_, slot_weights_;
    gpu::DeviceBuffer router_logits_, choice_, choice_weights_, grouped_ids_, grouped_x_, moe_h_,
        moe_u_, moe_y_, moe_scratch_, moe_tiles_;
    gpu::PinnedBuffer logits_pinned_, slot_staging_;
    // entries_job's experts' bias rows, per slot (host staging and device copy).
    gpu::PinnedBuffer bias_staging_;
    gpu::DeviceBuffer bias_ids_;
    int64_t pos_set_ = -1;
    int experts_k_ = 1;
    int64_t experts_n_ = 0, staged_ = 0;
    bool zero_slots_ = false;  // begin_experts' some_slots, until slot_out_ is zeroed
    int64_t direct_ = 0;       // entries_job's outputs summed directly by end_experts (0: none)
    std::vector<float> peeked_;
    // The GPU level of the expert cache's memory (declared last: freed first): entries loaded on
    // their own copy stream, each load after every kernel queued so far on this backend's
    // stream (which may still read the entry's old expert).
    class EntryMemory final : public ExpertEntryMemory {
      public:
        explicit EntryMemory(CudaBackend& b) : b_(b) {}
        Result<void> reserve_expert_entries(uint64_t entry_bytes, uint32_t entries) override {
            return b_.entries_.allocate(entry_bytes, entries, b_.device_);
        }
        Result<ExpertView> load_expert_entry(uint32_t entry, const ExpertView& from) override {
            b_.flush();  // the loads follow every kernel queued so far, recorded ones too
            return b_.entries_.load(entry, from, b_.stream_);
        }
        bool expert_entry_ready(uint32_t entry) override { return b_.entries_.ready(entry); }
        void wait_expert_loads() override { b_.entries_.wait(); }

      private:
        CudaBackend& b_;
    };
    ExpertEntries entries_;
    EntryMemory entry_memory_{*this};
};

}  // namespace strata::cuda_impl
