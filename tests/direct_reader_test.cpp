// DirectReader: exact bytes for arbitrary ranges on both back ends and in both read modes, many
// reads in flight, short reads re-issued, errors for reads past the end and files that shrink,
// and reads that leave nothing in the page cache.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/direct_reader.h"
#include "test_support.h"

namespace strata {
namespace {

using test::TempDir;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(n);
    for (auto& b : out) b = static_cast<uint8_t>(rng());
    return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good());
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& v, uint64_t offset, size_t length) {
    return {v.begin() + static_cast<ptrdiff_t>(offset),
            v.begin() + static_cast<ptrdiff_t>(offset + length)};
}

// Wraps a real back end: can shorten reads (so DirectReader must re-issue the rest), fail reads
// from some offset on with an errno, and records the most reads it ever had in flight.
class InstrumentedBackend final : public IoBackend {
  public:
    InstrumentedBackend(std::unique_ptr<IoBackend> inner, uint32_t shorten_granule, uint64_t seed)
        : inner_(std::move(inner)), granule_(shorten_granule), rng_(seed) {}

    const char* name() const override { return inner_->name(); }

    Result<void> start(std::span<const IoRead> reads) override {
        std::vector<IoRead> changed(reads.begin(), reads.end());
        std::vector<IoRead> pass;
        for (IoRead& r : changed) {
            if (fail_from_ && r.offset + r.length > *fail_from_) {
                failed_.push_back({r.id, -fail_errno_});
                continue;
            }
            // Deliver a random number of whole granules, at least one.
            if (granule_ && r.length > granule_) {
                const uint32_t granules = r.length / granule_;
                std::uniform_int_distribution<uint32_t> pick(1, granules);
                r.length = std::min(r.length, pick(rng_) * granule_);
            }
            pass.push_back(r);
        }
        in_flight_ += reads.size();
        max_in_flight_ = std::max(max_in_flight_, in_flight_);
        return inner_->start(pass);
    }

    Result<void> reap(std::vector<IoCompletion>& out, bool wait) override {
        const size_t before = out.size();
        if (!failed_.empty()) {
            out.insert(out.end(), failed_.begin(), failed_.end());
            failed_.clear();
        } else {
            STRATA_TRY(inner_->reap(out, wait));
        }
        in_flight_ -= out.size() - before;
        return {};
    }

    void fail_from(uint64_t offset, int error) {
        fail_from_ = offset;
        fail_errno_ = error;
    }
    size_t max_in_flight() const { return max_in_flight_; }

  private:
    std::unique_ptr<IoBackend> inner_;
    uint32_t granule_;
    std::mt19937_64 rng_;
    std::optional<uint64_t> fail_from_;
    int fail_errno_ = 0;
    std::vector<IoCompletion> failed_;
    size_t in_flight_ = 0, max_in_flight_ = 0;
};

struct Mode {
    IoBackendKind backend;
    bool direct;
};

std::string mode_name(const testing::TestParamInfo<Mode>& info) {
    return std::string(info.param.backend == IoBackendKind::IoUring ? "IoUring" : "Pread") +
           (info.param.direct ? "Direct" : "Buffered");
}

class DirectReaderModes : public testing::TestWithParam<Mode> {
  protected:
    DirectReader::Options options() const {
        DirectReader::Options o;
        o.backend = GetParam().backend;
        o.try_direct = GetParam().direct;
        return o;
    }
    std::unique_ptr<DirectReader> open_reader(const std::string& path,
                                              DirectReader::Options o) const {
        auto r = DirectReader::open(path, o);
        if (!r && GetParam().backend == IoBackendKind::IoUring) {
            // A container that refuses io_uring: the pread instantiation still runs.
            return nullptr;
        }
        EXPECT_TRUE(r.ok()) << r.error().message;
        return r ? std::move(r).value() : nullptr;
    }
    std::unique_ptr<DirectReader> open_reader(const std::string& path) const {
        return open_reader(path, options());
    }
    // The parameter's back end on its own, for wrapping; null when io_uring is refused.
    std::unique_ptr<IoBackend> make_backend(unsigned queue_depth) const {
        if (GetParam().backend == IoBackendKind::Pread) return make_pread_backend(8);
        auto u = make_io_uring_backend(queue_depth);
        return u ? std::move(u).value() : nullptr;
    }
};

