// One persistent pool of compute threads. A decode step issues hundreds of small parallel jobs
// (one per matrix-vector product), so dispatch must cost microseconds: workers spin briefly on a
// generation counter before sleeping, and no thread is created per call.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "util/function_ref.h"

namespace strata {

class ThreadPool {
  public:
    // n_threads counts the calling thread too; 0 means physical_core_count().
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn(thread_index, n_threads) once on every thread (the caller is index 0) and returns
    // when all have finished.
    void run(FunctionRef<void(int thread, int n_threads)> fn);

    // Splits [0, n) into chunks of `grain` items handed out dynamically, so a slow or late thread
    // takes fewer chunks instead of straggling. fn(begin, end, thread).
    void parallel_for(int64_t n, int64_t grain,
                      FunctionRef<void(int64_t begin, int64_t end, int thread)> fn);

    // `task` runs on the calling thread at the start of the next run(), before the caller's
    // share of that job, while the workers start on it: with parallel_for's chunks going to
    // whoever is free, the job takes about as long as without it. It must outlive that run;
    // finish_caller_task() runs it when no run() has (a job small enough for the caller alone).
    // It must not use this pool.
    void caller_first(FunctionRef<void()> task) { caller_task_ = task; }
    void finish_caller_task();

  private:
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    const FunctionRef<void(int, int)>* job_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::optional<FunctionRef<void()>> caller_task_;
};

// Physical cores available to this process (hyper-threads of one core count once), at least 1.
int physical_core_count();

}  // namespace strata
