#include "store/slot_ring.h"

#include <algorithm>
#include <chrono>

#include "store/tensor_views.h"
#include "util/clock.h"
#include "util/units.h"

namespace strata {

Result<SlotRing> SlotRing::create(const ModelInfo& info,
                                  const std::vector<std::vector<size_t>>& groups,
                                  const SlotRingConfig& config, StreamReader& reader) {
    SlotRing ring;
    ring.pieces_.assign(groups.size(), {});
    for (size_t l = 0; l < groups.size(); ++l) {
        auto& pieces = ring.pieces_[l];
        size_t at = 0;
        for (size_t i : groups[l]) {
            const ModelTensor& mt = info.tensors[i];
            const TensorInfo& t = info.info(mt);
            pieces.push_back({mt, t, at});
            at += round_up(size_t(reader.io->widen(t.offset, size_t(t.n_bytes)).length),
                           AlignedBuffer::kAlignment);
        }
        if (pieces.empty()) continue;
        ring.streamed_layers_.push_back(int(l));
        ring.slot_bytes_ = std::max(ring.slot_bytes_, at);  // one size fits every layer
    }
    ring.stats_.layer_stall_seconds.assign(groups.size(), 0.0);
    if (ring.streamed_layers_.empty()) return ring;
    const int n_streamed = int(ring.streamed_layers_.size());
    int n_slots = config.slots > 0 ? config.slots : config.lookahead + 1;
    n_slots = std::clamp(n_slots, 1, n_streamed);
    ring.lookahead_ = std::clamp(config.lookahead, 0, n_slots - 1);
    for (int i = 0; i < n_slots; ++i) {
        auto buf = AlignedBuffer::allocate(ring.slot_bytes_);
        if (!buf) {
            return err("cannot allocate " + std::to_string(n_slots) + " layer slots of " +
                       format_bytes(ring.slot_bytes_) + ": " + buf.error().message);
        }
        Slot slot;
        slot.buffer = std::move(*buf);
        ring.slots_.push_back(std::move(slot));
    }
    return ring;
}

void SlotRing::drain(StreamReader& reader) {
    for (Slot& s : slots_) (void)s.reads.wait(reader);
}

void SlotRing::reset_stats() {
    const size_t n = pieces_.size();
    stats_ = {};
    stats_.layer_stall_seconds.assign(n, 0.0);
}

Result<void> SlotRing::start_reads(int layer, Slot& slot, StreamReader& reader, StoreStats& stats) {
    slot.layer = layer;
    slot.slice.clear();
    for (const Piece& p : pieces_[size_t(layer)]) {
        auto slice = slot.reads.submit(reader, p.info.offset, size_t(p.info.n_bytes),
                                       slot.buffer.data() + p.slot_offset);
        if (!slice) {
            slot.layer = -1;  // whatever was submitted is collected by finish_reads' caller
            return slice.take_error();
        }
        slot.slice.push_back(*slice);
        stats.bytes_from_disk += p.info.n_bytes;
    }
    return {};
}

Result<void> SlotRing::finish_reads(Slot& slot, StreamReader& reader) {
    auto r = slot.reads.wait(reader);
    if (!r) slot.layer = -1;  // never hand out a slot whose bytes did not all arrive
    return r;
}

int SlotRing::next_streamed(int layer, int steps) const {
    const auto it = std::find(streamed_layers_.begin(), streamed_layers_.end(), layer);
    const size_t pos = size_t(it - streamed_layers_.begin());
    return streamed_layers_[(pos + size_t(steps)) % streamed_layers_.size()];
}

void SlotRing::prefetch_after(int layer, size_t slot_index, StreamReader& reader,
                              StoreStats& stats) {
    for (int j = 1; j <= lookahead_; ++j) {
        const int next = next_streamed(layer, j);
        Slot& target = slots_[(slot_index + size_t(j)) % slots_.size()];
        if (target.in_use) break;
        if (target.layer == next) continue;      // there already, or on its way
        if (target.reads.in_flight()) continue;  // an earlier guess still arriving: not now
        // A failed prefetch is not an error yet: the demand read will report it.
        if (!start_reads(next, target, reader, stats)) target.layer = -1;
    }
}

Result<void> SlotRing::acquire(int layer, StreamReader& reader, LayerView& layer_views,
                               std::vector<ExpertView>& experts, StoreStats& stats) {
    const auto t0 = std::chrono::steady_clock::now();
    ++stats_.layer_loads;
    size_t s = 0;
    while (s < slots_.size() && slots_[s].layer != layer) ++s;
    if (s < slots_.size()) {
        ++(slots_[s].reads.in_flight() ? stats_.waits : stats_.hits);
    } else {
        // Demand read into a slot not in use (the engine holds one layer at a time).
        ++stats_.misses;
        s = 0;
        while (s < slots_.size() && slots_[s].in_use) ++s;
        if (s == slots_.size()) return err("every layer slot is in use");
        if (slots_[s].reads.in_flight()) (void)finish_reads(slots_[s], reader);  // a stale guess
        STRATA_TRY(start_reads(layer, slots_[s], reader, stats));
    }
    Slot& slot = slots_[s];
    STRATA_TRY(finish_reads(slot, reader));
    slot.in_use = true;
    const double stall = seconds_since(t0);
    stats.stall_seconds += stall;
    stats_.layer_stall_seconds[size_t(layer)] += stall;

    const auto& pieces = pieces_[size_t(layer)];
    for (size_t j = 0; j < pieces.size(); ++j) {
        const Piece& p = pieces[j];
        STRATA_TRY(bind_tensor(p.tensor, p.info, slot.buffer.data() + p.slot_offset + slot.slice[j],
                               layer_views, experts));
        if (!p.tensor.is_routed_expert()) stats.bytes_served += p.info.n_bytes;
    }
    prefetch_after(layer, s, reader, stats);
    return {};
}

void SlotRing::release(int layer) {
    for (Slot& s : slots_) {
        if (s.layer == layer) s.in_use = false;
    }
}

}  // namespace strata