#define OPEN_OR_SKIP(var, ...)           \
    auto var = open_reader(__VA_ARGS__); \
    if (!var) GTEST_SKIP() << "io_uring is not available on this machine"

TEST_P(DirectReaderModes, ReportsItsMode) {
    TempDir dir;
    write_file(dir.file("f"), random_bytes(10000, 1));
    OPEN_OR_SKIP(reader, dir.file("f"));
    EXPECT_EQ(reader->size(), 10000u);
    EXPECT_STREQ(reader->backend_name(),
                 GetParam().backend == IoBackendKind::IoUring ? "io_uring" : "pread");
    if (!GetParam().direct) {
        EXPECT_FALSE(reader->direct());
        EXPECT_EQ(reader->block_size(), 1u);
    } else if (reader->direct()) {
        const uint32_t b = reader->block_size();
        EXPECT_GE(b, 512u);
        EXPECT_EQ(b & (b - 1), 0u) << "block size must be a power of two";
    } else {
        // The filesystem of the temp dir refuses O_DIRECT: the reader must say why.
        EXPECT_FALSE(reader->fallback_note().empty());
    }
}

TEST_P(DirectReaderModes, ArbitraryRangesReturnTheFileBytes) {
    TempDir dir;
    const size_t size = 3 * 1024 * 1024 + 1234;  // not a multiple of any block size
    const auto bytes = random_bytes(size, 2);
    write_file(dir.file("f"), bytes);
    DirectReader::Options o = options();
    o.max_read_bytes = 64 * 1024;  // large ranges become several reads
    OPEN_OR_SKIP(reader, dir.file("f"), o);

    struct Range {
        uint64_t offset;
        size_t length;
    };
    std::vector<Range> ranges = {
        {0, 1},
        {0, size},
        {size - 1, 1},
        {size - 100, 100},
        {size, 0},
        {0, 0},
        {4093, 6},
        {4096 - 1, 4096 + 2},
        {511, 2},
        {512, 512},
        {8191, 1},
        {65536 - 7, 65536 + 14},
        {size - 4097, 4097},
        {size - 70000, 70000},
        {1234567, 0},
        {32, 4 * 1024 * 1024 - 4096},
    };
    ranges.erase(std::remove_if(ranges.begin(), ranges.end(),
                                [&](const Range& r) { return r.offset + r.length > size; }),
                 ranges.end());
    std::mt19937_64 rng(3);
    for (int i = 0; i < 300; ++i) {
        const uint64_t offset = rng() % size;
        const size_t max_len = size - offset;
        const size_t length = (i % 3 == 0) ? rng() % std::min<size_t>(max_len + 1, 64)
                                           : rng() % std::min<size_t>(max_len + 1, 300000);
        ranges.push_back({offset, length});
    }
    for (const Range& r : ranges) {
        // Unaligned destinations on purpose: Exact reads must not care.
        std::vector<uint8_t> dst(r.length + 3, 0xEE);
        auto ok = reader->read(r.offset, r.length, dst.data() + 3);
        ASSERT_TRUE(ok.ok()) << ok.error().message;
        ASSERT_EQ(std::vector<uint8_t>(dst.begin() + 3, dst.end()),
                  slice(bytes, r.offset, r.length))
            << "range " << r.offset << "+" << r.length;
        ASSERT_EQ(dst[2], 0xEE) << "wrote before the destination";
    }
    EXPECT_EQ(reader->in_flight(), 0u);
}

