// The worker threads that run the requests needing a model, in arrival order. A request runs
// alone, except that generations and embeddings on the same model run side by side up to the
// model's sequence count: they are evaluated together (runtime/sequence_batcher.h), every weight
// read serving them all. Anything else (another model, a load) waits until what runs has
// finished, and nothing overtakes the request at the head of the queue: FIFO is fair, and two
// models never compete for the cores and the RAM at once. The queue is bounded so that a flood
// of requests gets a clear "busy" answer instead of unbounded waiting and memory.
//
// When nothing runs, one worker runs the idle task (unloading models whose keep-alive ended),
// waking at the time it asks for.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace strata::server {

// Which requests a job may run beside: the ones with the same non-null key, up to `width` jobs
// at once. A null key runs alone.
struct JobTag {
    const void* key = nullptr;
    size_t width = 1;
};

class WorkQueue {
  public:
    using Clock = std::chrono::steady_clock;
    // Returns when it wants to run again; nullopt: only after the next request.
    using IdleTask = std::function<std::optional<Clock::time_point>()>;

    // `workers`: the most jobs that can ever run at once (the widest tag that will be used).
    WorkQueue(size_t max_pending, IdleTask idle, size_t workers = 1);
    ~WorkQueue();  // runs what is queued, then stops the workers
    WorkQueue(const WorkQueue&) = delete;
    WorkQueue& operator=(const WorkQueue&) = delete;

    // false: max_pending requests are already waiting or running.
    bool submit(std::function<void()> work, JobTag tag = {});
    // Called by a running job once its answer is complete but before the client can see that
    // (before the response channel is finished): the job stops counting against max_pending,
    // so that a client's next request is never refused because the worker has not yet returned
    // from the previous one. Only the first call of a job counts.
    void release_slot();
    size_t pending() const;
    size_t max_pending() const { return max_pending_; }

  private:
    struct Job {
        std::function<void()> work;
        JobTag tag;
    };
    void run();
    bool admissible_locked(const JobTag& tag) const;

    const size_t max_pending_;
    IdleTask idle_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Job> jobs_;
    size_t counted_ = 0;  // running jobs that still count against max_pending
    size_t active_ = 0;   // running jobs
    const void* active_key_ = nullptr;
    bool idle_due_ = true;                   // the idle task should run once nothing runs
    bool idle_running_ = false;              // it is running (no job starts meanwhile)
    std::optional<Clock::time_point> wake_;  // when the idle task asked to run again
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace strata::server
