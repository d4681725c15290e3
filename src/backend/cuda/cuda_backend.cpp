#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string_view>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/expert_entries.h"
#include "backend/cuda/kv_cache_gpu.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/mmq.h"
#include "backend/cuda/moe_route.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/quant_matmul.h"
#include "backend/cuda/rope_kv.h"
#include "gpu/gpu.h"
#include "model/activation_memory.h"

namespace strata {

namespace {

using namespace cuda;

// Logit rows computed and copied back at a time: bounds the device buffer for the head's output
// (rows x n_vocab floats) when a whole batch's logits are asked for.
constexpr int64_t kLogitRowsPerChunk = 16;

struct GpuShapes {
    int64_t rows = 0;  // batch rows
    int64_t d = 0, q = 0, k = 0, v = 0, attn = 0, ff = 0;
    int64_t n_expert_used = 0;
    int64_t max_cols = 0, max_weight = 0;
};

GpuShapes shapes_of(const BackendConfig& c) {
    const ModelHparams& hp = c.hp;
    GpuShapes s;
    s.rows = batch_rows(c.max_batch, c.n_ctx);
    uint32_t n_head = 0, n_head_kv = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        n_head = std::max(n_head, hp.n_head_at(l));
        n_head_kv = std::max(n_head_kv, hp.n_head_kv_at(l));
    }
    s.d = hp.n_embd;
    s.q = int64_t(n_head) * hp.head_dim_k;
    s.k = int64_t(n_head_kv) * hp.head_dim_k;
    s.v = int64_t(n_head_kv) * hp.head_dim_v;
    s.attn = int64_t(n_head) * hp.head_dim_v;
    s.ff = widest_ffn(hp);
    s.n_expert_used = std::max<int64_t>(1, hp.n_expert_used);
    s.max_cols = std::max({s.d, s.ff, s.attn});
    // The largest matrix of a layer (the head is multiplied in tiles of this size).
    s.max_weight = s.d * std::max({s.ff, s.q, s.k, s.v, s.d});
    return s;
}

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
    Experts  // routed on the device: router, top-k, the chosen experts, their weighted sum
};

// The most projections of one input a Linear record holds (q, k and v).
constexpr size_t kMaxJobs = 3;

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
    // expert, the number of experts, k and whether the chosen weights are renormalised.
    TensorView w3{};
    std::array<size_t, 3> strides{};
    int n_expert = 0, k = 0;
    bool norm_weights = false;
    // RopeStoreKv, Attention: the sequence whose KV cache the rows use, and the first row.
    int seq = 0;
    int64_t row0 = 0;
};

bool same(const Record& x, const Record& y) {
    const auto view_eq = [](const TensorView& p, const TensorView& q) {
        return p.data == q.data && p.type == q.type && p.ne == q.ne && p.row_bytes == q.row_bytes;
    };
    return x.kind == y.kind && x.a == y.a && x.b == y.b && x.layer == y.layer && x.n == y.n &&
           x.seq == y.seq && x.row0 == y.row0 && view_eq(x.w0, y.w0) && view_eq(x.w1, y.w1) &&
           view_eq(x.w2, y.w2) && x.outs == y.outs && x.biases == y.biases && view_eq(x.w3, y.w3) &&
           x.strides == y.strides && x.n_expert == y.n_expert && x.k == y.k &&
           x.norm_weights == y.norm_weights;
}

// The weights of a record, in order.
constexpr TensorView Record::*kWeights[kMaxJobs] = {&Record::w0, &Record::w1, &Record::w2};

// The device-side parameters of a step: what changes from one decode step to the next.
struct StepParams {
    int32_t pos = 0;    // position of the batch's first token
    int32_t token = 0;  // the token of a one-token step
};

