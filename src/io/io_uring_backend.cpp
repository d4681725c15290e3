// io_uring: every read is one submission queue entry; one io_uring_submit per batch, and
// completions are collected in bulk from the completion queue, so a single thread keeps dozens
// of reads in flight without a thread per read.
#include <liburing.h>

#include <cerrno>
#include <cstring>

#include "io/io_backend.h"

namespace strata {

namespace {

class IoUringBackend final : public IoBackend {
  public:
    IoUringBackend() = default;
    ~IoUringBackend() override {
        if (ready_) io_uring_queue_exit(&ring_);
    }
    IoUringBackend(const IoUringBackend&) = delete;
    IoUringBackend& operator=(const IoUringBackend&) = delete;

    // The ring is set up in place: liburing keeps pointers to it while it is in use.
    int init(unsigned entries) {
        const int rc = io_uring_queue_init(entries, &ring_, 0);
        ready_ = rc == 0;
        return rc;
    }

    const char* name() const override { return "io_uring"; }

    Result<void> start(std::span<const IoRead> reads) override {
        for (const IoRead& r : reads) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
            if (!sqe) {
                // The queue holds as many entries as reads may be in flight, so it is only full
                // when this batch has not been handed to the kernel yet.
                STRATA_TRY(submit());
                sqe = io_uring_get_sqe(&ring_);
                if (!sqe) return err("io_uring: submission queue full");
            }
            io_uring_prep_read(sqe, r.fd, r.buf, r.length, r.offset);
            sqe->user_data = r.id;
        }
        return submit();
    }

    Result<void> reap(std::vector<IoCompletion>& out, bool wait) override {
        if (wait) {
            io_uring_cqe* cqe = nullptr;
            int rc;
            do {
                rc = io_uring_wait_cqe(&ring_, &cqe);
            } while (rc == -EINTR);
            if (rc < 0) return err("io_uring: waiting for a read failed: ", std::strerror(-rc));
        }
        io_uring_cqe* batch[64];
        for (;;) {
            const unsigned n = io_uring_peek_batch_cqe(&ring_, batch, 64);
            for (unsigned i = 0; i < n; ++i) {
                out.push_back({batch[i]->user_data, static_cast<int64_t>(batch[i]->res)});
            }
            io_uring_cq_advance(&ring_, n);
            if (n < 64) return {};
        }
    }

  private:
    Result<void> submit() {
        while (io_uring_sq_ready(&ring_) > 0) {
            const int rc = io_uring_submit(&ring_);
            if (rc == -EINTR) continue;
            if (rc < 0) return err("io_uring: submitting reads failed: ", std::strerror(-rc));
        }
        return {};
    }

    io_uring ring_{};
    bool ready_ = false;
};

}  // namespace

Result<std::unique_ptr<IoBackend>> make_io_uring_backend(unsigned queue_depth) {
    auto backend = std::make_unique<IoUringBackend>();
    const int rc = backend->init(queue_depth);
    if (rc < 0) return err("io_uring is not available: ", std::strerror(-rc));
    return std::unique_ptr<IoBackend>(std::move(backend));
}

}  // namespace strata
