// A fixed set of threads that run submitted jobs in submission order (first come, first served).
// Threads start once and live as long as the pool, so many small jobs cost no thread creation.
// Callers track completion themselves (each job signals what it finished).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class WorkerPool {
  public:
    // n_threads == 0 means one per hardware thread.
    explicit WorkerPool(unsigned n_threads);
    // Runs every job already submitted, then joins the threads.
    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    void submit(std::function<void()> job);
    size_t size() const { return threads_.size(); }

    static unsigned default_thread_count();

  private:
    void run();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace strata