TEST_P(DirectReaderModes, WidenedReadsLandInPlaceWithoutCopy) {
    TempDir dir;
    const size_t size = 1024 * 1024 + 77;
    const auto bytes = random_bytes(size, 4);
    write_file(dir.file("f"), bytes);
    OPEN_OR_SKIP(reader, dir.file("f"));
    const uint64_t block = reader->block_size();
    std::mt19937_64 rng(5);
    for (int i = 0; i < 100; ++i) {
        const uint64_t offset = rng() % size;
        const size_t length = 1 + rng() % std::min<uint64_t>(size - offset, 200000);
        const WidenedRange w = reader->widen(offset, length);
        EXPECT_EQ(w.offset % block, 0u);
        EXPECT_EQ(w.length % block, 0u);
        EXPECT_EQ(w.offset + w.slice, offset);
        EXPECT_GE(w.offset + w.length, offset + length);
        EXPECT_LT(w.slice, block);
        auto buf = AlignedBuffer::allocate(w.length);
        ASSERT_TRUE(buf.ok());
        ASSERT_TRUE(reader->submit({offset, length, buf->data(), 7, ReadPlacement::Widened}).ok());
        auto ok = reader->wait(7);
        ASSERT_TRUE(ok.ok()) << ok.error().message;
        const uint8_t* got = reinterpret_cast<const uint8_t*>(buf->data());
        ASSERT_EQ(std::vector<uint8_t>(got + w.slice, got + w.slice + length),
                  slice(bytes, offset, length));
        // The widened bytes around the request are file bytes too (up to the end of the file).
        const uint64_t file_end = std::min<uint64_t>(w.offset + w.length, size);
        ASSERT_EQ(std::vector<uint8_t>(got, got + (file_end - w.offset)),
                  slice(bytes, w.offset, file_end - w.offset));
    }
    // A misaligned destination for a Widened read is refused, not handed to the kernel.
    std::vector<uint8_t> plain(8192 + 1);
    EXPECT_FALSE(reader->submit({0, 100, plain.data() + 1, 8, ReadPlacement::Widened}).ok());
}

