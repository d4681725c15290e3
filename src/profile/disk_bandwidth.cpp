#include "profile/disk_bandwidth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "io/aligned_buffer.h"
#include "io/direct_reader.h"
#include "util/units.h"

namespace strata {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kScratchBytes = 1ull << 30;
constexpr uint64_t kQuickScratchBytes = 64ull << 20;
// Space left free on the filesystem after the scratch file is written.
constexpr uint64_t kFreeSpaceReserve = 1ull << 30;
constexpr size_t kWriteChunk = 4 << 20;
constexpr double kCellSeconds = 1.0;
constexpr double kQuickCellSeconds = 0.1;

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// An open file to read: either the scratch file (unnamed; reopened through dup for each reader)
// or an existing file read by path.
struct TestFile {
    int fd = -1;  // scratch file, owned
    std::string path;
    std::string label;  // for messages
    uint64_t size = 0;
    std::optional<double> write_bandwidth;

    TestFile() = default;
    TestFile(TestFile&& o) noexcept
        : fd(std::exchange(o.fd, -1)),
          path(std::move(o.path)),
          label(std::move(o.label)),
          size(o.size),
          write_bandwidth(o.write_bandwidth) {}
    TestFile& operator=(TestFile&&) = delete;
    TestFile(const TestFile&) = delete;
    ~TestFile() {
        if (fd >= 0) ::close(fd);
    }

    Result<std::unique_ptr<DirectReader>> open_reader(const DirectReader::Options& o) const {
        if (fd < 0) return DirectReader::open(path, o);
        const int copy = ::dup(fd);
        if (copy < 0) return err(label, ": dup: ", std::strerror(errno));
        return DirectReader::adopt(copy, label, o);
    }
};

bool same_device(const std::string& a, dev_t dev) {
    struct stat st {};
    return ::stat(a.c_str(), &st) == 0 && st.st_dev == dev;
}

bool is_inside(const fs::path& candidate, const fs::path& dir) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(candidate, ec);
    const auto rel = c.lexically_relative(dir);
    return !rel.empty() && *rel.begin() != "..";
}

// An unnamed file in `dir` (O_TMPFILE), or a named one unlinked at once where the filesystem
// lacks O_TMPFILE: either way nothing is left behind, even if strata is killed.
Result<int> create_unnamed_file(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    std::string templ = (fs::path(dir) / ".strata-disk-test-XXXXXX").string();
    fd = ::mkostemp(templ.data(), O_CLOEXEC);
    if (fd < 0) return err(dir, ": cannot create a file: ", std::strerror(errno));
    ::unlink(templ.c_str());
    return fd;
}

// Fills the file with non-zero data, every 4 KiB block different (no compression or
// deduplication below can shortcut the reads), written with O_DIRECT where allowed.
Result<double> fill_scratch(int fd, uint64_t bytes, const std::string& label,
                            ProgressLine& progress) {
    const int flags = ::fcntl(fd, F_GETFL);
    const bool direct = flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
    STRATA_ASSIGN(AlignedBuffer chunk, AlignedBuffer::allocate(kWriteChunk));
    std::mt19937_64 rng(0x5eed);
    auto* words = reinterpret_cast<uint64_t*>(chunk.data());
    for (size_t i = 0; i < chunk.size() / 8; ++i) words[i] = rng() | 1;
    const auto start = Clock::now();
    for (uint64_t off = 0; off < bytes; off += kWriteChunk) {
        for (size_t b = 0; b < kWriteChunk / 4096; ++b) words[b * 512] = off / 4096 + b + 1;
        size_t done = 0;
        while (done < kWriteChunk) {
            const ssize_t n = ::pwrite(fd, chunk.data() + done, kWriteChunk - done,
                                       static_cast<off_t>(off + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                return err(label, ": write error at offset ", std::to_string(off + done), ": ",
                           n < 0 ? std::strerror(errno) : "no progress");
            }
            done += static_cast<size_t>(n);
        }
        progress.detail(std::to_string((off + kWriteChunk) * 100 / bytes) + "%");
    }
    if (::fdatasync(fd) != 0) return err(label, ": fdatasync: ", std::strerror(errno));
    const double seconds = since(start);
    // Buffered writes left the data in the page cache; drop it so reads come from the disk.
    if (!direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    return static_cast<double>(bytes) / seconds;
}

Result<TestFile> make_scratch(const std::string& dir, uint64_t bytes, ProgressLine& progress) {
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) != 0) return err(dir, ": statvfs: ", std::strerror(errno));
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < bytes + kFreeSpaceReserve) {
        return err(dir, ": only ", format_bytes(free_bytes), " free, the test file needs ",
                   format_bytes(bytes), " and leaves ", format_bytes(kFreeSpaceReserve));
    }
    STRATA_ASSIGN(int fd, create_unnamed_file(dir));
    TestFile f;
    f.fd = fd;
    f.label = "test file in " + dir;
    f.size = bytes;
    if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0) {
        return err(dir, ": cannot reserve ", format_bytes(bytes), ": ", std::strerror(e));
    }
    STRATA_ASSIGN(f.write_bandwidth, fill_scratch(fd, bytes, f.label, progress));
    return f;
}

