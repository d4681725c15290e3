// One worker thread runs the requests that need a model, one at a time, in arrival order.
// Generation uses every core, so running two requests at once would only make both slower;
// a FIFO queue is also fair: nobody is overtaken. The queue is bounded so that a flood of
// requests gets a clear "busy" answer instead of unbounded waiting and memory.
//
// Between requests the worker runs the idle task (unloading models whose keep-alive ended),
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

namespace strata::server {

class WorkQueue {
  public:
    using Clock = std::chrono::steady_clock;
    // Returns when it wants to run again; nullopt: only after the next request.
    using IdleTask = std::function<std::optional<Clock::time_point>()>;

    WorkQueue(size_t max_pending, IdleTask idle);
    ~WorkQueue();  // runs what is queued, then stops the worker
    WorkQueue(const WorkQueue&) = delete;
    WorkQueue& operator=(const WorkQueue&) = delete;

    // false: max_pending requests are already waiting or running.
    bool submit(std::function<void()> work);
    // Called by a running job once its answer is complete but before the client can see that
    // (before the response channel is finished): the job stops counting against max_pending,
    // so that a client's next request is never refused because the worker has not yet returned
    // from the previous one.
    void release_slot();
    size_t pending() const;
    size_t max_pending() const { return max_pending_; }

  private:
    void run();

    const size_t max_pending_;
    IdleTask idle_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    size_t running_ = 0;
    bool slot_released_ = false;  // by the running job; worker thread only
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace strata::server
