// Hands a response from the worker that computes it to the HTTP thread that writes it.
//
// The worker pushes serialized chunks (NDJSON lines, SSE events, or one whole JSON body) and
// ends with finish() or fail(). The HTTP side waits for the first of these before it commits to
// a status: a failure before anything was pushed is answered with a real error status and a
// JSON body, as Ollama does; once chunks have gone out, a failure can only be one last error
// line. When the client goes away the HTTP side cancels, and push() returns false so that the
// worker stops generating.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

namespace strata::server {

class ResponseChannel {
  public:
    // Worker side. false: the client is gone (the chunk is dropped).
    bool push(std::string chunk) {
        std::lock_guard lock(mu_);
        if (cancelled_) return false;
        chunks_.push_back(std::move(chunk));
        started_ = true;
        cv_.notify_all();
        return true;
    }
    // The answer's last chunk: `before_last` runs first (the server frees the request's queue
    // slot there, so that a client that sends its next request as soon as it reads this one is
    // not refused).
    bool push_last(std::string chunk) {
        if (before_last_) before_last_();
        return push(std::move(chunk));
    }
    void set_before_last(std::function<void()> f) { before_last_ = std::move(f); }
    void finish() { end(0, {}); }
    void fail(int status, std::string message) { end(status, std::move(message)); }
    bool cancelled() const {
        std::lock_guard lock(mu_);
        return cancelled_;
    }

    // HTTP side.
    // Blocks until something was pushed or the response ended.
    void wait_started() {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return started_ || ended_; });
    }
    // Blocks until the response ended.
    void wait_ended() {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return ended_; });
    }
    // Moves the pushed chunks into `out` (waiting for some unless the response ended); false
    // once the response ended and nothing is left.
    bool take(std::deque<std::string>& out) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !chunks_.empty() || ended_; });
        if (chunks_.empty()) return false;
        out.swap(chunks_);
        chunks_.clear();
        return true;
    }
    void cancel() {
        std::lock_guard lock(mu_);
        cancelled_ = true;
    }
    // Valid once the response ended: 0 for success, else the status of the failure.
    int failure_status() const {
        std::lock_guard lock(mu_);
        return failure_status_;
    }
    std::string failure_message() const {
        std::lock_guard lock(mu_);
        return failure_message_;
    }
    bool started() const {
        std::lock_guard lock(mu_);
        return started_;
    }

  private:
    void end(int status, std::string message) {
        std::lock_guard lock(mu_);
        if (ended_) return;
        failure_status_ = status;
        failure_message_ = std::move(message);
        ended_ = true;
        cv_.notify_all();
    }

    std::function<void()> before_last_;  // set before the worker starts; worker thread only
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::string> chunks_;
    bool started_ = false, ended_ = false, cancelled_ = false;
    int failure_status_ = 0;
    std::string failure_message_;
};

}  // namespace strata::server