// The largest regular file directly in `dir`, or empty.
std::pair<std::string, uint64_t> largest_file(const std::string& dir) {
    std::pair<std::string, uint64_t> best{"", 0};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        std::error_code e2;
        if (!entry.is_regular_file(e2)) continue;
        const uint64_t size = entry.file_size(e2);
        if (!e2 && size > best.second) best = {entry.path().string(), size};
    }
    return best;
}

// Random block-aligned reads, `queue_depth` in flight, until the time is up or every block of the
// file has been read once (no block twice, so no cache below the page cache helps either).
Result<DiskReadRate> run_cell(const TestFile& file, uint32_t block, uint32_t queue_depth,
                              double seconds, DiskProfile& profile) {
    DirectReader::Options o;
    o.queue_depth = queue_depth;
    o.max_read_bytes = block;
    STRATA_ASSIGN(auto reader, file.open_reader(o));
    if (profile.backend.empty()) {
        profile.backend = reader->backend_name();
        profile.direct = reader->direct();
        profile.block_size = reader->alignment().offset;
        if (!reader->fallback_note().empty()) profile.note = reader->fallback_note();
        if (!reader->direct() && file.fd < 0) {
            // Buffered reads of an existing file: pages cached earlier would be counted as disk
            // reads. Drop them first (the reader drops its own as it goes).
            const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
                ::close(fd);
            }
        }
    }
    const uint64_t slots = file.size / block;
    std::vector<uint32_t> order(static_cast<size_t>(std::min<uint64_t>(slots, UINT32_MAX)));
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(block * 131 + queue_depth));
    STRATA_ASSIGN(AlignedBuffer buffer, AlignedBuffer::allocate(size_t{queue_depth} * block));

    size_t next = 0;
    const auto submit = [&](uint32_t lane) {
        const uint64_t offset = uint64_t{order[next++]} * block;
        return reader->submit({offset, block, buffer.data() + size_t{lane} * block, lane});
    };
    const auto start = Clock::now();
    uint32_t lanes = 0;
    for (; lanes < queue_depth && next < order.size(); ++lanes) STRATA_TRY(submit(lanes));
    DiskReadRate rate;
    rate.block = block;
    rate.queue_depth = queue_depth;
    // Lanes are waited for in submission order; each finished lane gets the next block.
    std::vector<bool> busy(lanes, true);
    uint32_t busy_count = lanes;
    for (uint32_t lane = 0; busy_count > 0; lane = (lane + 1) % lanes) {
        if (!busy[lane]) continue;
        STRATA_TRY(reader->wait(lane));
        rate.bytes += block;
        if (next < order.size() && since(start) < seconds) {
            STRATA_TRY(submit(lane));
        } else {
            busy[lane] = false;
            --busy_count;
        }
    }
    rate.seconds = since(start);
    rate.bandwidth = static_cast<double>(rate.bytes) / rate.seconds;
    rate.iops = static_cast<double>(rate.bytes / block) / rate.seconds;
    return rate;
}

}  // namespace