// Ops a decode step may hold before it must run (a guard against a caller that never syncs).
constexpr size_t kMaxTape = 16384;
// Graphs kept for replay: a split step's tapes (two per layer at most) of the largest models.
constexpr size_t kMaxGraphs = 512;

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

    Result<void> init(const BackendConfig& config) {
        STRATA_CUDA(cudaSetDevice(device_));
        STRATA_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        STRATA_CUDA(cudaEventCreateWithFlags(&staging_free_, cudaEventDisableTiming));
        shapes_ = shapes_of(config);
        const GpuShapes& s = shapes_;
        for (uint32_t seq = 0; seq < std::max(1u, config.n_seq); ++seq) {
            STRATA_ASSIGN(GpuKvCache kv,
                          GpuKvCache::create(hp_, config.n_ctx, config.kv_type, config.layers));
            kvs_.push_back(std::move(kv));
        }
        STRATA_ASSIGN(rope_, GpuRope::create(config.rope));
        STRATA_ASSIGN(attention_,
                      GpuAttention::create(hp_, config.n_ctx, uint32_t(s.rows), config.tuning.pdl));
        STRATA_ASSIGN(matmul_,
                      Matmul::create(s.max_weight, s.rows, s.max_cols, stream_, config.tuning));

        const std::array<int64_t, size_t(Act::Count)> cols = {s.d, s.d,    s.q, s.k,
                                                              s.v, s.attn, s.d, s.d};
        for (size_t a = 0; a < cols.size(); ++a) {
            STRATA_ASSIGN(acts_[a], floats(s.rows * cols[a]));
        }
        STRATA_ASSIGN(gate_, floats(s.rows * s.ff));
        STRATA_ASSIGN(up_, floats(s.rows * s.ff));
        STRATA_ASSIGN(scalar_, floats(s.rows));
        const int64_t out_rows = std::max<int64_t>(kLogitRowsPerChunk * hp_.n_vocab,
                                                   s.rows * std::max<int64_t>(1, hp_.n_expert));
        STRATA_ASSIGN(host_out_, floats(out_rows));
        STRATA_ASSIGN(ids_, gpu::DeviceBuffer::allocate(sizeof(int32_t) * size_t(s.rows), device_));
        STRATA_ASSIGN(step_, gpu::DeviceBuffer::allocate(sizeof(StepParams), device_));
        STRATA_ASSIGN(step_pinned_, gpu::PinnedBuffer::allocate(sizeof(StepParams)));
        n_ctx_ = config.n_ctx;
        tape_.reserve(kMaxTape);
        STRATA_ASSIGN(logits_pinned_,
                      gpu::PinnedBuffer::allocate(sizeof(float) * size_t(out_rows)));
        if (hp_.is_moe()) {
            const int64_t slots = s.rows * s.n_expert_used;
            STRATA_ASSIGN(slot_out_, floats(slots * s.d));
            STRATA_ASSIGN(x_rows_, floats(s.rows * s.d));
            STRATA_ASSIGN(y_rows_, floats(s.rows * s.d));
            STRATA_ASSIGN(slot_ids_,
                          gpu::DeviceBuffer::allocate(sizeof(int64_t) * size_t(slots), device_));
            STRATA_ASSIGN(slot_weights_, floats(slots));
            // Each slot's position and weight, and (experts() from the expert entries) entry.
            STRATA_ASSIGN(slot_staging_,
                          gpu::PinnedBuffer::allocate(
                              (sizeof(int64_t) + sizeof(float) + sizeof(int32_t)) * size_t(slots)));
            // Routing on the device: the router's logits, each slot's expert and weight, the
            // slots grouped by expert (their order, experts, weights), the grouped slots' input
            // rows, SwiGLU rows and outputs, and their quantized activations.
            STRATA_ASSIGN(router_logits_, floats(s.rows * hp_.n_expert));
            STRATA_ASSIGN(choice_, ints(slots));
            STRATA_ASSIGN(choice_weights_, floats(slots));
            STRATA_ASSIGN(grouped_ids_, ints(slots));
            STRATA_ASSIGN(grouped_x_, floats(slots * s.d));
            STRATA_ASSIGN(moe_h_, floats(slots * s.ff));
            STRATA_ASSIGN(moe_u_, floats(slots * s.ff));
            STRATA_ASSIGN(moe_tiles_, ints(3 * int64_t(mmq_max_tiles(int(slots), hp_.n_expert))));
            STRATA_ASSIGN(moe_y_, floats(slots * s.d));
            STRATA_ASSIGN(moe_scratch_,
                          gpu::DeviceBuffer::allocate(
                              matvec_q8_scratch_bytes(std::max(s.d, s.ff), int(slots)), device_));
        }
        if (config.staging_bytes > 0) {
            // Room for the pieces' alignment besides the plan's bytes.
            STRATA_ASSIGN(staging_, gpu::DeviceBuffer::allocate(
                                        config.staging_bytes + kMaxStaged * kStageAlign, device_));
            STRATA_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
            STRATA_CUDA(cudaEventCreateWithFlags(&staging_read_, cudaEventDisableTiming));
            staged_pieces_.reserve(kMaxStaged);
            for (cudaEvent_t& e : staged_done_) {
                STRATA_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            }
        }
        STRATA_CUDA(cudaEventRecord(staging_free_, stream_));
        if (OpProfile::requested()) profile_ = std::make_unique<OpProfile>();
        return {};
    }

    ~CudaBackend() override {
        if (stream_) cudaStreamSynchronize(stream_);
        if (profile_) profile_->print(stderr);
        for (Graph& g : graphs_) cudaGraphExecDestroy(g.exec);
        if (copy_stream_) cudaStreamSynchronize(copy_stream_);
        for (cudaEvent_t e : staged_done_) {
            if (e) cudaEventDestroy(e);
        }
        if (staging_read_) cudaEventDestroy(staging_read_);
        if (copy_stream_) cudaStreamDestroy(copy_stream_);
        if (staging_free_) cudaEventDestroy(staging_free_);
        if (stream_) cudaStreamDestroy(stream_);
    }

    std::string_view name() const override { return name_; }

    bool can_read(MemoryPlace where) const override {
        return where.kind == MemoryKind::Device && where.device == device_;
    }

    void write_act(Act a, const float* x, int64_t n, int64_t cols) override {
        assert(uint64_t(n * cols) * sizeof(float) <= acts_[size_t(a)].size());
        flush();
        STRATA_CUDA(cudaMemcpyAsync(act(a), x, bytes(n * cols), cudaMemcpyHostToDevice, stream_));
        // A decode step continuing here (its hidden state from the CPU's layers, or a layer's
        // experts' output from the CPU) is recorded from here on, as one begun by embed is.
        if (n == 1) recording_ = true;
    }
    void read_act(Act a, float* x, int64_t n, int64_t cols) override {
        assert(uint64_t(n * cols) * sizeof(float) <= acts_[size_t(a)].size());
        flush();
        to_host(x, act(a), n * cols);
    }
    const float* peek(Act a, int64_t rows) override {
        flush();
        const std::array<int64_t, size_t(Act::Count)> cols = {shapes_.d, shapes_.d, shapes_.q,
                                                              shapes_.k, shapes_.v, shapes_.attn,
                                                              shapes_.d, shapes_.d};
        peeked_.resize(size_t(rows * cols[size_t(a)]));
        to_host(peeked_.data(), act(a), rows * cols[size_t(a)]);
        return peeked_.data();
    }

    void embed(const TensorView& table, std::span<const int32_t> tokens) override {
        expect_device(table);
        flush();
        const int64_t n = int64_t(tokens.size());
        if (n == 1) {
            // A decode step begins: record it, with its token in the step parameters.
            recording_ = true;
            step_host().token = tokens[0];
            add_record({OpKind::Embed, Act::Hidden, Act::Hidden, 0, 1, table, {}, {}});
            return;
        }
        // A pageable source: the call returns once the ids are staged, so the span may go.
        STRATA_CUDA(cudaMemcpyAsync(ids_.data(), tokens.data(), sizeof(int32_t) * tokens.size(),
                                    cudaMemcpyHostToDevice, stream_));
        embed_rows(table, reinterpret_cast<const int32_t*>(ids_.data()), n, act(Act::Hidden),
                   stream_);
    }

    void rms_norm(Act in, const TensorView& weight, Act out, int64_t n) override {
        expect_device(weight);
        run({OpKind::RmsNorm, in, out, 0, n, weight, {}, {}});
    }

    void linear(std::span<const LinearJob> jobs, Act in, int64_t n) override {
        // Records of up to kMaxJobs projections, which share the input's quantization.
        for (size_t j0 = 0; j0 < jobs.size(); j0 += kMaxJobs) {
            Record r{OpKind::Linear, in, jobs[j0].out, 0, n, {}, {}, {}};
            for (size_t j = j0; j < std::min(jobs.size(), j0 + kMaxJobs); ++j) {
                const LinearJob& job = jobs[j];
                expect_device(*job.weight);
                await_staged(*job.weight);
                if (job.bias) await_staged(*job.bias);
                r.*kWeights[j - j0] = *job.weight;
                r.outs[j - j0] = job.out;
                r.biases[j - j0] = job.bias && job.bias->present() ? job.bias->f32() : nullptr;
            }
            run(r);
        }
    }

    // One op per sequence of the batch, each at its own position (a decode step is one).
    void rope_store_kv(int layer, const TensorView& qn, const TensorView& kn,
                       std::span<const SeqRun> runs) override {
        for (const SeqRun& sr : runs) {
            position_is(sr.pos0);
            Record r{OpKind::RopeStoreKv, Act::Q, Act::K, layer, sr.n, qn, kn, {}};
            r.seq = sr.seq;
            r.row0 = sr.row0;
            run(r);
        }
    }

    void attention(int layer, std::span<const SeqRun> runs) override {
        for (const SeqRun& sr : runs) {
            position_is(sr.pos0);
            Record r{OpKind::Attention, Act::Q, Act::AttnOut, layer, sr.n, {}, {}, {}};
            r.seq = sr.seq;
            r.row0 = sr.row0;
            run(r);
        }
    }

    void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down, Act in,
                    Act out, int64_t n) override {
        expect_device(gate);
        expect_device(up);
        expect_device(down);
        for (const TensorView* v : {&gate, &up, &down}) await_staged(*v);
        run({OpKind::Ffn, in, out, 0, n, gate, up, down});
    }

    void sigmoid_gate(const TensorView& gate, Act in, Act rows, int64_t n) override {
        expect_device(gate);
        run({OpKind::SigmoidGate, in, rows, 0, n, gate, {}, {}});
    }

    void add(Act into, Act from, int64_t n) override {
        run({OpKind::Add, from, into, 0, n, {}, {}, {}});
    }

    void project_to_host(std::span<const HostProjection> jobs, Act in, int64_t first_row,
                         int64_t rows) override {
        flush();
        for (const HostProjection& job : jobs) {
            const TensorView& w = *job.weight;
            expect_device(w);
            float* y = host_out();
            profiled("router", w, rows, [&] {
                matmul_->linear(w, nullptr, act(in) + first_row * shapes_.d, y, rows);
            });
            to_host(job.out, y, rows * w.rows());
        }
    }
    void begin_experts(int64_t n, int k, bool some_slots) override {
        flush();
        experts_k_ = k;
        experts_n_ = n;
        staged_ = 0;
        // The slot staging is refilled from the start: the copies out of it must be done.
        STRATA_CUDA(cudaEventSynchronize(staging_free_));
        // Zeroed before the first expert scatters into it (none may: entries_job's direct sum).
        zero_slots_ = some_slots;
        direct_ = 0;
    }

    void zero_slots() {
        if (!zero_slots_) return;
        zero_slots_ = false;
        const int64_t values = experts_n_ * experts_k_ * shapes_.d;
        STRATA_CUDA(cudaMemsetAsync(slot_out_.data(), 0, bytes(values), stream_));
    }

    ExpertEntryMemory* expert_entry_memory() override { return &entry_memory_; }

    void expert(const ExpertView& e, std::span<const int64_t> slots, std::span<const float> weights,
                Act in) override {
        const int64_t m = int64_t(slots.size());
        const int64_t total = experts_n_ * experts_k_;
        assert(staged_ + m <= total && direct_ == 0);
        zero_slots();
        auto* ids_host = reinterpret_cast<int64_t*>(slot_staging_.data());
        auto* w_host = reinterpret_cast<float*>(ids_host + total);
        std::memcpy(ids_host + staged_, slots.data(), sizeof(int64_t) * size_t(m));
        std::memcpy(w_host + staged_, weights.data(), sizeof(float) * size_t(m));
        auto* ids_dev = reinterpret_cast<int64_t*>(slot_ids_.data()) + staged_;
        float* w_dev = reinterpret_cast<float*>(slot_weights_.data()) + staged_;
        STRATA_CUDA(cudaMemcpyAsync(ids_dev, ids_host + staged_, sizeof(int64_t) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
        STRATA_CUDA(cudaMemcpyAsync(w_dev, w_host + staged_, sizeof(float) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
        staged_ += m;
        const int64_t d = shapes_.d;
        float* x = dev(x_rows_);
        float* y = dev(y_rows_);
        gather_rows(act(in), ids_dev, experts_k_, m, d, x, stream_);
        profiled("expert", e.gate, m, [&] { ffn(e.gate, e.up, e.down, x, y, m); });
        scatter_weighted(y, ids_dev, w_dev, m, d, dev(slot_out_), stream_);
    }

    // Experts in the expert entries, all of one layer (one shape and types), as one job: every
    // slot's entry, position and weight copied in once, then the int8 matvec for all the slots
    // at once (matvec_q8.h) and their weighted scatter. Others one by one.
    void experts(std::span<const ExpertJob> jobs, Act in, FunctionRef<void()> beside) override {
        beside();  // the host's work first: the GPU's queue needs no thread of its own
        if (!entries_job(jobs, in)) {
            for (const ExpertJob& j : jobs) expert(j.expert, j.slots, j.weights, in);
        }
    }

    bool entries_job(std::span<const ExpertJob> jobs, Act in) {
        if (jobs.empty() || !entries_.allocated()) return false;
        const ExpertView& first = jobs.front().expert;
        const auto same = [&](const TensorView& a, const TensorView& b) {
            return a.type == b.type && a.ne == b.ne && a.row_bytes == b.row_bytes;
        };
        int64_t m = 0;
        for (const ExpertJob& j : jobs) {
            const ExpertView& e = j.expert;
            const int64_t at = entries_.entry_of(e.gate);
            if (at < 0 || entries_.entry_of(e.up) != at || entries_.entry_of(e.down) != at ||
                !same(e.gate, first.gate) || !same(e.up, first.up) || !same(e.down, first.down) ||
                e.up.data - e.gate.data != first.up.data - first.gate.data ||
                e.down.data - e.gate.data != first.down.data - first.gate.data) {
                return false;
            }
            m += int64_t(j.slots.size());
        }
        const ExpertStack stack = entries_.stack(first);
        const int64_t total = experts_n_ * experts_k_;
        if (!expert_ffn_supports(stack) || staged_ + m > total || first.gate.rows() > shapes_.ff) {
            return false;
        }
        const int64_t d = shapes_.d;
        if (experts_n_ == 1 && zero_slots_ && staged_ == 0) {
            // Some of one token's slots: their weights and entries in one copy (into slot_ids_,
            // which this path does not otherwise use), the matvecs, and end_experts sums the m
            // outputs weighted straight into its output: no slots to zero, scatter or sum.
            auto* w_host = reinterpret_cast<float*>(slot_staging_.data());
            auto* entry_host = reinterpret_cast<int32_t*>(w_host + m);
            int64_t u = 0;
            for (const ExpertJob& j : jobs) {
                const auto entry = int32_t(entries_.entry_of(j.expert.gate));
                for (size_t i = 0; i < j.slots.size(); ++i, ++u) {
                    w_host[u] = j.weights[i];
                    entry_host[u] = entry;
                }
            }
            STRATA_CUDA(cudaMemcpyAsync(slot_ids_.data(), w_host, 2 * sizeof(float) * size_t(m),
                                        cudaMemcpyHostToDevice, stream_));
            const auto* entry_dev = reinterpret_cast<const int32_t*>(
                reinterpret_cast<const float*>(slot_ids_.data()) + m);
            const bool taken = matmul_->expert_ffn(stack, entry_dev, int(m), act(in), false,
                                                   dev(moe_h_), dev(moe_y_), moe_scratch_.data());
            assert(taken);  // expert_ffn_supports said so
            (void)taken;
            zero_slots_ = false;
            direct_ = m;
            staged_ = m;
            return true;
        }
        zero_slots();
        auto* ids_host = reinterpret_cast<int64_t*>(slot_staging_.data());
        auto* w_host = reinterpret_cast<float*>(ids_host + total);
        auto* entry_host = reinterpret_cast<int32_t*>(w_host + total);
        int64_t u = 0;
        for (const ExpertJob& j : jobs) {
            const auto entry = int32_t(entries_.entry_of(j.expert.gate));
            for (size_t i = 0; i < j.slots.size(); ++i, ++u) {
                ids_host[staged_ + u] = j.slots[i];
                w_host[staged_ + u] = j.weights[i];
                entry_host[u] = entry;
            }
        }
        auto* ids_dev = reinterpret_cast<int64_t*>(slot_ids_.data()) + staged_;
        float* w_dev = reinterpret_cast<float*>(slot_weights_.data()) + staged_;
        auto* entry_dev = reinterpret_cast<int32_t*>(grouped_ids_.data());
        STRATA_CUDA(cudaMemcpyAsync(ids_dev, ids_host + staged_, sizeof(int64_t) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
        STRATA_CUDA(cudaMemcpyAsync(w_dev, w_host + staged_, sizeof(float) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
        STRATA_CUDA(cudaMemcpyAsync(entry_dev, entry_host, sizeof(int32_t) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
        staged_ += m;
        // A batch: each slot's row gathered first.
        gather_rows(act(in), ids_dev, experts_k_, m, d, dev(grouped_x_), stream_);
        const bool taken = matmul_->expert_ffn(stack, entry_dev, int(m), dev(grouped_x_), true,
                                               dev(moe_h_), dev(moe_y_), moe_scratch_.data());
        assert(taken);  // expert_ffn_supports said so
        (void)taken;
        scatter_weighted(dev(moe_y_), ids_dev, w_dev, m, d, dev(slot_out_), stream_);
        return true;
    }

    void end_experts(Act out, int64_t n) override {
        if (direct_ > 0) {
            const auto* w = reinterpret_cast<const float*>(slot_ids_.data());
            sum_weighted_slots(dev(moe_y_), w, int(direct_), 1, shapes_.d, act(out), stream_);
        } else {
            zero_slots();  // no expert at all: a sum of zeros
            sum_slots(dev(slot_out_), experts_k_, n, shapes_.d, act(out), stream_);
        }
        STRATA_CUDA(cudaEventRecord(staging_free_, stream_));
    }

    // The conditions of routed_experts but where the weights lie.
    bool takes_routing(const TensorView& router, const ExpertStack& experts, int k,
                       int64_t n) const {
        return n >= 1 && hp_.is_moe() && experts.n_expert <= kMaxRoutedExperts && k >= 1 &&
               k <= kMaxExpertsUsed && k <= experts.n_expert && k <= shapes_.n_expert_used &&
               n * k <= 65535 && router.rows() == experts.n_expert &&
               linear_supports(router.type) && expert_ffn_supports(experts) &&
               experts.first.gate.rows() <= shapes_.ff;
    }

    bool routed_experts(const TensorView& router, const ExpertStack& experts, int k,
                        bool norm_weights, Act in, Act out, int64_t n) override {
        if (!takes_routing(router, experts, k, n) || !can_read(router.where) ||
            !can_read(experts.first.gate.where) || !can_read(experts.first.up.where) ||
            !can_read(experts.first.down.where)) {
            return false;
        }
        for (const TensorView* v :
             {&router, &experts.first.gate, &experts.first.up, &experts.first.down}) {
            await_staged(*v);
        }
        Record r{OpKind::Experts, in, out, 0, n, router, experts.first.gate, experts.first.up};
        r.w3 = experts.first.down;
        r.strides = {experts.gate_stride, experts.up_stride, experts.down_stride};
        r.n_expert = experts.n_expert;
        r.k = k;
        r.norm_weights = norm_weights;
        run(r);
        return true;
    }

    // The pieces copied in one go on copy_stream_, each followed by its event; an operation that
    // reads a staged view has the stream wait for that piece's event (await_staged).
    bool stage(std::span<const StagePiece> pieces, std::span<TensorView> staged) override {
        staged_pieces_.clear();
        if (staging_.size() == 0 || pieces.size() > kMaxStaged) return false;
        size_t at = 0;
        for (const StagePiece& p : pieces) {
            if (p.view->where.kind == MemoryKind::Device) return false;  // only host memory
            at += aligned(p.bytes);
        }
        if (at > staging_.size()) return false;
        // The copies overwrite the staging, so they wait for every kernel queued so far: the
        // last readers of what it held.
        flush();
        STRATA_CUDA(cudaEventRecord(staging_read_, stream_));
        STRATA_CUDA(cudaStreamWaitEvent(copy_stream_, staging_read_));
        at = 0;
        for (size_t i = 0; i < pieces.size(); ++i) {
            std::byte* to = staging_.data() + at;
            STRATA_CUDA(cudaMemcpyAsync(to, pieces[i].view->data, pieces[i].bytes,
                                        cudaMemcpyHostToDevice, copy_stream_));
            STRATA_CUDA(cudaEventRecord(staged_done_[i], copy_stream_));
            staged_pieces_.push_back({to, false});
            staged[i] = *pieces[i].view;
            staged[i].data = to;
            staged[i].where = {MemoryKind::Device, device_};
            at += aligned(pieces[i].bytes);
        }
        return true;
    }

    void normalize_output(const TensorView& norm, int64_t first_row, int64_t rows) override {
        expect_device(norm);
        // Rows first_row.. of Hidden: a one-token step has only row 0.
        if (recording_ && first_row == 0 && rows == 1) {
            add_record({OpKind::RmsNorm, Act::Hidden, Act::Normed, 0, 1, norm, {}, {}});
            return;
        }
        flush();
        cuda::rms_norm(act(Act::Hidden) + first_row * shapes_.d, norm.f32(), act(Act::Normed), rows,
                       shapes_.d, hp_.rms_eps, stream_, pdl_);
    }

    void head_logits(const TensorView& piece, int64_t vocab_first, int64_t n_vocab, int64_t rows,
                     float* logits) override {
        expect_device(piece);
        const int64_t width = piece.rows();
        auto* pinned = reinterpret_cast<float*>(logits_pinned_.data());
        if (recording_ && rows == 1) {
            // The head ends the step's graph; only its logits come back.
            add_record({OpKind::Head, Act::Normed, Act::Normed, 0, 1, piece, {}, {}});
            flush();
            STRATA_CUDA(
                cudaMemcpyAsync(pinned, host_out(), bytes(width), cudaMemcpyDeviceToHost, stream_));
            STRATA_CUDA(cudaStreamSynchronize(stream_));
            std::memcpy(logits + vocab_first, pinned, bytes(width));
            return;
        }
        flush();
        float* y = host_out();
        for (int64_t r0 = 0; r0 < rows; r0 += kLogitRowsPerChunk) {
            const int64_t m = std::min(kLogitRowsPerChunk, rows - r0);
            profiled("head", piece, m, [&] {
                matmul_->linear(piece, nullptr, act(Act::Normed) + r0 * shapes_.d, y, m);
            });
            STRATA_CUDA(
                cudaMemcpyAsync(pinned, y, bytes(m * width), cudaMemcpyDeviceToHost, stream_));
            STRATA_CUDA(cudaStreamSynchronize(stream_));
            for (int64_t r = 0; r < m; ++r) {
                std::memcpy(logits + (r0 + r) * n_vocab + vocab_first, pinned + r * width,
                            bytes(width));
            }
        }
    }

  private:
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
    float* scalar() const { return dev(scalar_); }
    float* host_out() const { return dev(host_out_); }
    StepParams* step_dev() const { return reinterpret_cast<StepParams*>(step_.data()); }
    StepParams& step_host() { return *reinterpret_cast<StepParams*>(step_pinned_.data()); }
    const int32_t* position() const { return &step_dev()->pos; }

    // The position kernels read (StepParams::pos on the device). A recorded step carries it in
    // the step parameters copied in when the graph runs; a direct launch sets it once per batch,
    // in stream order.
    void position_is(int64_t pos0) {
        if (recording_) {
            step_host().pos = int32_t(pos0);
            return;
        }
        if (pos0 == pos_set_) return;
        set_int(&step_dev()->pos, int32_t(pos0), stream_);
        pos_set_ = pos0;
    }

    void add_record(const Record& r) {
        tape_.push_back(r);
        if (tape_.size() >= kMaxTape) flush();
    }

    // An op: recorded during a decode step, launched at once otherwise.
    void run(const Record& r) {
        if (recording_) {
            add_record(r);
        } else {
            launch(r, false);
        }
    }

    // Launches one op on the stream. A recorded op (replayable in a graph) takes the token and
    // the position from the step parameters, and attention is sized for the whole context.
    // `quantized`: the op's input is already quantized as that type for the int8 matvec (by the
    // norm ahead of it, which also writes `q8` when given).
    void launch(const Record& r, bool recorded, TensorType quantized = TensorType::F32,
                cuda::Q8Rows q8 = {}) {
        if (profile_) {
            profile_->begin(stream_);
            launch_op(r, recorded, quantized, q8);
            profile_->end(stream_, profile_name(r), weight_bytes(r));
            return;
        }
        launch_op(r, recorded, quantized, q8);
    }

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
    static uint64_t weight_bytes(const Record& r) {
        if (r.kind == OpKind::Experts) {  // the router and the k chosen experts
            return view_bytes(r.w0) +
                   uint64_t(r.k) * (view_bytes(r.w1) + view_bytes(r.w2) + view_bytes(r.w3));
        }
        return view_bytes(r.w0) + view_bytes(r.w1) + view_bytes(r.w2);
    }
    std::string profile_name(const Record& r) const {
        static constexpr const char* kNames[] = {
            "embed", "rms_norm",     "linear", "rope_store_kv", "attention",
            "ffn",   "sigmoid_gate", "add",    "head",          "experts"};
        std::string name = kNames[size_t(r.kind)];
        if (r.w0.present() && r.kind != OpKind::RmsNorm) {
            name += " " + std::string(tensor_type_name(r.w0.type)) + " " +
                    std::to_string(r.w0.ne[0]) + "x" + std::to_string(r.w0.rows());
        }
        return name + (r.n == 1 ? " n=1" : " n>1");
    }

    void launch_op(const Record& r, bool recorded, TensorType quantized, cuda::Q8Rows q8) {
        const uint32_t l = uint32_t(r.layer);
        switch (r.kind) {
            case OpKind::Embed:
                embed_rows(r.w0, &step_dev()->token, 1, act(Act::Hidden), stream_);
                break;
            case OpKind::RmsNorm:
                cuda::rms_norm(act(r.a), r.w0.f32(), act(r.b), r.n, shapes_.d, hp_.rms_eps, stream_,
                               pdl_, q8);
                break;
            case OpKind::Linear: {
                std::array<Matmul::Product, kMaxJobs> products;
                size_t count = 0;
                for (; count < kMaxJobs && (r.*kWeights[count]).present(); ++count) {
                    products[count] = {&(r.*kWeights[count]), r.biases[count], act(r.outs[count])};
                }
                matmul_->linear_many({products.data(), count}, act(r.a), r.n, quantized);
                break;
            }
            case OpKind::RopeStoreKv: {
                // Rows are packed per layer: n_head (n_head_kv) heads of head_dim each.
                const int64_t q0 = r.row0 * hp_.n_head_at(l) * hp_.head_dim_k,
                              k0 = r.row0 * hp_.n_head_kv_at(l) * hp_.head_dim_k,
                              v0 = r.row0 * hp_.n_head_kv_at(l) * hp_.head_dim_v;
                cuda::rope_store_kv(rope_, kvs_[size_t(r.seq)], r.layer, int(hp_.n_head_at(l)),
                                    int(hp_.n_head_kv_at(l)), int(hp_.head_dim_k),
                                    int(hp_.head_dim_v), act(Act::Q) + q0, act(Act::K) + k0,
                                    act(Act::V) + v0, r.w0.present() ? r.w0.f32() : nullptr,
                                    r.w1.present() ? r.w1.f32() : nullptr, hp_.rms_eps, r.n,
                                    position(), stream_, pdl_);
                break;
            }
            case OpKind::Attention: {
                const int64_t q0 = r.row0 * hp_.n_head_at(l) * hp_.head_dim_k,
                              o0 = r.row0 * hp_.n_head_at(l) * hp_.head_dim_v;
                attention_.run(kvs_[size_t(r.seq)], r.layer, int(hp_.n_head_at(l)),
                               int(hp_.n_head_kv_at(l)), int(hp_.head_dim_k), int(hp_.head_dim_v),
                               1.0f / std::sqrt(float(hp_.head_dim_k)), act(Act::Q) + q0, r.n,
                               position(), recorded ? int64_t(n_ctx_) : pos_set_ + r.n,
                               act(Act::AttnOut) + o0, stream_);
                break;
            }
            case OpKind::Ffn:
                ffn(r.w0, r.w1, r.w2, act(r.a), act(r.b), r.n, quantized);
                break;
            case OpKind::SigmoidGate:
                matmul_->linear(r.w0, nullptr, act(r.a), scalar(), r.n);
                sigmoid_scale(act(r.b), scalar(), r.n, shapes_.d, stream_);
                break;
            case OpKind::Add:
                cuda::add(act(r.b), act(r.a), r.n * shapes_.d, stream_);
                break;
            case OpKind::Head: {
                const Matmul::Product head{&r.w0, nullptr, host_out()};
                matmul_->linear_many({&head, 1}, act(Act::Normed), 1, quantized);
                break;
            }
            case OpKind::Experts:
                routed(r);
                break;
        }
    }

    struct Graph {
        std::vector<Record> tape;  // what it was captured from
        cudaGraphExec_t exec = nullptr;
        uint64_t used = 0;  // graph_clock_ at its last replay
    };

    // Runs what was recorded: the cached graph when the tape is the one it was captured from,
    // else a graph captured from it now (or, with graphs off, the tape's launches one by one).
    void flush() {
        if (!recording_) return;
        recording_ = false;
        if (tape_.empty()) return;
        if (!use_graphs_) {
            launch_tape();
        } else {
            Graph* g = nullptr;
            for (Graph& c : graphs_) {
                if (c.tape.size() == tape_.size() &&
                    std::equal(tape_.begin(), tape_.end(), c.tape.begin(), same)) {
                    g = &c;
                    break;
                }
            }
            if (!g) g = &capture();
            g->used = ++graph_clock_;
            // The step's parameters reach the device inside the graph, from pinned memory the
            // host wrote while recording; the previous replay has finished reading it (every
            // tape ends in a synchronisation for its results, or in an empty one).
            STRATA_CUDA(cudaGraphLaunch(g->exec, stream_));
        }
        pos_set_ = -1;  // the step wrote the position; a direct launch sets it again
        tape_.clear();
    }

    // A graph of the tape, kept for replay in place of the least recently used one when
    // kMaxGraphs are kept.
    Graph& capture() {
        Graph* slot = nullptr;
        if (graphs_.size() < kMaxGraphs) {
            slot = &graphs_.emplace_back();
        } else {
            slot =
                &*std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const Graph& a, const Graph& b) { return a.used < b.used; });
            STRATA_CUDA(cudaGraphExecDestroy(slot->exec));
            slot->exec = nullptr;
        }
        cudaGraph_t graph = nullptr;
        STRATA_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        launch_tape();
        STRATA_CUDA(cudaStreamEndCapture(stream_, &graph));
        STRATA_CUDA(cudaGraphInstantiate(&slot->exec, graph, 0));
        STRATA_CUDA(cudaGraphDestroy(graph));
        slot->tape.assign(tape_.begin(), tape_.end());
        ++graphs_captured_;
        return *slot;
    }

    // The launches of a recorded step: its parameters copied in, then its ops, the ones that
    // fuse with the next taken together.
    void launch_tape() {
        STRATA_CUDA(cudaMemcpyAsync(step_dev(), &step_host(), sizeof(StepParams),
                                    cudaMemcpyHostToDevice, stream_));
        for (size_t i = 0; i < tape_.size(); ++i) {
            const auto at = [&](size_t j) { return j < tape_.size() ? &tape_[j] : nullptr; };
            const bool add_norm = fuses_into_norm(tape_[i], at(i + 1));
            const Record& norm = tape_[add_norm ? i + 1 : i];
            if (norm.kind != OpKind::RmsNorm) {
                launch(tape_[i], true);
                continue;
            }
            // A norm whose output the next op multiplies with the int8 matvec writes it
            // quantized too, and that op skips its quantizer.
            const Record* next = at(add_norm ? i + 2 : i + 1);
            const TensorType q = quantized_after(norm, next);
            const cuda::Q8Rows q8{q, matmul_->q8_scratch()};
            if (add_norm) {
                launch_add_norm(tape_[i], norm, q8);
                ++i;
            } else {
                launch(norm, true, TensorType::F32, q8);
            }
            if (q != TensorType::F32) {
                launch(*next, true, q);
                ++i;
            }
        }
    }

    // The activation type `next` quantizes the norm's output to for the int8 matvec, when it
    // is the norm's only reader among the ops that follow (a projection or FFN right after it);
    // F32 otherwise.
    TensorType quantized_after(const Record& norm, const Record* next) const {
        if (!next || next->a != norm.b || next->n != norm.n) return TensorType::F32;
        if (next->kind != OpKind::Linear && next->kind != OpKind::Ffn &&
            next->kind != OpKind::Head) {
            return TensorType::F32;
        }
        return matmul_->q8_input_type(next->w0, next->n);
    }

    // Routing and experts on the device (routed_experts): the router's logits, each token's
    // top k, then for one token its k experts directly; for a batch the n * k slots grouped by
    // expert, each expert's slots multiplied as one int8 tensor-core GEMM per matrix (or, for
    // types it does not take, slot by slot with int8 matvecs), and scattered back weighted.
    void routed(const Record& r) {
        const int64_t n = r.n, slots = r.n * r.k, d = shapes_.d;
        float* logits = dev(router_logits_);
        auto* choice = reinterpret_cast<int32_t*>(choice_.data());
        float* weight = dev(choice_weights_);
        matmul_->linear(r.w0, nullptr, act(r.a), logits, n);
        route_top_k(logits, n, r.n_expert, r.k, r.norm_weights, choice, weight, stream_);
        const ExpertStack stack{
            {r.w1, r.w2, r.w3}, r.strides[0], r.strides[1], r.strides[2], r.n_expert};
        bool taken = false;
        if (n == 1) {
            taken = matmul_->expert_ffn(stack, choice, r.k, act(r.a), false, dev(moe_h_),
                                        dev(moe_y_), moe_scratch_.data());
            sum_weighted_slots(dev(moe_y_), weight, r.k, 1, d, act(r.b), stream_);
        } else {
            auto* order = reinterpret_cast<int64_t*>(slot_ids_.data());
            auto* ids = reinterpret_cast<int32_t*>(grouped_ids_.data());
            float* grouped_weight = dev(slot_weights_);
            group_slots_by_expert(choice, weight, slots, r.n_expert, order, ids, grouped_weight,
                                  stream_);
            gather_rows(act(r.a), order, r.k, slots, d, dev(grouped_x_), stream_);
            taken = matmul_->expert_ffn_grouped(
                stack, ids, int(slots), dev(grouped_x_), dev(moe_h_), dev(moe_u_), dev(moe_y_),
                moe_scratch_.data(), reinterpret_cast<int32_t*>(moe_tiles_.data()));
            if (!taken) {
                taken = matmul_->expert_ffn(stack, ids, int(slots), dev(grouped_x_), true,
                                            dev(moe_h_), dev(moe_y_), moe_scratch_.data());
            }
            scatter_weighted(dev(moe_y_), order, grouped_weight, slots, d, dev(slot_out_), stream_);
            sum_slots(dev(slot_out_), r.k, n, d, act(r.b), stream_);
        }
        assert(taken);  // routed_experts checked the same conditions
        (void)taken;
    }

    // A residual add followed by the norm of the sum (every block boundary of a decode step):
    // one kernel does both.
    static bool fuses_into_norm(const Record& add, const Record* norm) {
        return norm && add.kind == OpKind::Add && norm->kind == OpKind::RmsNorm &&
               norm->a == add.b && norm->b != add.b && norm->b != add.a && norm->n == add.n;
    }
    void launch_add_norm(const Record& add, const Record& norm, cuda::Q8Rows q8) {
        const auto go = [&] {
            cuda::add_rms_norm(act(add.b), act(add.a), norm.w0.f32(), act(norm.b), norm.n,
                               shapes_.d, hp_.rms_eps, stream_, pdl_, q8);
        };
        if (!profile_) return go();
        profile_->begin(stream_);
        go();
        profile_->end(stream_, "add+rms_norm", view_bytes(norm.w0));
    }

    static size_t matrix_bytes(const TensorView& v) { return v.row_bytes * size_t(v.rows()); }

    static size_t aligned(size_t bytes) {
        return (bytes + kStageAlign - 1) / kStageAlign * kStageAlign;
    }

    // Has the stream wait for the copy of `v` when it is a staged piece whose copy it has not
    // waited for yet; nothing for any other view (a pointer comparison).
    void await_staged(const TensorView& v) {
        if (staged_pieces_.empty() || v.data < staging_.data() ||
            v.data >= staging_.data() + staging_.size()) {
            return;
        }
        for (size_t i = 0; i < staged_pieces_.size(); ++i) {
            Staged& p = staged_pieces_[i];
            if (p.at != v.data || p.awaited) continue;
            flush();
            STRATA_CUDA(cudaStreamWaitEvent(stream_, staged_done_[i]));
            p.awaited = true;
        }
    }

    void to_host(float* dst, const float* src, int64_t count) {
        STRATA_CUDA(cudaMemcpyAsync(dst, src, bytes(count), cudaMemcpyDeviceToHost, stream_));
        STRATA_CUDA(cudaStreamSynchronize(stream_));
        if (profile_) profile_->collect();
    }

    void expect_device(const TensorView& t) const {
        // The plan puts every tensor a CUDA layer reads in this GPU's memory; anything else
        // reaching here is a bug in the plan or the store.
        assert(!t.present() || can_read(t.where));
        (void)t;
    }

    void ffn(const TensorView& gate, const TensorView& up, const TensorView& down, const float* x,
             float* out, int64_t n, TensorType quantized = TensorType::F32) {
        expect_device(gate);
        expect_device(up);
        expect_device(down);
        float* g = dev(gate_);
        matmul_->swiglu(gate, up, x, g, dev(up_), n, quantized);
        matmul_->linear(down, nullptr, g, out, n);
    }

    ModelHparams hp_;
    int device_ = 0;
    bool use_graphs_;  // a decode step's tape replays as a CUDA graph (Tuning::cuda_graphs)
    Pdl pdl_;          // how its kernels launch (Tuning::pdl)
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

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendConfig& config, int device) {
    const gpu::Devices& devs = gpu::devices();
    if (device < 0 || size_t(device) >= devs.list.size()) {
        if (devs.list.empty()) return err("no GPU to run on: ", devs.reason);
        return err("there is no GPU ", std::to_string(device), " (",
                   std::to_string(devs.list.size()), " found)");
    }
    auto backend = std::make_unique<CudaBackend>(config, device);
    STRATA_TRY(backend->init(config));
    return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace strata
