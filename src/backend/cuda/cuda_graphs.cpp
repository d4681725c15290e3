// The CUDA backend's decode-step tape and its CUDA graphs (see the comment on graphs in
// cuda_backend_impl.h): ops recorded instead of launched, the tape run as a cached graph, a new
// capture or direct launches, the position the kernels read, and the fusion of a residual add
// with the norm after it.
#include <algorithm>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"

namespace strata::cuda_impl {

namespace {

// Records that launch the same kernels on the same weights and activations: a tape of them
// replays the graph captured from the other.
bool same(const Record& x, const Record& y) {
    const auto view_eq = [](const TensorView& p, const TensorView& q) {
        return p.data == q.data && p.type == q.type && p.ne == q.ne && p.row_bytes == q.row_bytes;
    };
    const auto parts_eq = [](const Record& p, const Record& q) {
        for (size_t i = 0; i < p.parts.size(); ++i) {
            const ColumnPart &a = p.parts[i], &b = q.parts[i];
            if (a.to != b.to || a.width != b.width || a.to_col != b.to_col ||
                a.to_cols != b.to_cols) {
                return false;
            }
        }
        return true;
    };
    return x.kind == y.kind && x.a == y.a && x.b == y.b && x.layer == y.layer && x.n == y.n &&
           x.seq == y.seq && x.row0 == y.row0 && view_eq(x.w0, y.w0) && view_eq(x.w1, y.w1) &&
           view_eq(x.w2, y.w2) && x.outs == y.outs && x.biases == y.biases && view_eq(x.w3, y.w3) &&
           x.strides == y.strides && x.n_expert == y.n_expert && x.k == y.k && x.route == y.route &&
           x.expert_biases.gate == y.expert_biases.gate &&
           x.expert_biases.up == y.expert_biases.up &&
           x.expert_biases.down == y.expert_biases.down && x.glu.oai == y.glu.oai &&
           x.cols == y.cols && parts_eq(x, y);
}

}  // namespace

void CudaBackend::position_is(int64_t pos0) {
    if (recording_) {
        step_host().pos = int32_t(pos0);
        return;
    }
    if (pos0 == pos_set_) return;
    set_int(&step_dev()->pos, int32_t(pos0), stream_);
    pos_set_ = pos0;
}

void CudaBackend::add_record(const Record& r) {
    tape_.push_back(r);
    if (tape_.size() >= kMaxTape) flush();
}

void CudaBackend::run(const Record& r) {
    if (recording_) {
        add_record(r);
    } else {
        launch(r, false);
    }
}

void CudaBackend::flush() {
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

CudaBackend::Graph& CudaBackend::capture() {
    Graph* slot = nullptr;
    if (graphs_.size() < kMaxGraphs) {
        slot = &graphs_.emplace_back();
    } else {
        slot = &*std::min_element(graphs_.begin(), graphs_.end(),
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

void CudaBackend::launch_tape() {
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

TensorType CudaBackend::quantized_after(const Record& norm, const Record* next) const {
    if (!next || next->a != norm.b || next->n != norm.n) return TensorType::F32;
    if (next->kind != OpKind::Linear && next->kind != OpKind::Ffn && next->kind != OpKind::Head) {
        return TensorType::F32;
    }
    return matmul_->q8_input_type(next->w0, next->n);
}

bool CudaBackend::fuses_into_norm(const Record& add, const Record* norm) {
    return norm && add.kind == OpKind::Add && norm->kind == OpKind::RmsNorm && norm->a == add.b &&
           norm->b != add.b && norm->b != add.a && norm->n == add.n;
}

void CudaBackend::launch_add_norm(const Record& add, const Record& norm, cuda::Q8Rows q8) {
    const auto go = [&] {
        cuda::add_rms_norm(act(add.b), act(add.a), norm.w0.f32(), act(norm.b), norm.n, shapes_.d,
                           hp_.rms_eps, stream_, pdl_, q8);
    };
    if (!profile_) return go();
    profile_->begin(stream_);
    go();
    profile_->end(stream_, "add+rms_norm", view_bytes(norm.w0));
}

}  // namespace strata::cuda_impl
