// The fallback when io_uring is refused: a few threads, each blocked in one pread at a time.
// Reads in flight equal busy threads, so the thread count is the queue depth.
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "io/io_backend.h"

namespace strata {

namespace {

class PreadBackend final : public IoBackend {
  public:
    explicit PreadBackend(unsigned threads) {
        if (threads == 0) threads = 1;
        workers_.reserve(threads);
        for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
    }
    ~PreadBackend() override {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        work_ready_.notify_all();
        for (auto& t : workers_) t.join();
    }
    PreadBackend(const PreadBackend&) = delete;
    PreadBackend& operator=(const PreadBackend&) = delete;

    const char* name() const override { return "pread"; }

    Result<void> start(std::span<const IoRead> reads) override {
        {
            std::lock_guard lock(mutex_);
            queue_.insert(queue_.end(), reads.begin(), reads.end());
        }
        if (reads.size() == 1) {
            work_ready_.notify_one();
        } else if (!reads.empty()) {
            work_ready_.notify_all();
        }
        return {};
    }

    Result<void> reap(std::vector<IoCompletion>& out, bool wait) override {
        std::unique_lock lock(mutex_);
        if (wait) done_ready_.wait(lock, [this] { return !done_.empty(); });
        out.insert(out.end(), done_.begin(), done_.end());
        done_.clear();
        return {};
    }

  private:
    void worker_loop() {
        std::unique_lock lock(mutex_);
        for (;;) {
            work_ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            const IoRead r = queue_.front();
            queue_.pop_front();
            lock.unlock();
            ssize_t got;
            do {
                got = ::pread(r.fd, r.buf, r.length, static_cast<off_t>(r.offset));
            } while (got < 0 && errno == EINTR);
            const int64_t result = got < 0 ? -static_cast<int64_t>(errno) : got;
            lock.lock();
            done_.push_back({r.id, result});
            done_ready_.notify_one();
        }
    }

    std::mutex mutex_;
    std::condition_variable work_ready_, done_ready_;
    std::deque<IoRead> queue_;
    std::vector<IoCompletion> done_;
    bool stop_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<IoBackend> make_pread_backend(unsigned threads) {
    return std::make_unique<PreadBackend>(threads);
}

}  // namespace strata
