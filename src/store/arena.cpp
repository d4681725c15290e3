#include "store/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <numeric>
#include <utility>

#include "util/progress.h"
#include "util/units.h"
namespace strata {

namespace {

constexpr size_t kAlign = AlignedBuffer::kAlignment;
constexpr uint64_t kChunkBytes = 32u << 20;  // one read request
constexpr size_t kChunksInFlight = 8;

struct Run {
    uint64_t begin = 0, end = 0;  // file bytes of its tensors
    size_t at = 0;                // where its widened range starts in the arena
    WidenedRange widened{};
};

}  // namespace

Arena::Arena(Arena&& o) noexcept {
    *this = std::move(o);
}

Arena& Arena::operator=(Arena&& o) noexcept {
    if (this != &o) {
        if (mapping_) ::munmap(mapping_, mapping_bytes_);
        buffer_ = std::move(o.buffer_);
        mapping_ = std::exchange(o.mapping_, nullptr);
        mapping_bytes_ = std::exchange(o.mapping_bytes_, 0);
        views_ = std::move(o.views_);
        weight_bytes_ = o.weight_bytes_;
        load_seconds_ = o.load_seconds_;
    }
    return *this;
}

Arena::~Arena() {
    if (mapping_) ::munmap(mapping_, mapping_bytes_);
}

Result<Arena> Arena::load(const ModelInfo& info, const std::vector<bool>& held,
                          StreamReader& reader, const ResidentLoadOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    const auto& tensors = info.file.tensors;
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });

    // Runs of held tensors in file order; a tensor left out ends the run.
    std::vector<Run> runs;
    std::vector<size_t> run_of(tensors.size(), SIZE_MAX);
    bool open_run = false;
    Arena arena;
    for (size_t i : order) {
        const TensorInfo& t = tensors[i];
        if (!held[i]) {
            open_run = false;
            continue;
        }
        arena.weight_bytes_ += t.n_bytes;
        if (t.n_bytes == 0) continue;
        if (!open_run) runs.push_back({t.offset, t.offset, 0, {}});
        open_run = true;
        runs.back().end = std::max(runs.back().end, t.offset + t.n_bytes);
        run_of[i] = runs.size() - 1;
    }
    size_t total = 0;
    uint64_t file_bytes = 0;
    for (Run& r : runs) {
        r.widened = reader.io->widen(r.begin, size_t(r.end - r.begin));
        r.at = total;
        total += round_up(size_t(r.widened.length), kAlign);
        file_bytes += r.end - r.begin;
    }
    auto buffer = AlignedBuffer::allocate(std::max<size_t>(total, 1));
    if (!buffer) {
        return err("cannot allocate " + format_bytes(total) + " for the resident weights of " +
                   info.file.path + ": " + buffer.error().message);
    }
    arena.buffer_ = std::move(*buffer);

    // Each run in requests of kChunkBytes along its widened range, block-aligned after the first.
    ByteProgress progress(options.progress_out, "loading weights", file_bytes, options.progress,
                          ByteProgress::is_terminal(options.progress_out));
    std::deque<std::pair<uint64_t, uint64_t>> in_flight;  // tag, bytes
    uint64_t done = 0;
    Result<void> first;  // every submitted read is collected, even after an error
    auto collect = [&] {
        auto r = reader.io->wait(in_flight.front().first);
        if (!r && first) first = std::move(r);
        done += in_flight.front().second;
        progress.update(done);
        in_flight.pop_front();
    };
    for (const Run& r : runs) {
        for (uint64_t c = r.widened.offset; c < r.end && first; c += kChunkBytes) {
            const uint64_t begin = std::max(c, r.begin);
            const uint64_t end = std::min(c + kChunkBytes, r.end);
            if (in_flight.size() == kChunksInFlight) collect();
            const uint64_t tag = reader.tag();
            std::byte* dst = arena.buffer_.data() + r.at + (c - r.widened.offset);
            if (auto s = reader.io->submit(
                    {begin, size_t(end - begin), dst, tag, ReadPlacement::Widened});
                !s) {
                first = std::move(s);
                break;
            }
            in_flight.push_back({tag, end - begin});
        }
        if (!first) break;
    }
    while (!in_flight.empty()) collect();
    STRATA_TRY(first);
    progress.finish();

    const std::byte* base = arena.buffer_.data();
    STRATA_ASSIGN(arena.views_, bind_tensor_views(info, [&](size_t i) -> const std::byte* {
                      if (!held[i]) return nullptr;
                      if (run_of[i] == SIZE_MAX) return base;  // an empty tensor
                      const Run& r = runs[run_of[i]];
                      return base + r.at + r.widened.slice + (tensors[i].offset - r.begin);
                  }));
    arena.load_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return arena;
}

Result<Arena> Arena::map(const ModelInfo& info) {
    const std::string& path = info.file.path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err("cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
        const int e = errno;
        ::close(fd);
        return err("cannot map " + path + ": " + (e ? std::strerror(e) : "empty file"));
    }
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);  // the mapping keeps the file
    if (p == MAP_FAILED) return err("cannot map " + path + ": " + std::strerror(e));
    Arena arena;
    arena.mapping_ = p;
    arena.mapping_bytes_ = size_t(st.st_size);
    const auto* base = static_cast<const std::byte*>(p);
    for (const TensorInfo& t : info.file.tensors) arena.weight_bytes_ += t.n_bytes;
    STRATA_ASSIGN(arena.views_, bind_tensor_views(info, [&](size_t i) {
                      return base + info.file.tensors[i].offset;
                  }));
    return arena;
}

}  // namespace strata
