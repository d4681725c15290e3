#include "backend/cuda/op_profile.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/cuda_check.h"

namespace strata::cuda {

bool OpProfile::requested() {
    static const bool on = [] {
        const char* e = std::getenv("STRATA_CUDA_PROFILE");
        return e && std::string_view(e) == "1";
    }();
    return on;
}

OpProfile::~OpProfile() {
    for (const Pending& p : pending_) {
        cudaEventDestroy(p.start);
        cudaEventDestroy(p.stop);
    }
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t OpProfile::take() {
    if (free_.empty()) {
        cudaEvent_t e = nullptr;
        STRATA_CUDA(cudaEventCreate(&e));
        return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
}

void OpProfile::begin(cudaStream_t s) {
    open_ = take();
    STRATA_CUDA(cudaEventRecord(open_, s));
}

void OpProfile::end(cudaStream_t s, std::string name, uint64_t bytes) {
    cudaEvent_t stop = take();
    STRATA_CUDA(cudaEventRecord(stop, s));
    pending_.push_back({open_, stop, std::move(name), bytes});
    open_ = nullptr;
}

void OpProfile::collect() {
    size_t kept = 0;
    for (Pending& p : pending_) {
        if (cudaEventQuery(p.stop) != cudaSuccess) {
            pending_[kept++] = p;
            continue;
        }
        float ms = 0;
        STRATA_CUDA(cudaEventElapsedTime(&ms, p.start, p.stop));
        Total& t = totals_[p.name];
        ++t.calls;
        t.bytes += p.bytes;
        t.ms += ms;
        free_.push_back(p.start);
        free_.push_back(p.stop);
    }
    cudaGetLastError();  // a query of an unfinished event leaves "not ready" behind
    pending_.resize(kept);
}

void OpProfile::print(std::FILE* out) {
    collect();
    std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double all = 0;
    for (const auto& r : rows) all += r.second.ms;
    std::fprintf(out, "GPU time by op (STRATA_CUDA_PROFILE): %.1f ms in all\n", all);
    std::fprintf(out, "  %-44s %8s %10s %9s %6s %9s\n", "op", "calls", "total ms", "avg us",
                 "share", "GB/s");
    for (const auto& [name, t] : rows) {
        const double gbs = t.ms > 0 ? double(t.bytes) / (t.ms * 1e-3) / 1e9 : 0;
        std::fprintf(out, "  %-44s %8llu %10.2f %9.2f %5.1f%% %9.1f\n", name.c_str(),
                     static_cast<unsigned long long>(t.calls), t.ms, 1e3 * t.ms / double(t.calls),
                     all > 0 ? 100 * t.ms / all : 0, gbs);
    }
}

}  // namespace strata::cuda
