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

#include "plan/plan.h"
#include "util/progress.h"
#include "util/units.h"
namespace strata {

static_assert(kDeviceStagingBytes == kDeviceStagingHostBytes,
              "the plan counts the pinned staging a load onto the GPU holds");

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
        pin_ = std::move(o.pin_);  // ours released while our buffer still exists
        buffer_ = std::move(o.buffer_);
        device_buffer_ = std::move(o.device_buffer_);
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

namespace {

// Runs of held tensors in file order (a tensor left out ends a run), each widened to the disk's
// blocks and given its place in the arena; run_of[i] is tensor i's run (SIZE_MAX: none).
struct ArenaRuns {
    std::vector<Run> runs;
    std::vector<size_t> run_of;
    size_t total = 0;         // arena bytes
    uint64_t file_bytes = 0;  // bytes of the file the runs cover
    uint64_t weight_bytes = 0;
};

ArenaRuns plan_runs(const ModelInfo& info, const std::vector<bool>& held, StreamReader& reader) {
    const auto& tensors = info.file.tensors;
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
    ArenaRuns a;
    a.run_of.assign(tensors.size(), SIZE_MAX);
    bool open_run = false;
    for (size_t i : order) {
        const TensorInfo& t = tensors[i];
        if (!held[i]) {
            open_run = false;
            continue;
        }
        a.weight_bytes += t.n_bytes;
        if (t.n_bytes == 0) continue;
        if (!open_run) a.runs.push_back({t.offset, t.offset, 0, {}});
        open_run = true;
        a.runs.back().end = std::max(a.runs.back().end, t.offset + t.n_bytes);
        a.run_of[i] = a.runs.size() - 1;
    }
    for (Run& r : a.runs) {
        r.widened = reader.io->widen(r.begin, size_t(r.end - r.begin));
        r.at = a.total;
        a.total += round_up(size_t(r.widened.length), kAlign);
        a.file_bytes += r.end - r.begin;
    }
    return a;
}

Result<BoundViews> bind_runs(const ModelInfo& info, const std::vector<bool>& held,
                             const ArenaRuns& a, const std::byte* base) {
    const auto& tensors = info.file.tensors;
    return bind_tensor_views(info, [&](size_t i) -> const std::byte* {
        if (!held[i]) return nullptr;
        if (a.run_of[i] == SIZE_MAX) return base;  // an empty tensor
        const Run& r = a.runs[a.run_of[i]];
        return base + r.at + r.widened.slice + (tensors[i].offset - r.begin);
    });
}

// Tells every bound view whose memory it points into.
void set_place(BoundViews& v, MemoryPlace where) {
    auto mark = [&](LayerView& l) {
        for (TensorView& t : l.weights) t.where = where;
        for (TensorView& t : l.biases) t.where = where;
    };
    mark(v.globals);
    for (LayerView& l : v.layers) mark(l);
    for (auto& layer : v.experts) {
        for (ExpertView& e : layer) {
            e.gate.where = e.up.where = e.down.where = where;
        }
    }
}

}  // namespace

Result<Arena> Arena::load(const ModelInfo& info, const std::vector<bool>& held,
                          StreamReader& reader, const ResidentLoadOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    Arena arena;
    const ArenaRuns a = plan_runs(info, held, reader);
    arena.weight_bytes_ = a.weight_bytes;
    const size_t total = a.total;
    auto buffer = AlignedBuffer::allocate(std::max<size_t>(total, 1));
    if (!buffer) {
        return err("cannot allocate " + format_bytes(total) + " for the resident weights of " +
                   info.file.path + ": " + buffer.error().message);
    }
    arena.buffer_ = std::move(*buffer);

    // Each run in requests of kChunkBytes along its widened range, block-aligned after the first.
    ByteProgress progress(options.progress_out, "loading weights", a.file_bytes, options.progress,
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
    for (const Run& r : a.runs) {
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

    STRATA_ASSIGN(arena.views_, bind_runs(info, held, a, arena.buffer_.data()));
    arena.load_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return arena;
}

Result<Arena> Arena::load_to_device(const ModelInfo& info, const std::vector<bool>& held,
                                    StreamReader& reader, const ResidentLoadOptions& options,
                                    int device) {
    const auto start = std::chrono::steady_clock::now();
    Arena arena;
    const ArenaRuns a = plan_runs(info, held, reader);
    arena.weight_bytes_ = a.weight_bytes;
    auto buffer = gpu::DeviceBuffer::allocate(std::max<size_t>(a.total, 1), device);
    if (!buffer) {
        return err("cannot hold the weights of " + info.file.path +
                   " on the GPU: " + buffer.error().message);
    }
    arena.device_buffer_ = std::move(*buffer);
    STRATA_ASSIGN(gpu::CopyQueue copies, gpu::CopyQueue::create(device));
    // Staging chunks, each a read request widened to blocks (one block either side at most).
    struct Chunk {
        gpu::PinnedBuffer staging;
        uint64_t read_tag = 0, copy_ticket = 0;
        bool reading = false;
        uint64_t begin = 0, end = 0, c = 0;
        std::byte* dst = nullptr;
    };
    std::vector<Chunk> chunks(kDeviceStagingChunks);
    for (Chunk& ch : chunks) {
        STRATA_ASSIGN(ch.staging,
                      gpu::PinnedBuffer::allocate(kDeviceStagingBytes / kDeviceStagingChunks));
    }

    ByteProgress progress(options.progress_out, "loading weights to the GPU", a.file_bytes,
                          options.progress, ByteProgress::is_terminal(options.progress_out));
    uint64_t done = 0;
    Result<void> first;
    size_t next = 0;  // the chunk to use next, round robin: reads complete in order of use
    // Waits for a chunk's read and queues its copy to the GPU.
    auto land = [&](Chunk& ch) {
        if (!ch.reading) return;
        ch.reading = false;
        auto r = reader.io->wait(ch.read_tag);
        if (!r) {
            if (first) first = std::move(r);
            return;
        }
        if (!first) return;
        const std::byte* src = ch.staging.data() + (ch.begin - ch.c);
        auto t = copies.submit(ch.dst, src, size_t(ch.end - ch.begin));
        if (!t) {
            first = t.take_error();
            return;
        }
        ch.copy_ticket = *t;
        done += ch.end - ch.begin;
        progress.update(done);
    };
    for (const Run& r : a.runs) {
        for (uint64_t c = r.widened.offset; c < r.end && first; c += kDeviceStagingChunk) {
            Chunk& ch = chunks[next];
            next = (next + 1) % chunks.size();
            land(ch);  // its last read goes to the GPU before the chunk is refilled
            if (ch.copy_ticket) {
                if (auto w = copies.wait(ch.copy_ticket); !w && first) first = std::move(w);
                ch.copy_ticket = 0;
            }
            if (!first) break;
            ch.c = c;
            ch.begin = std::max(c, r.begin);
            ch.end = std::min(c + kDeviceStagingChunk, r.end);
            ch.dst = arena.device_buffer_.data() + r.at + r.widened.slice + (ch.begin - r.begin);
            ch.read_tag = reader.tag();
            if (auto s = reader.io->submit({ch.begin, size_t(ch.end - ch.begin), ch.staging.data(),
                                            ch.read_tag, ReadPlacement::Widened});
                !s) {
                first = std::move(s);
                break;
            }
            ch.reading = true;
        }
        if (!first) break;
    }
    // Every chunk in the order it was used: the oldest read first.
    for (size_t i = 0; i < chunks.size(); ++i) land(chunks[(next + i) % chunks.size()]);
    if (auto d = copies.drain(); !d && first) first = std::move(d);
    STRATA_TRY(first);
    progress.finish();

    STRATA_ASSIGN(arena.views_, bind_runs(info, held, a, arena.device_buffer_.data()));
    set_place(arena.views_, MemoryPlace{MemoryKind::Device, device});
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

Result<void> Arena::pin_for_gpu() {
    if (pin_.pinned() || mapping_ || buffer_.size() == 0) return {};
    STRATA_ASSIGN(pin_, gpu::HostPin::pin(buffer_.data(), buffer_.size()));
    return {};
}

}  // namespace strata
