// The CUDA backend's staging: weights in host memory copied for a prompt batch into a buffer
// of its own on a copy stream, and the waits of the operations that read them.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"

namespace strata::cuda_impl {

bool CudaBackend::stage(std::span<const StagePiece> pieces, std::span<TensorView> staged) {
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

void CudaBackend::await_staged(const TensorView& v) {
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

}  // namespace strata::cuda_impl