TEST_P(DirectReaderModes, ManyRequestsInFlightCompleteInAnyWaitOrder) {
    TempDir dir;
    const size_t size = 8 * 1024 * 1024;
    const auto bytes = random_bytes(size, 6);
    write_file(dir.file("f"), bytes);
    DirectReader::Options o = options();
    o.queue_depth = 16;
    o.max_read_bytes = 16 * 1024;
    o.staging_bytes = 4 * 16 * 1024;  // fewer staging buffers than reads in flight
    std::unique_ptr<IoBackend> inner = make_backend(o.queue_depth);
    if (!inner) GTEST_SKIP() << "io_uring is not available on this machine";
    const int fd = ::open(dir.file("f").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto instrumented = std::make_unique<InstrumentedBackend>(std::move(inner), 0, 0);
    InstrumentedBackend* probe = instrumented.get();
    auto opened = DirectReader::adopt_with_backend(fd, dir.file("f"), o, std::move(instrumented));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    auto& reader = *opened;

    constexpr int kRequests = 200;
    std::mt19937_64 rng(7);
    std::vector<ReadRequest> reqs;
    std::vector<std::vector<uint8_t>> dsts(kRequests);
    std::vector<AlignedBuffer> aligned(kRequests);
    uint64_t requested = 0;
    for (int i = 0; i < kRequests; ++i) {
        const uint64_t offset = rng() % size;
        const size_t length = rng() % std::min<uint64_t>(size - offset, 100000);
        ReadRequest req{offset, length, nullptr, static_cast<uint64_t>(1000 + i)};
        if (i % 4 == 0) {
            req.placement = ReadPlacement::Widened;
            aligned[i] = std::move(
                AlignedBuffer::allocate(reader->widen(offset, length).length + 1).value());
            req.dst = aligned[i].data();
        } else {
            dsts[i].assign(length, 0);
            req.dst = dsts[i].data();
        }
        reqs.push_back(req);
        requested += length;
        ASSERT_TRUE(reader->submit(req).ok());
    }
    EXPECT_FALSE(reader->submit(reqs[5]).ok()) << "a tag still pending must be refused";
    EXPECT_FALSE(reader->wait(99).ok()) << "an unknown tag must be an error";

    auto check = [&](int i) {
        const ReadRequest& req = reqs[static_cast<size_t>(i)];
        const uint8_t* got = static_cast<const uint8_t*>(req.dst);
        if (req.placement == ReadPlacement::Widened)
            got += reader->widen(req.file_offset, req.length).slice;
        EXPECT_EQ(std::vector<uint8_t>(got, got + req.length),
                  slice(bytes, req.file_offset, req.length))
            << "request " << i;
    };
    // Half collected by tag in reverse order, the rest by poll().
    for (int i = kRequests - 1; i >= kRequests / 2; --i) {
        auto ok = reader->wait(reqs[static_cast<size_t>(i)].tag);
        ASSERT_TRUE(ok.ok()) << ok.error().message;
        check(i);
    }
    int polled = 0;
    while (polled < kRequests / 2) {
        for (const ReadCompletion& c : reader->poll()) {
            ASSERT_TRUE(c.status.ok()) << c.status.error().message;
            check(static_cast<int>(c.tag - 1000));
            ++polled;
        }
    }
    EXPECT_EQ(polled, kRequests / 2);
    EXPECT_EQ(reader->in_flight(), 0u);
    EXPECT_GT(probe->max_in_flight(), 1u) << "reads were not overlapped";
    EXPECT_LE(probe->max_in_flight(), o.queue_depth);

    const ReadStats& s = reader->stats();
    EXPECT_EQ(s.requests, static_cast<uint64_t>(kRequests));
    EXPECT_EQ(s.bytes_requested, requested);
    EXPECT_GE(s.bytes_read, requested);
    EXPECT_GE(s.reads, static_cast<uint64_t>(kRequests / 2));
}

TEST_P(DirectReaderModes, ShortReadsAreReissuedForTheRest) {
    TempDir dir;
    const size_t size = 2 * 1024 * 1024 + 300;
    const auto bytes = random_bytes(size, 8);
    write_file(dir.file("f"), bytes);
    DirectReader::Options o = options();
    o.max_read_bytes = 256 * 1024;
    // Probe the block size first: the shortening must respect it in direct mode, as the kernel
    // does.
    OPEN_OR_SKIP(probe_reader, dir.file("f"), o);
    const bool direct = probe_reader->direct();
    const uint32_t granule = direct ? probe_reader->block_size() : 1000;
    probe_reader.reset();
    o.try_direct = direct;

    const int fd = ::open(dir.file("f").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto backend = std::make_unique<InstrumentedBackend>(make_backend(o.queue_depth), granule, 9);
    auto opened = DirectReader::adopt_with_backend(fd, dir.file("f"), o, std::move(backend));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    auto& reader = *opened;
    std::mt19937_64 rng(10);
    for (int i = 0; i < 50; ++i) {
        const uint64_t offset = rng() % size;
        const size_t length = rng() % (size - offset + 1);
        std::vector<uint8_t> dst(length);
        auto ok = reader->read(offset, length, dst.data());
        ASSERT_TRUE(ok.ok()) << ok.error().message;
        ASSERT_EQ(dst, slice(bytes, offset, length));
    }
    EXPECT_GT(reader->stats().short_reads, 0u);
}

TEST_P(DirectReaderModes, ReadPastTheEndIsAnErrorNamingTheFile) {
    TempDir dir;
    write_file(dir.file("model.gguf"), random_bytes(5000, 11));
    OPEN_OR_SKIP(reader, dir.file("model.gguf"));
    std::vector<uint8_t> dst(100);
    for (auto [offset, length] :
         {std::pair<uint64_t, size_t>{4990, 11}, {5000, 1}, {6000, 0}, {UINT64_MAX - 5, 10}}) {
        auto r = reader->read(offset, length, dst.data());
        ASSERT_FALSE(r.ok()) << offset << "+" << length;
        EXPECT_NE(r.error().message.find(dir.file("model.gguf")), std::string::npos)
            << r.error().message;
        EXPECT_NE(r.error().message.find("past the end"), std::string::npos) << r.error().message;
    }
    EXPECT_EQ(reader->stats().bytes_read, 0u);
    // The reader is still usable.
    ASSERT_TRUE(reader->read(4990, 10, dst.data()).ok());
}

TEST_P(DirectReaderModes, FileTruncatedAfterOpenGivesAnErrorNotGarbage) {
    TempDir dir;
    const size_t size = 1024 * 1024;
    const auto bytes = random_bytes(size, 12);
    write_file(dir.file("f"), bytes);
    OPEN_OR_SKIP(reader, dir.file("f"));
    ASSERT_EQ(::truncate(dir.file("f").c_str(), 300000), 0);

    std::vector<uint8_t> dst(200000);
    auto before = reader->read(1000, 5000, dst.data());
    ASSERT_TRUE(before.ok()) << before.error().message;
    EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 5000), slice(bytes, 1000, 5000));
    for (auto [offset, length] : {std::pair<uint64_t, size_t>{299000, 2000},
                                  {500000, 1000},
                                  {size - 10, 10},
                                  {250000, 100000}}) {
        auto r = reader->read(offset, length, dst.data());
        ASSERT_FALSE(r.ok()) << "read " << offset << "+" << length << " of a truncated file";
        EXPECT_NE(r.error().message.find(dir.file("f")), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("ends at byte"), std::string::npos) << r.error().message;
    }
}

