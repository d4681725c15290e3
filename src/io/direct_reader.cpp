#include "io/direct_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// Op lengths are 32-bit; reads larger than this gain nothing anyway (the kernel splits them).
constexpr size_t kMaxReadBytes = size_t{1} << 30;

std::string to_str(uint64_t x) {
    return std::to_string(x);
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Closes a descriptor on every error path until ownership moves on.
class FdGuard {
  public:
    explicit FdGuard(int fd) : fd_(fd) {}
    ~FdGuard() {
        if (fd_ >= 0) ::close(fd_);
    }
    FdGuard(const FdGuard&) = delete;
    FdGuard& operator=(const FdGuard&) = delete;
    int release() { return std::exchange(fd_, -1); }

  private:
    int fd_;
};

Result<void> set_direct_flag(int fd, bool on) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return err(std::strerror(errno));
    const int wanted = on ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
    if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) != 0) return err(std::strerror(errno));
    return {};
}

// Decides between O_DIRECT and buffered reads for an open file. Some filesystems accept the flag
// and only refuse the first read, so one block is read to find out.
Result<bool> enable_direct(int fd, const std::string& name, uint64_t size,
                           const DirectIoAlignment& align, std::string& note) {
    if (!align.supported) {
        note =
            "the filesystem does not support direct I/O for this file; reading through the "
            "page cache and dropping the pages after use";
        return false;
    }
    if (align.memory > AlignedBuffer::kAlignment) {
        note = "the device wants direct I/O buffers aligned to " + to_str(align.memory) +
               " bytes; reading through the page cache and dropping the pages after use";
        return false;
    }
    if (!set_direct_flag(fd, true)) {
        note =
            "the filesystem refuses O_DIRECT; reading through the page cache and dropping the "
            "pages after use";
        return false;
    }
    if (size == 0) return true;
    STRATA_ASSIGN(AlignedBuffer probe, AlignedBuffer::allocate(align.offset));
    ssize_t got;
    do {
        got = ::pread(fd, probe.data(), align.offset, 0);
    } while (got < 0 && errno == EINTR);
    if (got >= 0) return true;
    const int e = errno;
    if (e != EINVAL) return err(name, ": read error at offset 0: ", std::strerror(e));
    (void)set_direct_flag(fd, false);
    note = "direct reads of " + to_str(align.offset) +
           "-byte blocks are refused (EINVAL); reading through the page cache and dropping the "
           "pages after use";
    return false;
}

}  // namespace

Result<IoBackendKind> parse_io_backend(const std::string& name) {
    if (name.empty() || name == "auto") return IoBackendKind::Auto;
    if (name == "io_uring" || name == "uring") return IoBackendKind::IoUring;
    if (name == "pread") return IoBackendKind::Pread;
    return err("unknown I/O backend '", name, "': expected io_uring, pread or auto");
}

Result<std::unique_ptr<DirectReader>> DirectReader::open(const std::string& path,
                                                         const Options& options) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err(path, ": cannot open: ", std::strerror(errno));
    return make(fd, path, options, nullptr);
}

Result<std::unique_ptr<DirectReader>> DirectReader::adopt(int fd, std::string name,
                                                          const Options& options) {
    return make(fd, std::move(name), options, nullptr);
}

Result<std::unique_ptr<DirectReader>> DirectReader::adopt_with_backend(
    int fd, std::string name, const Options& options, std::unique_ptr<IoBackend> backend) {
    return make(fd, std::move(name), options, std::move(backend));
}

