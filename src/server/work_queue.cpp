#include "server/work_queue.h"

namespace strata::server {

WorkQueue::WorkQueue(size_t max_pending, IdleTask idle)
    : max_pending_(max_pending ? max_pending : 1), idle_(std::move(idle)) {
    worker_ = std::thread([this] { run(); });
}

WorkQueue::~WorkQueue() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
}

bool WorkQueue::submit(std::function<void()> work) {
    {
        std::lock_guard lock(mu_);
        if (jobs_.size() + running_ >= max_pending_) return false;
        jobs_.push_back(std::move(work));
    }
    cv_.notify_all();
    return true;
}

void WorkQueue::release_slot() {
    if (slot_released_) return;
    slot_released_ = true;
    std::lock_guard lock(mu_);
    --running_;
}

size_t WorkQueue::pending() const {
    std::lock_guard lock(mu_);
    return jobs_.size() + running_;
}

void WorkQueue::run() {
    std::optional<Clock::time_point> wake;
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mu_);
            auto ready = [&] { return stopping_ || !jobs_.empty(); };
            if (wake) {
                cv_.wait_until(lock, *wake, ready);
            } else {
                cv_.wait(lock, ready);
            }
            if (jobs_.empty()) {
                if (stopping_) return;
                lock.unlock();
                wake = idle_ ? idle_() : std::nullopt;
                continue;
            }
            job = std::move(jobs_.front());
            jobs_.pop_front();
            ++running_;
        }
        slot_released_ = false;
        job();
        release_slot();
        wake = idle_ ? idle_() : std::nullopt;
    }
}

}  // namespace strata::server