TEST_P(DirectReaderModes, KernelErrorsNameFileOffsetAndErrno) {
    TempDir dir;
    write_file(dir.file("f"), random_bytes(1 << 20, 13));
    DirectReader::Options o = options();
    OPEN_OR_SKIP(probe_reader, dir.file("f"), o);
    o.try_direct = probe_reader->direct();
    probe_reader.reset();
    const int fd = ::open(dir.file("f").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto backend = std::make_unique<InstrumentedBackend>(make_backend(o.queue_depth), 0, 0);
    backend->fail_from(600000, EIO);
    auto opened = DirectReader::adopt_with_backend(fd, dir.file("f"), o, std::move(backend));
    ASSERT_TRUE(opened.ok());
    std::vector<uint8_t> dst(100000);
    EXPECT_TRUE((*opened)->read(0, 100000, dst.data()).ok());
    auto r = (*opened)->read(650000, 1000, dst.data());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(dir.file("f")), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(std::strerror(EIO)), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("offset 6"), std::string::npos) << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(AllModes, DirectReaderModes,
                         testing::Values(Mode{IoBackendKind::IoUring, true},
                                         Mode{IoBackendKind::Pread, true},
                                         Mode{IoBackendKind::IoUring, false},
                                         Mode{IoBackendKind::Pread, false}),
                         mode_name);

TEST(DirectReader, IoUringAndPreadBackEndsAgree) {
    TempDir dir;
    const size_t size = 4 * 1024 * 1024 + 4321;
    const auto bytes = random_bytes(size, 14);
    write_file(dir.file("f"), bytes);
    DirectReader::Options uo, po;
    uo.backend = IoBackendKind::IoUring;
    po.backend = IoBackendKind::Pread;
    auto uring = DirectReader::open(dir.file("f"), uo);
    if (!uring) GTEST_SKIP() << uring.error().message;
    auto pread = DirectReader::open(dir.file("f"), po);
    ASSERT_TRUE(pread.ok());
    EXPECT_EQ((*uring)->direct(), (*pread)->direct());
    EXPECT_EQ((*uring)->block_size(), (*pread)->block_size());
    std::mt19937_64 rng(15);
    std::vector<ReadRequest> ur, pr;
    std::vector<std::vector<uint8_t>> ub(64), pb(64);
    for (size_t i = 0; i < 64; ++i) {
        const uint64_t offset = rng() % size;
        const size_t length = rng() % std::min<uint64_t>(size - offset + 1, 500000);
        ub[i].resize(length);
        pb[i].resize(length);
        ur.push_back({offset, length, ub[i].data(), i});
        pr.push_back({offset, length, pb[i].data(), i});
    }
    ASSERT_TRUE((*uring)->read_ranges(ur).ok());
    ASSERT_TRUE((*pread)->read_ranges(pr).ok());
    for (size_t i = 0; i < 64; ++i) {
        ASSERT_EQ(ub[i], pb[i]) << "range " << i;
        ASSERT_EQ(ub[i], slice(bytes, ur[i].file_offset, ur[i].length));
    }
    EXPECT_EQ((*uring)->stats().bytes_read, (*pread)->stats().bytes_read);
    EXPECT_EQ((*uring)->stats().bytes_requested, (*pread)->stats().bytes_requested);
}

TEST(DirectReader, StatsCountWidenedBytes) {
    TempDir dir;
    write_file(dir.file("f"), random_bytes(1 << 20, 16));
    auto opened = DirectReader::open(dir.file("f"));
    ASSERT_TRUE(opened.ok());
    auto& reader = *opened;
    if (!reader->direct()) GTEST_SKIP() << reader->fallback_note();
    const uint64_t b = reader->block_size();
    std::vector<uint8_t> dst(10);
    ASSERT_TRUE(reader->read(b + 5, 10, dst.data()).ok());      // inside one block
    ASSERT_TRUE(reader->read(2 * b - 5, 10, dst.data()).ok());  // across a block boundary
    const ReadStats& s = reader->stats();
    EXPECT_EQ(s.requests, 2u);
    EXPECT_EQ(s.bytes_requested, 20u);
    EXPECT_EQ(s.bytes_read, 3 * b);
    EXPECT_EQ(s.reads, 2u);
    EXPECT_EQ(s.short_reads, 0u);
}

TEST(DirectReader, EnvironmentSelectsTheBackend) {
    TempDir dir;
    write_file(dir.file("f"), random_bytes(4096, 17));
    const char* old = std::getenv("STRATA_IO");
    const std::string saved = old ? old : "";
    ::setenv("STRATA_IO", "pread", 1);
    auto forced = DirectReader::open(dir.file("f"));
    ::setenv("STRATA_IO", "bogus", 1);
    auto bad = DirectReader::open(dir.file("f"));
    if (old) {
        ::setenv("STRATA_IO", saved.c_str(), 1);
    } else {
        ::unsetenv("STRATA_IO");
    }
    ASSERT_TRUE(forced.ok()) << forced.error().message;
    EXPECT_STREQ((*forced)->backend_name(), "pread");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("STRATA_IO"), std::string::npos) << bad.error().message;
    EXPECT_FALSE(parse_io_backend("uringg").ok());
    EXPECT_EQ(*parse_io_backend("io_uring"), IoBackendKind::IoUring);
}

