// Where the GPU's time goes, op by op: with STRATA_CUDA_PROFILE=1 the CUDA backend launches
// every op directly (no graphs) between two events, and when it goes away prints a table of GPU
// time per op kind and weight shape, with the bytes each read and the GB/s that makes. A
// debugging aid for the decode step's speed; never on by default.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace strata::cuda {

class OpProfile {
  public:
    static bool requested();  // STRATA_CUDA_PROFILE=1
    ~OpProfile();

    // Around one op's launches on `s`; `bytes` are the weight bytes it reads.
    void begin(cudaStream_t s);
    void end(cudaStream_t s, std::string name, uint64_t bytes);
    // Adds up the ops whose events have completed (after the stream was synchronised).
    void collect();
    void print(std::FILE* out);

  private:
    struct Pending {
        cudaEvent_t start, stop;
        std::string name;
        uint64_t bytes;
    };
    struct Total {
        uint64_t calls = 0, bytes = 0;
        double ms = 0;
    };
    cudaEvent_t take();
    std::vector<cudaEvent_t> free_;
    std::vector<Pending> pending_;
    cudaEvent_t open_ = nullptr;
    std::map<std::string, Total> totals_;
};

}  // namespace strata::cuda