Result<std::unique_ptr<DirectReader>> DirectReader::make(int fd, std::string name,
                                                         const Options& options,
                                                         std::unique_ptr<IoBackend> backend) {
    FdGuard guard(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return err(name, ": cannot stat: ", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return err(name, ": not a regular file");

    std::unique_ptr<DirectReader> r(new DirectReader());
    r->path_ = std::move(name);
    r->size_ = static_cast<uint64_t>(st.st_size);
    r->options_ = options;
    r->options_.queue_depth = std::max(1u, options.queue_depth);
    r->align_ = direct_io_alignment(fd);
    std::string note;
    if (options.try_direct) {
        STRATA_ASSIGN(r->direct_, enable_direct(fd, r->path_, r->size_, r->align_, note));
    } else if (auto cleared = set_direct_flag(fd, false); !cleared) {
        return err(r->path_, ": cannot switch off O_DIRECT: ", cleared.error().message);
    }
    if (!r->direct_) {
        // No readahead: it would pull in pages around each read that the DONTNEED after the read
        // does not cover.
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    }
    const uint64_t block = r->block_size();
    r->options_.max_read_bytes = static_cast<size_t>(
        align_up(std::clamp<uint64_t>(options.max_read_bytes, block, kMaxReadBytes), block));

    if (!backend) {
        IoBackendKind kind = options.backend;
        if (kind == IoBackendKind::Auto) {
            if (const char* env = std::getenv("STRATA_IO")) {
                auto parsed = parse_io_backend(env);
                if (!parsed) return err("STRATA_IO: ", parsed.error().message);
                kind = *parsed;
            }
        }
        if (kind != IoBackendKind::Pread) {
            auto uring = make_io_uring_backend(r->options_.queue_depth);
            if (uring) {
                backend = std::move(uring).value();
            } else if (kind == IoBackendKind::IoUring) {
                return err(r->path_, ": ", uring.error().message);
            } else {
                note +=
                    (note.empty() ? "" : "; ") + uring.error().message + ", using pread threads";
            }
        }
        if (!backend) {
            const unsigned threads = options.pread_threads ? options.pread_threads
                                                           : std::min(r->options_.queue_depth, 16u);
            backend = make_pread_backend(threads);
        }
    }
    r->backend_ = std::move(backend);
    r->note_ = std::move(note);
    r->fd_ = guard.release();
    return r;
}

DirectReader::~DirectReader() {
    // The kernel may still be writing into destination and staging buffers: let it finish.
    while (in_flight_ > 0 && backend_ && !broken_) {
        completions_.clear();
        if (!backend_->reap(completions_, true)) break;
        in_flight_ -= std::min(in_flight_, completions_.size());
    }
    backend_.reset();  // joins pread threads, closes the ring
    if (fd_ >= 0) ::close(fd_);
}

WidenedRange DirectReader::widen(uint64_t offset, size_t length) const {
    if (length == 0) return {offset, 0, 0};
    const uint64_t block = block_size();
    const uint64_t begin = align_down(offset, block);
    const uint64_t end = align_up(offset + length, block);
    return {begin, end - begin, static_cast<size_t>(offset - begin)};
}

uint32_t DirectReader::new_request(const ReadRequest& req) {
    uint32_t index;
    if (!free_requests_.empty()) {
        index = free_requests_.back();
        free_requests_.pop_back();
        requests_[index] = RequestState{};
    } else {
        index = static_cast<uint32_t>(requests_.size());
        requests_.emplace_back();
    }
    requests_[index].req = req;
    requests_[index].live = true;
    ++live_requests_;
    return index;
}

int64_t DirectReader::find_request(uint64_t tag) const {
    if (live_requests_ == 0) return -1;
    for (size_t i = 0; i < requests_.size(); ++i) {
        if (requests_[i].live && requests_[i].req.tag == tag) return int64_t(i);
    }
    return -1;
}

void DirectReader::push_queued(uint32_t op) {
    if (queued_head_ > 0 && queued_head_ == queued_.size()) {
        queued_.clear();
        queued_head_ = 0;
    } else if (queued_head_ > 64 && queued_head_ * 2 > queued_.size()) {
        queued_.erase(queued_.begin(), queued_.begin() + long(queued_head_));
        queued_head_ = 0;
    }
    queued_.push_back(op);
}

uint32_t DirectReader::pop_queued() {
    return queued_[queued_head_++];
}

void DirectReader::requeue_front(uint32_t op) {
    if (queued_head_ > 0) {
        queued_[--queued_head_] = op;
    } else {
        queued_.insert(queued_.begin(), op);  // a retry with nothing taken yet: rare
    }
}

uint32_t DirectReader::new_op() {
    if (!free_ops_.empty()) {
        const uint32_t index = free_ops_.back();
        free_ops_.pop_back();
        ops_[index] = Op{};
        return index;
    }
    ops_.emplace_back();
    return static_cast<uint32_t>(ops_.size() - 1);
}

Result<void> DirectReader::submit(const ReadRequest& req) {
    if (broken_) return broken_error_;
    if (req.file_offset > size_ || req.length > size_ - req.file_offset) {
        return err(path_, ": read of ", to_str(req.length), " bytes at offset ",
                   to_str(req.file_offset), " runs past the end of the file (", to_str(size_),
                   " bytes)");
    }
    if (find_request(req.tag) >= 0) {
        return err(path_, ": a read with tag ", to_str(req.tag), " is already pending");
    }
    auto* dst = static_cast<std::byte*>(req.dst);
    if (req.placement == ReadPlacement::Widened &&
        reinterpret_cast<uintptr_t>(dst) % AlignedBuffer::kAlignment != 0) {
        return err(path_, ": a Widened read needs a destination aligned to ",
                   to_str(AlignedBuffer::kAlignment), " bytes (an AlignedBuffer)");
    }
    ++stats_.requests;
    stats_.bytes_requested += req.length;

    const uint32_t ri = new_request(req);
    if (req.length == 0) {
        requests_[ri].finished = true;
        return {};
    }
    const WidenedRange w = widen(req.file_offset, req.length);
    const uint64_t req_end = req.file_offset + req.length;
    const uint64_t step = options_.max_read_bytes;
    uint32_t count = 0;
    for (uint64_t o = w.offset; o < w.offset + w.length; o += step) {
        const uint32_t oi = new_op();
        Op& op = ops_[oi];
        op.offset = o;
        op.length = static_cast<uint32_t>(std::min<uint64_t>(step, w.offset + w.length - o));
        op.required = static_cast<uint32_t>(std::min<uint64_t>(o + op.length, req_end) - o);
        op.request = ri;
        if (req.placement == ReadPlacement::Widened) {
            op.buf = dst + (o - w.offset);
        } else {
            // Straight into dst when the whole piece lies inside the request and the address
            // suits direct I/O; otherwise through a staging buffer.
            std::byte* target = dst + (o - req.file_offset);
            const bool inside = o >= req.file_offset && o + op.length <= req_end;
            const bool aligned =
                !direct_ || reinterpret_cast<uintptr_t>(target) % align_.memory == 0;
            op.staged = !(inside && aligned);
            if (!op.staged) op.buf = target;
        }
        push_queued(oi);
        ++count;
    }
    requests_[ri].ops_left = count;
    return progress(false);
}

Result<int32_t> DirectReader::acquire_staging() {
    if (!free_staging_.empty()) {
        const int32_t i = free_staging_.back();
        free_staging_.pop_back();
        return i;
    }
    const size_t bytes = options_.max_read_bytes;
    if (!staging_.empty() && (staging_.size() + 1) * bytes > options_.staging_bytes) return -1;
    STRATA_ASSIGN(AlignedBuffer b, AlignedBuffer::allocate(bytes));
    staging_.push_back(std::move(b));
    return static_cast<int32_t>(staging_.size() - 1);
}

Result<void> DirectReader::pump() {
    batch_.clear();
    while (!queue_empty() && in_flight_ + batch_.size() < options_.queue_depth) {
        const uint32_t oi = queued_[queued_head_];
        Op& op = ops_[oi];
        RequestState& r = requests_[op.request];
        if (r.failed) {  // an earlier piece failed: reading the rest is wasted work
            (void)pop_queued();
            finish_op(oi);
            continue;
        }
        if (op.staged && op.staging < 0) {
            auto staging = acquire_staging();
            if (!staging) {
                (void)pop_queued();
                fail_request(r, err(path_, ": ", staging.error().message));
                finish_op(oi);
                continue;
            }
            if (*staging < 0) break;  // all staging buffers busy; a completion frees one
            op.staging = *staging;
            op.buf = staging_[static_cast<size_t>(op.staging)].data();
        }
        (void)pop_queued();
        batch_.push_back({oi, fd_, op.buf + op.done, op.length - op.done, op.offset + op.done});
    }
    if (batch_.empty()) return {};
    in_flight_ += batch_.size();
    stats_.reads += batch_.size();
    return backend_->start(batch_);
}

Result<void> DirectReader::collect(bool block) {
    if (in_flight_ == 0) return {};
    completions_.clear();
    STRATA_TRY(backend_->reap(completions_, block));
    for (const IoCompletion& c : completions_) {
        --in_flight_;
        on_completion(static_cast<uint32_t>(c.id), c.result);
    }
    return {};
}

Result<void> DirectReader::progress(bool block) {
    if (broken_) return broken_error_;
    auto r = collect(block);
    if (r) r = pump();
    if (!r) {
        break_reader(err(path_, ": ", r.error().message));
        return broken_error_;
    }
    return {};
}

void DirectReader::on_completion(uint32_t oi, int64_t result) {
    Op& op = ops_[oi];
    RequestState& r = requests_[op.request];
    if (result == -EINTR || result == -EAGAIN) {
        requeue_front(oi);
        return;
    }
    if (result < 0) {
        fail_request(r, err(path_, ": read error at offset ", to_str(op.offset + op.done), " (",
                            to_str(op.length - op.done),
                            " bytes): ", std::strerror(static_cast<int>(-result))));
        finish_op(oi);
        return;
    }
    stats_.bytes_read += static_cast<uint64_t>(result);
    op.done += static_cast<uint32_t>(result);
    if (op.done >= op.required) {
        finish_op(oi);
        return;
    }
    // Short of what the request needs. A direct read stops short of a block boundary only at the
    // end of the file, and a read that returns nothing is at the end of the file: either way the
    // file is shorter than when it was opened. Any other short read is re-issued for the rest.
    const uint64_t reached = op.offset + op.done;
    if (result == 0 || (direct_ && reached % align_.offset != 0)) {
        fail_request(r, err(path_, ": the file ends at byte ", to_str(reached), ", inside the ",
                            to_str(r.req.length), " bytes at offset ", to_str(r.req.file_offset),
                            " being read; it had ", to_str(size_),
                            " bytes when opened (truncated or replaced while in use?)"));
        finish_op(oi);
        return;
    }
    ++stats_.short_reads;
    requeue_front(oi);
}

void DirectReader::finish_op(uint32_t oi) {
    Op& op = ops_[oi];
    RequestState& r = requests_[op.request];
    if (op.staging >= 0) {
        if (!r.failed) {
            const uint64_t lo = std::max(op.offset, r.req.file_offset);
            const uint64_t hi = std::min(op.offset + op.length, r.req.file_offset + r.req.length);
            std::memcpy(static_cast<std::byte*>(r.req.dst) + (lo - r.req.file_offset),
                        op.buf + (lo - op.offset), hi - lo);
        }
        free_staging_.push_back(op.staging);
    }
    if (!direct_ && op.done > 0) {
        ::posix_fadvise(fd_, static_cast<off_t>(op.offset), op.done, POSIX_FADV_DONTNEED);
    }
    if (--r.ops_left == 0) r.finished = true;
    free_ops_.push_back(oi);
}

void DirectReader::fail_request(RequestState& r, Error e) {
    if (r.failed) return;
    r.failed = true;
    r.error = std::move(e);
}

void DirectReader::break_reader(Error e) {
    broken_ = true;
    broken_error_ = std::move(e);
    for (RequestState& r : requests_) {
        if (!r.live) continue;
        fail_request(r, broken_error_);
        r.finished = true;
    }
    queued_.clear();
    queued_head_ = 0;
}

Result<void> DirectReader::take_result(uint32_t ri) {
    RequestState& r = requests_[ri];
    Result<void> out;
    if (r.failed) out = std::move(r.error);
    r.live = false;
    --live_requests_;
    free_requests_.push_back(ri);
    if (live_requests_ == 0 && in_flight_ == 0 && free_staging_.size() == staging_.size()) {
        // Idle: the staging buffers go back. Exact reads that need them are what loading makes;
        // streaming reads land in place, so holding them on would only keep memory that the
        // running process does not use.
        staging_.clear();
        free_staging_.clear();
    }
    return out;
}

Result<void> DirectReader::wait_for(uint32_t ri) {
    while (!requests_[ri].finished) {
        if (in_flight_ == 0 && !queue_empty()) {
            // Nothing in flight yet work queued: pump() could not start it. Cannot happen while
            // staging buffers return on completion; refuse to spin if it ever does.
            break_reader(err(path_, ": reads are queued but none can start"));
            break;
        }
        STRATA_TRY(progress(in_flight_ > 0));
    }
    return {};
}

Result<void> DirectReader::wait(uint64_t tag) {
    const int64_t found = find_request(tag);
    if (found < 0) return err(path_, ": no pending read with tag ", to_str(tag));
    const uint32_t ri = uint32_t(found);
    if (!requests_[ri].finished) {
        const Clock::time_point start = Clock::now();
        auto r = wait_for(ri);
        stats_.wait_seconds += seconds_since(start);
        if (!r) return r;
    }
    return take_result(ri);
}

bool DirectReader::ready(uint64_t tag) {
    (void)progress(false);
    const int64_t found = find_request(tag);
    return found >= 0 && requests_[size_t(found)].finished;
}

std::vector<ReadCompletion> DirectReader::poll() {
    (void)progress(false);
    std::vector<uint32_t> finished;
    for (size_t ri = 0; ri < requests_.size(); ++ri) {
        if (requests_[ri].live && requests_[ri].finished) finished.push_back(uint32_t(ri));
    }
    std::vector<ReadCompletion> out;
    out.reserve(finished.size());
    for (uint32_t ri : finished) {
        const uint64_t tag = requests_[ri].req.tag;
        out.push_back({tag, take_result(ri)});
    }
    return out;
}

Result<void> DirectReader::wait_all() {
    const Clock::time_point start = Clock::now();
    Result<void> first;
    for (uint32_t ri = 0; ri < requests_.size(); ++ri) {
        if (!requests_[ri].live) continue;
        auto r = wait_for(ri);
        if (!r && first) first = std::move(r);
        if (broken_) break;
        auto outcome = take_result(ri);
        if (!outcome && first) first = std::move(outcome);
    }
    // After a break every request is finished and failed; collect them.
    for (uint32_t ri = 0; ri < requests_.size(); ++ri) {
        if (requests_[ri].live) (void)take_result(ri);
    }
    stats_.wait_seconds += seconds_since(start);
    return first;
}

Result<void> DirectReader::read_ranges(std::span<const ReadRequest> requests) {
    Result<void> first;
    size_t submitted = 0;
    for (const ReadRequest& req : requests) {
        first = submit(req);
        if (!first) break;
        ++submitted;
    }
    for (size_t i = 0; i < submitted; ++i) {
        auto r = wait(requests[i].tag);
        if (!r && first) first = std::move(r);
    }
    return first;
}

Result<void> DirectReader::read(uint64_t offset, size_t length, void* dst) {
    STRATA_TRY(submit({offset, length, dst, kSyncTag, ReadPlacement::Exact}));
    return wait(kSyncTag);
}

}  // namespace strata