TEST(DirectReader, MissingFileAndDirectoryAreErrors) {
    TempDir dir;
    auto missing = DirectReader::open(dir.file("nope.gguf"));
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("nope.gguf"), std::string::npos);
    EXPECT_FALSE(DirectReader::open(dir.path().string()).ok());
}

// Pages of the file in the page cache, counted with mincore on a mapping of it.
size_t resident_pages(const std::string& path, size_t size) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return SIZE_MAX;
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return SIZE_MAX;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((size + page - 1) / page);
    size_t resident = SIZE_MAX;
    if (::mincore(map, size, vec.data()) == 0) {
        resident = static_cast<size_t>(
            std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; }));
    }
    ::munmap(map, size);
    return resident;
}

bool drop_from_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return false;
    ::fdatasync(fd);
    const bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    ::close(fd);
    return ok;
}

TEST(DirectReader, ReadsLeaveNothingInThePageCache) {
    TempDir dir;
    const size_t size = 16 * 1024 * 1024;
    const std::string path = dir.file("f");
    write_file(path, random_bytes(size, 18));
    ASSERT_TRUE(drop_from_page_cache(path));
    const size_t pages = size / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    if (resident_pages(path, size) > pages / 100) {
        GTEST_SKIP() << "this filesystem keeps file pages in memory (tmpfs?): the page cache "
                        "cannot be observed here";
    }
    std::vector<uint8_t> dst(size);
    for (bool direct : {true, false}) {
        DirectReader::Options o;
        o.try_direct = direct;
        auto reader = DirectReader::open(path, o);
        ASSERT_TRUE(reader.ok());
        ASSERT_TRUE((*reader)->read(0, size, dst.data()).ok());
        EXPECT_LE(resident_pages(path, size), pages / 100)
            << ((*reader)->direct() ? "direct" : "buffered") << " reads left the file cached";
    }
    // Control: a plain buffered read does fill the cache, so the check above can fail.
    {
        const int fd = ::open(path.c_str(), O_RDONLY);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::pread(fd, dst.data(), size, 0), static_cast<ssize_t>(size));
        ::close(fd);
    }
    EXPECT_GE(resident_pages(path, size), pages * 9 / 10);
}

TEST(AlignedBuffer, IsAlignedAndRoundedToBlocks) {
    for (size_t n : {size_t{1}, size_t{4096}, size_t{4097}, size_t{1} << 20}) {
        auto b = AlignedBuffer::allocate(n);
        ASSERT_TRUE(b.ok());
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % AlignedBuffer::kAlignment, 0u);
        EXPECT_GE(b->size(), n);
        EXPECT_EQ(b->size() % AlignedBuffer::kAlignment, 0u);
        std::memset(b->data(), 0xAB, b->size());
    }
    auto empty = AlignedBuffer::allocate(0);
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->empty());
    EXPECT_FALSE(AlignedBuffer::allocate(SIZE_MAX - 10).ok());
}

}  // namespace
}  // namespace strata
