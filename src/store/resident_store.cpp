#include "store/resident_store.h"

#include <algorithm>
#include <chrono>

#include "store/direct_reader.h"
#include "util/progress.h"
#include "util/units.h"

namespace strata {

TensorView make_tensor_view(const TensorInfo& t, const std::byte* data) {
    TensorView v;
    v.type = t.type;
    v.data = data;
    for (int i = 0; i < 4; ++i) v.ne[i] = static_cast<int64_t>(t.shape[i]);
    v.row_bytes = t.row_bytes();
    return v;
}

namespace {

constexpr size_t kChunkBytes = 32u << 20;  // one read request
constexpr int kChunksInFlight = 8;

// Reads [offset, offset + length) of the file into dst with several large requests in flight.
Result<void> read_section(DirectReader& reader, uint64_t offset, uint64_t length, std::byte* dst,
                          ByteProgress& progress) {
    const uint64_t n_chunks = (length + kChunkBytes - 1) / kChunkBytes;
    uint64_t next = 0, done = 0, done_bytes = 0;
    auto chunk_len = [&](uint64_t c) { return std::min<uint64_t>(kChunkBytes, length - c * kChunkBytes); };
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
        return err("cannot allocate " + format_bytes(length) + " to hold the weights of " +
                   f.path + ": " + buffer.error().message);
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
    store->loaded_bytes_ = length;
    store->load_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    STRATA_TRY(store->bind(info));
    return store;
}

Result<void> ResidentStore::bind(const ModelInfo& info) {
    const uint32_t n_layer = info.hparams ? info.hparams->n_layer : 0;
    layers_.assign(n_layer, LayerView{});
    experts_.assign(n_layer, {});
    layer_bytes_.assign(n_layer, 0);
    for (const ModelTensor& mt : info.tensors) {
        const TensorInfo& t = info.info(mt);
        const std::byte* base = data_.data() + (t.offset - data_offset_);
        if (mt.layer >= static_cast<int>(n_layer)) {
            return err("tensor " + t.name + " names layer " + std::to_string(mt.layer) +
                       " but the model has " + std::to_string(n_layer));
        }
        const size_t role = static_cast<size_t>(mt.role);
        if (!mt.is_routed_expert()) {
            LayerView& lv = mt.layer < 0 ? globals_ : layers_[mt.layer];
            (mt.is_bias ? lv.biases : lv.weights)[role] = make_tensor_view(t, base);
            if (mt.layer >= 0) layer_bytes_[mt.layer] += t.n_bytes;
            continue;
        }
        // Routed experts: one 2-D view per expert, from a fused tensor or an old per-expert one.
        auto& experts = experts_[mt.layer];
        auto slot = [&](int e) -> Result<ExpertView*> {
            if (e < 0 || e > (1 << 20)) return err("tensor " + t.name + ": bad expert index");
            if (experts.size() <= static_cast<size_t>(e)) experts.resize(e + 1);
            return &experts[e];
        };
        auto member = [&](ExpertView& ev) -> TensorView* {
            switch (mt.role) {
                case TensorRole::ExpertGate: return &ev.gate;
                case TensorRole::ExpertUp: return &ev.up;
                case TensorRole::ExpertDown: return &ev.down;
                default: return nullptr;
            }
        };
        if (mt.expert >= 0) {
            STRATA_ASSIGN(ExpertView * ev, slot(mt.expert));
            TensorView* tv = member(*ev);
            if (!tv) return err("tensor " + t.name + ": unsupported expert tensor");
            *tv = make_tensor_view(t, base);
            continue;
        }
        if (mt.n_expert_slices == 0) {
            return err("tensor " + t.name + " (" + std::string(tensor_role_name(mt.role)) +
                       ") cannot be split into experts");
        }
        for (uint32_t e = 0; e < mt.n_expert_slices; ++e) {
            STRATA_ASSIGN(ExpertView * ev, slot(static_cast<int>(e)));
            TensorView* tv = member(*ev);
            if (!tv) {
                return err("tensor " + t.name + ": " + std::string(tensor_role_name(mt.role)) +
                           " tensors are not supported yet");
            }
            TensorView v = make_tensor_view(t, base + e * mt.expert_slice_bytes);
            v.ne = {v.ne[0], v.ne[1], 1, 1};
            *tv = v;
        }
    }
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
    stats_.bytes_served += ev.gate.row_bytes * ev.gate.rows() + ev.up.row_bytes * ev.up.rows() +
                           ev.down.row_bytes * ev.down.rows();
    return ev;
}

}  // namespace strata
