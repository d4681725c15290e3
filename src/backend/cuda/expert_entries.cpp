#include "backend/cuda/expert_entries.h"

#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"

namespace strata::cuda {

ExpertEntries::~ExpertEntries() {
    if (copies_) cudaStreamSynchronize(copies_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (compute_done_) cudaEventDestroy(compute_done_);
    if (copies_) cudaStreamDestroy(copies_);
}

Result<void> ExpertEntries::allocate(uint64_t entry_bytes, uint32_t entries, int device) {
    if (allocated()) return err("the expert entries are allocated already");
    if (entries == 0 || entry_bytes == 0 || entry_bytes % kExpertEntryAlign != 0) {
        return err("expert entries: ", std::to_string(entries), " of ", std::to_string(entry_bytes),
                   " bytes cannot be allocated");
    }
    device_ = device;
    entry_bytes_ = entry_bytes;
    STRATA_ASSIGN(memory_, gpu::DeviceBuffer::allocate(size_t(entry_bytes) * entries, device));
    STRATA_CUDA(cudaStreamCreateWithFlags(&copies_, cudaStreamNonBlocking));
    STRATA_CUDA(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    events_.resize(entries, nullptr);
    for (cudaEvent_t& e : events_) {
        STRATA_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        STRATA_CUDA(cudaEventRecord(e, copies_));  // an empty entry is "ready": never used
    }
    return {};
}

Result<ExpertView> ExpertEntries::load(uint32_t entry, const ExpertView& from,
                                       cudaStream_t compute) {
    if (entry >= events_.size())
        return err("expert entry ", std::to_string(entry), " of ", std::to_string(events_.size()));
    if (expert_entry_bytes(from) > entry_bytes_) {
        return err("an expert of ", std::to_string(expert_entry_bytes(from)),
                   " bytes does not fit an entry of ", std::to_string(entry_bytes_));
    }
    STRATA_CUDA(cudaEventRecord(compute_done_, compute));
    STRATA_CUDA(cudaStreamWaitEvent(copies_, compute_done_));
    std::byte* at = memory_.data() + size_t(entry) * entry_bytes_;
    ExpertView to = from;
    for (TensorView* v : {&to.gate, &to.up, &to.down, &to.gate_bias, &to.up_bias, &to.down_bias}) {
        if (!v->present()) continue;
        const size_t bytes = size_t(v->rows()) * v->row_bytes;
        STRATA_CUDA(cudaMemcpyAsync(at, v->data, bytes, cudaMemcpyHostToDevice, copies_));
        v->data = at;
        v->where = {MemoryKind::Device, device_};
        at += expert_entry_piece(*v);
    }
    STRATA_CUDA(cudaEventRecord(events_[entry], copies_));
    return to;
}

bool ExpertEntries::ready(uint32_t entry) const {
    if (entry >= events_.size()) return false;
    const cudaError_t e = cudaEventQuery(events_[entry]);
    if (e == cudaErrorNotReady) return false;
    STRATA_CUDA(e);
    return true;
}

int64_t ExpertEntries::entry_of(const TensorView& v) const {
    if (!allocated() || v.data < memory_.data() || v.data >= memory_.data() + memory_.size()) {
        return -1;
    }
    return int64_t(size_t(v.data - memory_.data()) / entry_bytes_);
}

ExpertStack ExpertEntries::stack(const ExpertView& like) const {
    ExpertStack s{like, entry_bytes_, entry_bytes_, entry_bytes_, int(events_.size())};
    const int64_t e = entry_of(like.gate);
    const size_t back = size_t(e < 0 ? 0 : e) * entry_bytes_;
    for (TensorView* v : {&s.first.gate, &s.first.up, &s.first.down, &s.first.gate_bias,
                          &s.first.up_bias, &s.first.down_bias}) {
        if (v->present()) v->data -= back;
    }
    return s;
}

void ExpertEntries::wait() const {
    if (copies_) STRATA_CUDA(cudaStreamSynchronize(copies_));
}

}  // namespace strata::cuda
