// The CUDA backend's operations for the hybrid models (qwen35, qwen35moe, qwen3next): the gated
// query's split and sigmoid product, the ungrouping of qwen3next's fused projections, and the
// Gated DeltaNet over each sequence's recurrent state, which lives in that sequence's KV cache
// (kv_cache_gpu.h) in place of a delta-net layer's keys and values. Each is a record, so a
// decode step's are captured in its graph.
#include <cassert>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/delta_net.h"

namespace strata::cuda_impl {

void CudaBackend::split_query_gate(int layer, int64_t n) {
    run({OpKind::SplitQueryGate, Act::Mixed, Act::Q, layer, n, {}, {}, {}});
}

void CudaBackend::sigmoid_mul(Act rows, Act gate, int64_t cols, int64_t n) {
    Record r{OpKind::SigmoidMul, rows, gate, 0, n, {}, {}, {}};
    r.cols = cols;
    run(r);
}

static_assert(kMaxColumnParts <= size_t(kMaxUngroupParts));

void CudaBackend::ungroup_columns(Act from, int64_t groups, std::span<const ColumnPart> parts,
                                  int64_t n) {
    assert(parts.size() <= kMaxColumnParts);
    Record r{OpKind::UngroupColumns, from, from, 0, n, {}, {}, {}};
    r.cols = groups;
    for (size_t p = 0; p < parts.size() && p < kMaxColumnParts; ++p) r.parts[p] = parts[p];
    run(r);
}

void CudaBackend::delta_net(int layer, const DeltaNetWeights& w, std::span<const SeqRun> runs) {
    for (const TensorView* v : {w.conv1d, w.dt_bias, w.a, w.norm}) expect_device(*v);
    for (const SeqRun& sr : runs) {
        Record r{OpKind::DeltaNet, Act::Mixed, Act::AttnOut, layer, sr.n,
                 *w.conv1d,        *w.dt_bias, *w.a};
        r.w3 = *w.norm;
        r.seq = sr.seq;
        r.row0 = sr.row0;
        run(r);
    }
}

void CudaBackend::reset_recurrent(int seq) {
    flush();  // recorded steps of the old sequence come first
    kvs_[size_t(seq)].clear_recurrent(stream_);
}

void CudaBackend::launch_hybrid(const Record& r) {
    switch (r.kind) {
        case OpKind::SplitQueryGate: {
            const uint32_t l = uint32_t(r.layer);
            cuda::split_query_gate(act(Act::Mixed), act(Act::Q), act(Act::Gate), r.n,
                                   int(hp_.n_head_at(l)), int(hp_.head_dim_k), stream_);
            break;
        }
        case OpKind::SigmoidMul:
            cuda::sigmoid_mul(act(r.a), act(r.b), r.n * r.cols, stream_);
            break;
        case OpKind::DeltaNet: {
            const DeltaNetShape shape{int(hp_.ssm_d_state), int(hp_.ssm_n_group),
                                      int(hp_.ssm_dt_rank), int(hp_.ssm_d_conv),
                                      hp_.rms_eps,          hp_.ssm_grouped_heads};
            const GpuKvLayer& L = kvs_[size_t(r.seq)].layer(r.layer);
            const int64_t value_dim = shape.value_dim(), v_heads = shape.v_heads;
            const DeltaNetRun run{act(Act::Mixed) + r.row0 * shape.channels(),
                                  act(Act::Alpha) + r.row0 * v_heads,
                                  act(Act::Beta) + r.row0 * v_heads,
                                  act(Act::Gate) + r.row0 * value_dim,
                                  act(Act::AttnOut) + r.row0 * value_dim,
                                  L.conv_state,
                                  L.delta_state,
                                  r.n};
            cuda::delta_net(shape, {r.w0.f32(), r.w1.f32(), r.w2.f32(), r.w3.f32()}, run, stream_);
            break;
        }
        case OpKind::UngroupColumns: {
            UngroupParts parts;
            for (const ColumnPart& p : r.parts) {
                if (p.width == 0) break;
                parts.to[parts.parts] = act(p.to);
                parts.width[parts.parts] = p.width;
                parts.to_col[parts.parts] = p.to_col;
                parts.to_cols[parts.parts] = p.to_cols;
                ++parts.parts;
            }
            cuda::ungroup_columns(act(r.a), r.cols, parts, r.n, stream_);
            break;
        }
        default:
            break;
    }
}

}  // namespace strata::cuda_impl
