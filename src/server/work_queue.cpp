#include "server/work_queue.h"

namespace strata::server {

namespace {
// Whether the job running on this worker thread has released its slot yet.
thread_local bool slot_released = false;
}  // namespace

WorkQueue::WorkQueue(size_t max_pending, IdleTask idle, size_t workers)
    : max_pending_(max_pending ? max_pending : 1), idle_(std::move(idle)) {
    for (size_t i = 0; i < std::max<size_t>(1, workers); ++i) {
        workers_.emplace_back([this] { run(); });
    }
}

WorkQueue::~WorkQueue() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
}

bool WorkQueue::submit(std::function<void()> work, JobTag tag) {
    {
        std::lock_guard lock(mu_);
        if (jobs_.size() + counted_ >= max_pending_) return false;
        jobs_.push_back({std::move(work), tag});
    }
    cv_.notify_all();
    return true;
}

void WorkQueue::release_slot() {
    if (slot_released) return;
    slot_released = true;
    std::lock_guard lock(mu_);
    --counted_;
}

size_t WorkQueue::pending() const {
    std::lock_guard lock(mu_);
    return jobs_.size() + counted_;
}

bool WorkQueue::admissible_locked(const JobTag& tag) const {
    if (idle_running_) return false;
    if (active_ == 0) return true;
    return tag.key != nullptr && tag.key == active_key_ && active_ < tag.width;
}

void WorkQueue::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        if (!jobs_.empty() && admissible_locked(jobs_.front().tag)) {
            Job job = std::move(jobs_.front());
            jobs_.pop_front();
            ++active_;
            ++counted_;
            active_key_ = job.tag.key;
            cv_.notify_all();  // the next job may be able to join this one
            lock.unlock();
            slot_released = false;
            job.work();
            release_slot();
            lock.lock();
            if (--active_ == 0) {
                active_key_ = nullptr;
                idle_due_ = true;
            }
            cv_.notify_all();
            continue;
        }
        if (active_ == 0 && !idle_running_) {
            if (jobs_.empty() && stopping_) return;
            if (idle_due_ || (wake_ && Clock::now() >= *wake_)) {
                idle_due_ = false;
                idle_running_ = true;
                lock.unlock();
                std::optional<Clock::time_point> wake = idle_ ? idle_() : std::nullopt;
                lock.lock();
                idle_running_ = false;
                wake_ = wake;
                cv_.notify_all();
                continue;
            }
            if (wake_) {
                cv_.wait_until(lock, *wake_);
                continue;
            }
        }
        if (stopping_ && jobs_.empty() && active_ == 0) return;
        cv_.wait(lock);
    }
}

}  // namespace strata::server
