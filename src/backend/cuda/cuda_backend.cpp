// The CUDA backend (cuda_backend.h): its construction, the activations, and the block
// operations, each recorded into the decode step's tape (cuda_graphs.cpp) or launched at once.
// The class is declared in cuda_backend_impl.h, which says where its other parts live.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/delta_net.h"
#include "backend/cuda/delta_net_chunked.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/mla.h"
#include "backend/cuda/mmq.h"
#include "model/activation_memory.h"

namespace strata::cuda_impl {

namespace {

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
    if (hp.has_recurrent()) {
        // A gated query is each head's query and gate; a delta-net layer's q/k/v before its
        // convolution, its output gate z and its output (in AttnOut) span its heads.
        const int64_t value_dim = int64_t(hp.ssm_value_dim());
        s.mixed = std::max(2 * s.q, int64_t(hp.conv_channels()));
        s.gate = std::max(s.attn, value_dim);
        s.attn = std::max(s.attn, value_dim);
        s.v_heads = hp.ssm_dt_rank;
        s.fused = int64_t(hp.ssm_fused_dim());
    }
    if (hp.is_mla()) {
        // Latent attention caches latent rows, not keys and values (cuda_mla.cpp).
        s.k = s.v = 0;
        s.q_latent = hp.n_lora_q;
        s.kv_latent = hp.mla_cache_width();
    }
    s.max_cols = std::max({s.d, s.ff, s.attn, s.q_latent});
    // The largest matrix of a layer (the head is multiplied in tiles of this size).
    s.max_weight = s.d * std::max({s.ff, s.q, s.k, s.v, s.d, s.mixed, s.gate, s.fused});
    return s;
}

}  // namespace

