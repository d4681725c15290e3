#include "store/resident_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "io/direct_reader.h"
#include "store/tensor_views.h"
#include "util/progress.h"
#include "util/units.h"

namespace strata {

namespace {

constexpr size_t kChunkBytes = 32u << 20;  // one read request
constexpr int kChunksInFlight = 8;

// Reads [offset, offset + length) of the file into dst with several large requests in flight.
Result<void> read_section(DirectReader& reader, uint64_t offset, uint64_t length, std::byte* dst,
                          ByteProgress& progress) {
    const uint64_t n_chunks = (length + kChunkBytes - 1) / kChunkBytes;
    uint64_t next = 0, done = 0, done_bytes = 0;
    auto chunk_len = [&](uint64_t c) {
        return std::min<uint64_t>(kChunkBytes, length - c * kChunkBytes);
    };
    while (done < n_chunks) {
        while (next < n_chunks && next - done < kChunksInFlight) {
            STRATA_TRY(reader.submit({.file_offset = offset + next * kChunkBytes,
                                      .length = static_cast<size_t>(chunk_len(next)),
                                      .dst = dst + next * kChunkBytes,
                                      .tag = next}));
            ++next;
        }
        STRATA_TRY(reader.wait(done));
        done_bytes += chunk_len(done);
        ++done;
        progress.update(done_bytes);
    }
    return {};
}

}  // namespace

Result<std::unique_ptr<ResidentStore>> ResidentStore::load(const ModelInfo& info,
                                                           const ResidentLoadOptions& options) {
    std::unique_ptr<ResidentStore> store(new ResidentStore());
    const GgufFile& f = info.file;
    uint64_t end = f.data_offset;
    for (const TensorInfo& t : f.tensors) end = std::max(end, t.offset + t.n_bytes);
    const uint64_t length = end - f.data_offset;
    store->data_offset_ = f.data_offset;

    const auto start = std::chrono::steady_clock::now();
    auto buffer = AlignedBuffer::allocate(std::max<uint64_t>(length, 1));
    if (!buffer) {
        return err("cannot allocate " + format_bytes(length) + " to hold the weights of " + f.path +
                   ": " + buffer.error().message);
    }
    store->data_ = std::move(*buffer);
    if (length > 0) {
        DirectReader::Options ro;
        ro.queue_depth = 16;
        STRATA_ASSIGN(auto reader, DirectReader::open(f.path, ro));
        ByteProgress progress(options.progress_out, "loading weights", length, options.progress,
                              ByteProgress::is_terminal(options.progress_out));
        STRATA_TRY(read_section(*reader, f.data_offset, length, store->data_.data(), progress));
        progress.finish();
    }
    store->base_ = store->data_.data();
    store->loaded_bytes_ = length;
    store->load_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    STRATA_TRY(store->bind(info));
    return store;
}

Result<std::unique_ptr<ResidentStore>> ResidentStore::map(const ModelInfo& info) {
    std::unique_ptr<ResidentStore> store(new ResidentStore());
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
    store->mapping_ = p;
    store->mapping_bytes_ = size_t(st.st_size);
    store->base_ = static_cast<const std::byte*>(p);
    store->data_offset_ = 0;
    STRATA_TRY(store->bind(info));
    return store;
}

ResidentStore::~ResidentStore() {
    if (mapping_) ::munmap(mapping_, mapping_bytes_);
}

Result<void> ResidentStore::bind(const ModelInfo& info) {
    STRATA_ASSIGN(BoundViews v, bind_tensor_views(info, [&](size_t i) {
                      return base_ + (info.file.tensors[i].offset - data_offset_);
                  }));
    globals_ = std::move(v.globals);
    layers_ = std::move(v.layers);
    experts_ = std::move(v.experts);
    layer_bytes_ = std::move(v.layer_bytes);
    return {};
}

Result<const LayerView*> ResidentStore::acquire_layer(int layer) {
    if (layer < 0 || static_cast<size_t>(layer) >= layers_.size()) {
        return err("layer " + std::to_string(layer) + " does not exist");
    }
    stats_.bytes_served += layer_bytes_[layer];
    return &layers_[layer];
}

Result<ExpertView> ResidentStore::acquire_expert(int layer, int expert) {
    if (layer < 0 || static_cast<size_t>(layer) >= experts_.size() || expert < 0 ||
        static_cast<size_t>(expert) >= experts_[layer].size()) {
        return err("expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                   " does not exist");
    }
    const ExpertView& ev = experts_[layer][expert];
    if (!ev.gate.present() || !ev.up.present() || !ev.down.present()) {
        return err("expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                   " lacks one of its gate, up and down matrices");
    }
    stats_.bytes_served += expert_bytes(ev);
    return ev;
}

}  // namespace strata