std::string disk_block_label(uint32_t block) {
    if (block % (1u << 20) == 0) return std::to_string(block >> 20) + " MiB";
    if (block % (1u << 10) == 0) return std::to_string(block >> 10) + " KiB";
    return std::to_string(block) + " B";
}

std::vector<uint32_t> disk_test_blocks(bool quick) {
    if (quick) return {64u << 10, 1u << 20};
    return {4u << 10, 64u << 10, 1u << 20, 4u << 20};
}

std::vector<uint32_t> disk_test_queue_depths(bool quick) {
    if (quick) return {1, 16};
    return {1, 4, 16, 32};
}

int disk_test_steps(bool quick) {
    return 1 +
           static_cast<int>(disk_test_blocks(quick).size() * disk_test_queue_depths(quick).size());
}

Result<DiskProfile> measure_disk(const DiskTestOptions& options, ProgressLine& progress) {
    std::error_code ec;
    const fs::path dir = fs::canonical(options.dir, ec);
    if (ec || !fs::is_directory(dir, ec)) {
        return err(options.dir,
                   ": not a directory (the disk to measure is the one holding the "
                   "model directory)");
    }
    DiskProfile d;
    d.dir = dir.string();
    STRATA_ASSIGN(StorageInfo storage, storage_info(d.dir));
    d.mount_point = storage.mount_point;
    d.fs_type = storage.fs_type;
    d.source = storage.source;
    d.device = storage.device;
    d.model = storage.model;
    d.rotational = storage.rotational;
    d.measured_at = format_utc(unix_now());
    struct stat dir_st {};
    ::stat(d.dir.c_str(), &dir_st);

    std::vector<std::string> candidates = options.scratch_dirs;
    if (candidates.empty()) {
        if (const char* tmp = std::getenv("TMPDIR")) candidates.emplace_back(tmp);
        candidates.emplace_back("/var/tmp");
        candidates.emplace_back("/tmp");
    }
    progress.step("preparing a test file on " + (d.mount_point.empty() ? d.dir : d.mount_point));
    std::optional<TestFile> file;
    std::vector<std::string> tried;
    for (const std::string& c : candidates) {
        if (!same_device(c, dir_st.st_dev) || is_inside(c, dir) || ::access(c.c_str(), W_OK) != 0) {
            continue;
        }
        auto made = make_scratch(c, options.quick ? kQuickScratchBytes : kScratchBytes, progress);
        if (made) {
            d.method = "scratch";
            d.write_bandwidth = made->write_bandwidth;
            file.emplace(std::move(made).value());
            break;
        }
        tried.push_back(made.error().message);
    }
    if (!file) {
        const auto [path, size] = largest_file(d.dir);
        const uint32_t largest_block = disk_test_blocks(options.quick).back();
        if (size >= largest_block) {
            TestFile f;
            f.path = path;
            f.label = path;
            f.size = size;
            file.emplace(std::move(f));
            d.method = "existing-file";
            d.file = path;
            if (size < kScratchBytes) {
                d.note = "measured on a small file (" + format_bytes(size) +
                         "); a cache in the device may inflate the figures";
            }
        } else {
            d.note =
                "nowhere to measure: no writable directory with room on this filesystem "
                "outside " +
                d.dir + " and no file of at least " + format_bytes(largest_block) + " in it";
            for (const std::string& t : tried) d.note += "; " + t;
            return d;
        }
    }
    d.file_size = file->size;

    const double cell_seconds = options.quick ? kQuickCellSeconds : kCellSeconds;
    for (uint32_t block : disk_test_blocks(options.quick)) {
        for (uint32_t qd : disk_test_queue_depths(options.quick)) {
            progress.step("disk " + disk_block_label(block) + " reads, queue depth " +
                          std::to_string(qd));
            if (file->size < block) continue;
            auto rate = run_cell(*file, block, qd, cell_seconds, d);
            if (!rate) {
                d.note += (d.note.empty() ? "" : "; ") + rate.error().message;
                return d;
            }
            d.reads.push_back(*rate);
        }
    }
    return d;
}

}  // namespace strata