Result<void> CudaBackend::init(const BackendConfig& config) {
    STRATA_CUDA(cudaSetDevice(device_));
    STRATA_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STRATA_CUDA(cudaEventCreateWithFlags(&staging_free_, cudaEventDisableTiming));
    shapes_ = shapes_of(config);
    const GpuShapes& s = shapes_;
    // Sliding-window layers keep a ring of kv_layer_positions slots, as the CPU's cache does.
    GpuKvWindows windows;
    for (uint32_t l = 0; l < hp_.n_layer && hp_.n_swa > 0; ++l) {
        windows.window.push_back(hp_.is_swa(l) ? hp_.n_swa : 0);
        windows.slots.push_back(kv_layer_positions(hp_, l, config.n_ctx, uint32_t(s.rows)));
    }
    for (uint32_t seq = 0; seq < std::max(1u, config.n_seq); ++seq) {
        STRATA_ASSIGN(GpuKvCache kv, GpuKvCache::create(hp_, config.n_ctx, config.kv_type,
                                                        config.layers, windows));
        kvs_.push_back(std::move(kv));
    }
    if (hp_.expert_activation == FfnActivation::SwigluOai) {
        glu_ = Glu{true, kSwigluOaiAlpha, kSwigluOaiLimit};
    }
    if (hp_.has_recurrent()) {
        STRATA_TRY(check_delta_net_sizes(int(hp_.ssm_d_state), int(hp_.ssm_d_conv),
                                         int(hp_.ssm_n_group), int(hp_.ssm_dt_rank)));
        // The prompt kernel's shared memory is configured here, before any graph is captured.
        (void)delta_net_chunked_fits(int(hp_.ssm_d_state));
    }
    STRATA_ASSIGN(rope_, GpuRope::create(config.rope));
    STRATA_ASSIGN(attention_,
                  GpuAttention::create(hp_, config.n_ctx, uint32_t(s.rows), config.tuning.pdl));
    STRATA_ASSIGN(matmul_,
                  Matmul::create(s.max_weight, s.rows, s.max_cols, stream_, config.tuning));

    for (size_t a = 0; a < size_t(Act::Count); ++a) {
        STRATA_ASSIGN(acts_[a], floats(s.rows * act_cols(Act(a))));
    }
    if (hp_.is_mla()) {
        if (!mla_shape_supported(int(hp_.n_lora_kv), int(hp_.n_rot))) {
            return err("the GPU's latent attention takes latents of multiples of 32 values up to ",
                       std::to_string(kMlaMaxRank), " and an even rotary part; this model's are ",
                       std::to_string(hp_.n_lora_kv), " and ", std::to_string(hp_.n_rot),
                       " (run it on the CPU: --gpu-mem 0)");
        }
        int64_t heads = 0;
        for (uint32_t l = 0; l < hp_.n_layer; ++l)
            heads = std::max<int64_t>(heads, hp_.n_head_at(l));
        const int64_t chunk_rows = std::min(s.rows, kGpuMlaTokensPerChunk) * heads;
        STRATA_ASSIGN(mla_q_, floats(chunk_rows * hp_.n_lora_kv));
        STRATA_ASSIGN(mla_o_, floats(chunk_rows * hp_.n_lora_kv));
        STRATA_ASSIGN(mla_scratch_, floats(mla_scratch_floats(int(hp_.n_lora_kv))));
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
    STRATA_ASSIGN(logits_pinned_, gpu::PinnedBuffer::allocate(sizeof(float) * size_t(out_rows)));
    if (hp_.is_moe()) {
        const int64_t slots = s.rows * s.n_expert_used;
        STRATA_ASSIGN(slot_out_, floats(slots * s.d));
        STRATA_ASSIGN(x_rows_, floats(s.rows * s.d));
        STRATA_ASSIGN(y_rows_, floats(s.rows * s.d));
        STRATA_ASSIGN(slot_ids_,
                      gpu::DeviceBuffer::allocate(sizeof(int64_t) * size_t(slots), device_));
        STRATA_ASSIGN(slot_weights_, floats(slots));
        STRATA_ASSIGN(bias_ids_, ints(slots));
        STRATA_ASSIGN(bias_staging_, gpu::PinnedBuffer::allocate(sizeof(int32_t) * size_t(slots)));
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

CudaBackend::~CudaBackend() {
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

void CudaBackend::write_act(Act a, const float* x, int64_t n, int64_t cols) {
    assert(uint64_t(n * cols) * sizeof(float) <= acts_[size_t(a)].size());
    flush();
    STRATA_CUDA(cudaMemcpyAsync(act(a), x, bytes(n * cols), cudaMemcpyHostToDevice, stream_));
    // A decode step continuing here (its hidden state from the CPU's layers, or a layer's
    // experts' output from the CPU) is recorded from here on, as one begun by embed is.
    if (n == 1) recording_ = true;
}

void CudaBackend::read_act(Act a, float* x, int64_t n, int64_t cols) {
    assert(uint64_t(n * cols) * sizeof(float) <= acts_[size_t(a)].size());
    flush();
    to_host(x, act(a), n * cols);
}

const float* CudaBackend::peek(Act a, int64_t rows) {
    flush();
    peeked_.resize(size_t(rows * act_cols(a)));
    to_host(peeked_.data(), act(a), rows * act_cols(a));
    return peeked_.data();
}

int64_t CudaBackend::act_cols(Act a) const {
    const GpuShapes& s = shapes_;
    // Mixed .. Fused are the hybrid models' (0 for others); QLatent and KvLatent the
    // latent-attention models'.
    const std::array<int64_t, size_t(Act::Count)> cols = {
        s.d,     s.d,    s.q,       s.k,       s.v,     s.attn,     s.d,        s.d,
        s.mixed, s.gate, s.v_heads, s.v_heads, s.fused, s.q_latent, s.kv_latent};
    return cols[size_t(a)];
}

void CudaBackend::embed(const TensorView& table, std::span<const int32_t> tokens) {
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
    embed_rows(table, reinterpret_cast<const int32_t*>(ids_.data()), n, act(Act::Hidden), stream_);
}

void CudaBackend::rms_norm(Act in, const TensorView& weight, Act out, int64_t n) {
    expect_device(weight);
    run({OpKind::RmsNorm, in, out, 0, n, weight, {}, {}});
}

void CudaBackend::linear(std::span<const LinearJob> jobs, Act in, int64_t n) {
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

void CudaBackend::rope_store_kv(int layer, const TensorView& qn, const TensorView& kn,
                                std::span<const SeqRun> runs) {
    for (const SeqRun& sr : runs) {
        position_is(sr.pos0);
        Record r{OpKind::RopeStoreKv, Act::Q, Act::K, layer, sr.n, qn, kn, {}};
        r.seq = sr.seq;
        r.row0 = sr.row0;
        run(r);
    }
}

void CudaBackend::attention(int layer, const TensorView& sinks, std::span<const SeqRun> runs) {
    expect_device(sinks);
    for (const SeqRun& sr : runs) {
        position_is(sr.pos0);
        Record r{OpKind::Attention, Act::Q, Act::AttnOut, layer, sr.n, sinks, {}, {}};
        r.seq = sr.seq;
        r.row0 = sr.row0;
        run(r);
    }
}

void CudaBackend::swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                             Act in, Act out, int64_t n) {
    expect_device(gate);
    expect_device(up);
    expect_device(down);
    for (const TensorView* v : {&gate, &up, &down}) await_staged(*v);
    run({OpKind::Ffn, in, out, 0, n, gate, up, down});
}

void CudaBackend::sigmoid_gate(const TensorView& gate, Act in, Act rows, int64_t n) {
    expect_device(gate);
    run({OpKind::SigmoidGate, in, rows, 0, n, gate, {}, {}});
}

void CudaBackend::add(Act into, Act from, int64_t n) {
    run({OpKind::Add, from, into, 0, n, {}, {}, {}});
}

void CudaBackend::project_to_host(std::span<const HostProjection> jobs, Act in, int64_t first_row,
                                  int64_t rows) {
    flush();
    for (const HostProjection& job : jobs) {
        const TensorView& w = *job.weight;
        expect_device(w);
        const float* bias = job.bias && job.bias->present() ? job.bias->f32() : nullptr;
        float* y = host_out();
        profiled("router", w, rows,
                 [&] { matmul_->linear(w, bias, act(in) + first_row * shapes_.d, y, rows); });
        to_host(job.out, y, rows * w.rows());
    }
}

void CudaBackend::normalize_output(const TensorView& norm, int64_t first_row, int64_t rows) {
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

void CudaBackend::head_logits(const TensorView& piece, int64_t vocab_first, int64_t n_vocab,
                              int64_t rows, float* logits) {
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
        profiled("head", piece, m,
                 [&] { matmul_->linear(piece, nullptr, act(Act::Normed) + r0 * shapes_.d, y, m); });
        STRATA_CUDA(cudaMemcpyAsync(pinned, y, bytes(m * width), cudaMemcpyDeviceToHost, stream_));
        STRATA_CUDA(cudaStreamSynchronize(stream_));
        for (int64_t r = 0; r < m; ++r) {
            std::memcpy(logits + (r0 + r) * n_vocab + vocab_first, pinned + r * width,
                        bytes(width));
        }
    }
}

void CudaBackend::launch(const Record& r, bool recorded, TensorType quantized, cuda::Q8Rows q8) {
    if (profile_) {
        profile_->begin(stream_);
        launch_op(r, recorded, quantized, q8);
        profile_->end(stream_, profile_name(r), weight_bytes(r));
        return;
    }
    launch_op(r, recorded, quantized, q8);
}

uint64_t CudaBackend::weight_bytes(const Record& r) {
    if (r.kind == OpKind::Experts) {  // the router and the k chosen experts
        return view_bytes(r.w0) +
               uint64_t(r.k) * (view_bytes(r.w1) + view_bytes(r.w2) + view_bytes(r.w3));
    }
    return view_bytes(r.w0) + view_bytes(r.w1) + view_bytes(r.w2);
}

std::string CudaBackend::profile_name(const Record& r) const {
    static constexpr const char* kNames[] = {"embed",
                                             "rms_norm",
                                             "linear",
                                             "rope_store_kv",
                                             "attention",
                                             "ffn",
                                             "sigmoid_gate",
                                             "add",
                                             "head",
                                             "experts",
                                             "split_query_gate",
                                             "sigmoid_mul",
                                             "delta_net",
                                             "ungroup_columns",
                                             "mla_norms",
                                             "mla_rope_store",
                                             "mla_attention"};
    std::string name = kNames[size_t(r.kind)];
    if (r.w0.present() && r.kind != OpKind::RmsNorm) {
        name += " " + std::string(tensor_type_name(r.w0.type)) + " " + std::to_string(r.w0.ne[0]) +
                "x" + std::to_string(r.w0.rows());
    }
    return name + (r.n == 1 ? " n=1" : " n>1");
}

void CudaBackend::launch_op(const Record& r, bool recorded, TensorType quantized, cuda::Q8Rows q8) {
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
                                int(hp_.n_head_kv_at(l)), int(hp_.head_dim_k), int(hp_.head_dim_v),
                                act(Act::Q) + q0, act(Act::K) + k0, act(Act::V) + v0,
                                r.w0.present() ? r.w0.f32() : nullptr,
                                r.w1.present() ? r.w1.f32() : nullptr, hp_.rms_eps, r.n, position(),
                                stream_, pdl_);
            break;
        }
        case OpKind::Attention: {
            const int64_t q0 = r.row0 * hp_.n_head_at(l) * hp_.head_dim_k,
                          o0 = r.row0 * hp_.n_head_at(l) * hp_.head_dim_v;
            attention_.run(kvs_[size_t(r.seq)], r.layer, int(hp_.n_head_at(l)),
                           int(hp_.n_head_kv_at(l)), int(hp_.head_dim_k), int(hp_.head_dim_v),
                           1.0f / std::sqrt(float(hp_.head_dim_k)), act(Act::Q) + q0, r.n,
                           position(), recorded ? int64_t(n_ctx_) : pos_set_ + r.n,
                           act(Act::AttnOut) + o0, stream_, r.w0.present() ? r.w0.f32() : nullptr);
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
        case OpKind::SplitQueryGate:
        case OpKind::SigmoidMul:
        case OpKind::DeltaNet:
        case OpKind::UngroupColumns:
            launch_hybrid(r);
            break;
        case OpKind::MlaNorms:
        case OpKind::MlaRopeStore:
        case OpKind::MlaAttention:
            launch_mla(r, recorded);
            break;
    }
}

void CudaBackend::to_host(float* dst, const float* src, int64_t count) {
    STRATA_CUDA(cudaMemcpyAsync(dst, src, bytes(count), cudaMemcpyDeviceToHost, stream_));
    STRATA_CUDA(cudaStreamSynchronize(stream_));
    if (profile_) profile_->collect();
}

void CudaBackend::expect_device(const TensorView& t) const {
    // The plan puts every tensor a CUDA layer reads in this GPU's memory; anything else
    // reaching here is a bug in the plan or the store.
    assert(!t.present() || can_read(t.where));
    (void)t;
}

void CudaBackend::ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                      const float* x, float* out, int64_t n, TensorType quantized,
                      const float* gate_bias, const float* up_bias, const float* down_bias,
                      Glu glu) {
    expect_device(gate);
    expect_device(up);
    expect_device(down);
    float* g = dev(gate_);
    matmul_->swiglu(gate, up, x, g, dev(up_), n, quantized, gate_bias, up_bias, glu);
    matmul_->linear(down, down_bias, g, out, n);
}

}  // namespace strata::cuda_impl

namespace strata {

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendConfig& config, int device) {
    const gpu::Devices& devs = gpu::devices();
    if (device < 0 || size_t(device) >= devs.list.size()) {
        if (devs.list.empty()) return err("no GPU to run on: ", devs.reason);
        return err("there is no GPU ", std::to_string(device), " (",
                   std::to_string(devs.list.size()), " found)");
    }
    auto backend = std::make_unique<cuda_impl::CudaBackend>(config, device);
    STRATA_TRY(backend->init(config));
    return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace strata
