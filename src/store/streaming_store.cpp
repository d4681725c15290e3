#include "store/streaming_store.h"

#include <algorithm>
#include <chrono>

#include "store/resident_part.h"
#include "util/units.h"

namespace strata {

bool is_streamed_ffn_role(TensorRole role) {
    return role == TensorRole::FfnGate || role == TensorRole::FfnUp || role == TensorRole::FfnDown;
}

StreamingConfig streaming_config(const Plan& plan) {
    StreamingConfig c;
    for (const LayerPlan& l : plan.layers) c.stream_ffn.push_back(l.ffn_use == TensorUse::Streamed);
    c.lookahead = int(plan.stream.lookahead);
    c.slots = int(plan.stream.slots);
    return c;
}

namespace {
constexpr size_t kAlign = AlignedBuffer::kAlignment;
size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StreamingStore::~StreamingStore() {
    if (reader_) (void)reader_->wait_all();  // reads into slots must end before the slots go
}

Result<std::unique_ptr<StreamingStore>> StreamingStore::open(const ModelInfo& info,
                                                             const StreamingConfig& config,
                                                             const ResidentLoadOptions& options) {
    std::unique_ptr<StreamingStore> s(new StreamingStore());
    const uint32_t n_layer = info.hparams ? info.hparams->n_layer : 0;
    if (config.stream_ffn.size() > n_layer) {
        return err("the streaming configuration names " + std::to_string(config.stream_ffn.size()) +
                   " layers but the model has " + std::to_string(n_layer));
    }
    DirectReader::Options ro;
    ro.queue_depth = 16;
    STRATA_ASSIGN(s->reader_, DirectReader::open(info.file.path, ro));
    s->tensor_infos_ = info.file.tensors;
    s->pieces_.assign(n_layer, {});
    for (const ModelTensor& mt : info.tensors) {
        if (mt.layer < 0 || size_t(mt.layer) >= config.stream_ffn.size() ||
            !config.stream_ffn[size_t(mt.layer)] || !is_streamed_ffn_role(mt.role)) {
            continue;
        }
        const TensorInfo& t = info.info(mt);
        s->pieces_[size_t(mt.layer)].push_back(
            {mt.index, mt.role, mt.is_bias, t.offset, t.n_bytes, 0, 0});
    }
    // Slot layout: each piece's widened read at an aligned offset; one size fits every layer.
    for (int l = 0; l < int(n_layer); ++l) {
        auto& pieces = s->pieces_[size_t(l)];
        if (pieces.empty()) continue;
        s->streamed_layers_.push_back(l);
        size_t at = 0;
        for (Piece& p : pieces) {
            const WidenedRange w = s->reader_->widen(p.offset, p.length);
            p.slot_offset = at;
            p.slice = w.slice;
            at += round_up(w.length, kAlign);
        }
        s->slot_bytes_ = std::max(s->slot_bytes_, at);
    }
    STRATA_TRY(s->load_resident(info, options));
    s->active_.assign(n_layer, LayerView{});
    s->streaming_.layer_stall_seconds.assign(n_layer, 0.0);
    if (!s->streamed_layers_.empty()) {
        const int n_streamed = int(s->streamed_layers_.size());
        int n_slots = config.slots > 0 ? config.slots : config.lookahead + 1;
        n_slots = std::clamp(n_slots, 1, n_streamed);
        s->lookahead_ = std::clamp(config.lookahead, 0, n_slots - 1);
        for (int i = 0; i < n_slots; ++i) {
            auto buf = AlignedBuffer::allocate(s->slot_bytes_);
            if (!buf) {
                return err("cannot allocate " + std::to_string(n_slots) + " FFN slots of " +
                           format_bytes(s->slot_bytes_) + ": " + buf.error().message);
            }
            s->slots_.push_back(Slot{std::move(*buf), -1, false, {}});
        }
    }
    return s;
}

Result<void> StreamingStore::load_resident(const ModelInfo& info,
                                           const ResidentLoadOptions& options) {
    std::vector<bool> streamed(info.tensors.size(), false);
    for (const auto& pieces : pieces_) {
        for (const Piece& p : pieces) streamed[p.tensor] = true;
    }
    STRATA_ASSIGN(ResidentPart part,
                  load_resident_part(info, streamed, *reader_, next_tag_, options));
    resident_ = std::move(part.buffer);
    views_ = std::move(part.views);
    resident_bytes_ = part.bytes;
    return {};
}

Result<void> StreamingStore::start_reads(int layer, Slot& slot) {
    slot.layer = layer;
    for (const Piece& p : pieces_[size_t(layer)]) {
        const uint64_t tag = next_tag_++;
        ReadRequest r{p.offset, size_t(p.length), slot.buffer.data() + p.slot_offset, tag,
                      ReadPlacement::Widened};
        if (auto st = reader_->submit(r); !st) {
            slot.layer = -1;  // whatever was submitted is collected by finish_reads' caller
            return st;
        }
        slot.pending.push_back(tag);
        stats_.bytes_from_disk += p.length;
    }
    return {};
}

Result<void> StreamingStore::finish_reads(Slot& slot) {
    Result<void> first;
    for (uint64_t tag : slot.pending) {
        auto r = reader_->wait(tag);
        if (!r && first) first = std::move(r);
    }
    slot.pending.clear();
    if (!first) slot.layer = -1;  // never hand out a slot whose bytes did not all arrive
    return first;
}

int StreamingStore::next_streamed(int layer, int steps) const {
    const auto it = std::find(streamed_layers_.begin(), streamed_layers_.end(), layer);
    const size_t pos = size_t(it - streamed_layers_.begin());
    return streamed_layers_[(pos + size_t(steps)) % streamed_layers_.size()];
}

void StreamingStore::prefetch_after(int layer, size_t slot_index) {
    for (int j = 1; j <= lookahead_; ++j) {
        const int next = next_streamed(layer, j);
        Slot& target = slots_[(slot_index + size_t(j)) % slots_.size()];
        if (target.in_use) break;
        if (target.layer == next) continue;     // there already, or on its way
        if (!target.pending.empty()) continue;  // an earlier guess still arriving: not now
        // A failed prefetch is not an error yet: the demand read will report it.
        if (!start_reads(next, target)) target.layer = -1;
    }
}

Result<const LayerView*> StreamingStore::acquire_layer(int layer) {
    if (layer < 0 || size_t(layer) >= views_.layers.size()) {
        return err("layer " + std::to_string(layer) + " does not exist");
    }
    stats_.bytes_served += views_.layer_bytes[size_t(layer)];
    if (pieces_[size_t(layer)].empty()) return &views_.layers[size_t(layer)];

    const auto t0 = std::chrono::steady_clock::now();
    ++streaming_.layer_loads;
    size_t s = 0;
    while (s < slots_.size() && slots_[s].layer != layer) ++s;
    if (s < slots_.size()) {
        if (slots_[s].pending.empty()) {
            ++streaming_.hits;
        } else {
            ++streaming_.waits;
        }
    } else {
        // Demand read into the slot after the last one used, which is not in use (the engine
        // holds one layer at a time).
        ++streaming_.misses;
        s = 0;
        while (s < slots_.size() && slots_[s].in_use) ++s;
        if (s == slots_.size()) return err("every FFN slot is in use");
        if (!slots_[s].pending.empty()) (void)finish_reads(slots_[s]);  // a stale guess
        STRATA_TRY(start_reads(layer, slots_[s]));
    }
    Slot& slot = slots_[s];
    STRATA_TRY(finish_reads(slot));
    slot.in_use = true;
    const double stall = seconds_since(t0);
    stats_.stall_seconds += stall;
    streaming_.layer_stall_seconds[size_t(layer)] += stall;

    LayerView& v = active_[size_t(layer)];
    v = views_.layers[size_t(layer)];
    uint64_t bytes = 0;
    for (const Piece& p : pieces_[size_t(layer)]) {
        (p.bias ? v.biases : v.weights)[size_t(p.role)] =
            make_tensor_view(tensor_infos_[p.tensor], slot.buffer.data() + p.slot_offset + p.slice);
        bytes += p.length;
    }
    stats_.bytes_served += bytes;
    prefetch_after(layer, s);
    return &v;
}

void StreamingStore::release_layer(int layer) {
    for (Slot& s : slots_) {
        if (s.layer == layer) s.in_use = false;
    }
}

Result<ExpertView> StreamingStore::acquire_expert(int layer, int expert) {
    if (layer < 0 || size_t(layer) >= views_.experts.size() || expert < 0 ||
        size_t(expert) >= views_.experts[size_t(layer)].size()) {
        return err("expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                   " does not exist");
    }
    const ExpertView& ev = views_.experts[size_t(layer)][size_t(expert)];
    stats_.bytes_served += expert_bytes(ev);
    return ev;
}

}  // namespace strata
