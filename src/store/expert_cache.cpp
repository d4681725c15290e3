#include "store/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "store/tensor_views.h"
#include "util/clock.h"
#include "util/units.h"

namespace strata {

namespace {

constexpr size_t kAlign = AlignedBuffer::kAlignment;
int piece_order(TensorRole r) {
    return r == TensorRole::ExpertGate ? 0 : r == TensorRole::ExpertUp ? 1 : 2;
}

}  // namespace

ExpertCache::~ExpertCache() {
    for (Entry& e : entries_) (void)e.reads.wait(reader_);  // reads end before the pool goes
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::create(
    const ModelInfo& info, const std::vector<std::vector<size_t>>& groups,
    const ExpertCacheConfig& config, StreamReader& reader, StoreStats& store_stats,
    const CoactivationStats& routing) {
    if (!info.hparams || !info.hparams->is_moe()) {
        return err("an expert cache needs a mixture-of-experts model");
    }
    std::unique_ptr<ExpertCache> s(new ExpertCache(reader, store_stats));
    s->config_ = config;
    s->n_layer_ = int(info.hparams->n_layer);
    s->n_expert_ = int(info.hparams->n_expert);
    s->n_used_ = int(info.hparams->n_expert_used);
    if (s->config_.prefetch_limit == 0) s->config_.prefetch_limit = uint32_t(s->n_used_);
    STRATA_TRY(s->layout(info, groups));

    const uint64_t n_entries = std::max<uint64_t>(config.cache_entries, 2);
    auto pool = AlignedBuffer::allocate(n_entries * s->entry_bytes_);
    if (!pool) {
        return err("cannot allocate an expert cache of " + std::to_string(n_entries) +
                   " experts (" + format_bytes(n_entries * s->entry_bytes_) +
                   "): " + pool.error().message);
    }
    s->pool_ = std::move(*pool);
    s->entries_.resize(n_entries);
    const size_t keys = size_t(s->n_layer_) * size_t(s->n_expert_);
    s->where_.assign(keys, -1);
    s->policy_.reset(config.policy, n_entries, keys);
    s->per_layer_.assign(size_t(s->n_layer_), {});
    if (config.warm) s->warm_up(routing);
    return s;
}

Result<void> ExpertCache::layout(const ModelInfo& info,
                                 const std::vector<std::vector<size_t>>& groups) {
    pieces_.assign(size_t(n_layer_), {});
    for (const auto& group : groups) {
        for (size_t i : group) {
            const ModelTensor& mt = info.tensors[i];
            if (!mt.is_routed_expert() || mt.is_bias || mt.layer < 0 || mt.layer >= n_layer_)
                continue;
            const TensorInfo& t = info.info(mt);
            auto& pieces = pieces_[size_t(mt.layer)];
            if (mt.expert < 0) {
                if (mt.n_expert_slices != uint32_t(n_expert_)) {
                    return err("tensor " + t.name + " holds " + std::to_string(mt.n_expert_slices) +
                               " experts, not " + std::to_string(n_expert_));
                }
                pieces.push_back({t, mt.role, t.offset, mt.expert_slice_bytes, true, {}, 0});
                continue;
            }
            // Old layout: one tensor per expert and matrix; group them by matrix.
            auto it = std::find_if(pieces.begin(), pieces.end(),
                                   [&](const Piece& p) { return p.role == mt.role; });
            if (it == pieces.end()) {
                pieces.push_back({t, mt.role, 0, t.n_bytes, false,
                                  std::vector<uint64_t>(size_t(n_expert_), UINT64_MAX), 0});
                it = pieces.end() - 1;
            }
            if (mt.expert >= n_expert_ || t.n_bytes != it->slice_bytes) {
                return err("tensor " + t.name + " does not match its layer's other experts");
            }
            it->per_expert[size_t(mt.expert)] = t.offset;
        }
    }
    const size_t block = reader_.io->block_size();
    for (int l = 0; l < n_layer_; ++l) {
        auto& pieces = pieces_[size_t(l)];
        if (pieces.empty()) continue;
        if (pieces.size() != 3) {
            return err("layer " + std::to_string(l) +
                       " lacks one of its experts' gate, up and "
                       "down matrices");
        }
        std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
            return piece_order(a.role) < piece_order(b.role);
        });
        size_t at = 0;
        for (Piece& p : pieces) {
            if (!p.fused && std::count(p.per_expert.begin(), p.per_expert.end(), UINT64_MAX) > 0) {
                return err("layer " + std::to_string(l) + " lacks some experts' tensors");
            }
            p.entry_offset = at;
            at += round_up(size_t(p.slice_bytes) + 2 * block, kAlign);  // widened, any offset
        }
        entry_bytes_ = std::max(entry_bytes_, at);
    }
    if (entry_bytes_ == 0) return err("the plan streams no routed experts");
    return {};
}

uint64_t ExpertCache::expert_offset(const Piece& p, int expert) const {
    return p.fused ? p.base + uint64_t(expert) * p.slice_bytes : p.per_expert[size_t(expert)];
}

int ExpertCache::find(int layer, int expert) const {
    return where_[size_t(layer) * size_t(n_expert_) + size_t(expert)];
}

Result<size_t> ExpertCache::claim_entry(int /*layer*/) {
    candidates_.clear();
    key_of_.assign(entries_.size(), SIZE_MAX);
    for (size_t i = 0; i < entries_.size(); ++i) {
        const Entry& e = entries_[i];
        if (e.held) continue;
        candidates_.push_back(i);
        if (e.layer >= 0) key_of_[i] = size_t(e.layer) * size_t(n_expert_) + size_t(e.expert);
    }
    if (candidates_.empty()) {
        return err("every one of the " + std::to_string(entries_.size()) +
                   " expert cache entries is in use");
    }
    const size_t v = policy_.victim(candidates_, key_of_);
    Entry& e = entries_[v];
    if (e.reads.in_flight()) (void)finish_reads(v);        // a guess still arriving: let it land
    if (e.speculative && e.layer >= 0) note_guess(false);  // evicted before anyone used it
    if (e.layer >= 0) where_[size_t(e.layer) * size_t(n_expert_) + size_t(e.expert)] = -1;
    e.reset();
    policy_.used(v);
    return v;
}

Result<void> ExpertCache::start_reads(size_t i, int layer, int expert, bool speculative) {
    Entry& e = entries_[i];
    e.layer = layer;
    e.expert = expert;
    e.valid = false;
    e.speculative = speculative;
    e.fresh_demand = !speculative;
    e.slice.clear();
    where_[size_t(layer) * size_t(n_expert_) + size_t(expert)] = int32_t(i);
    std::byte* base = pool_.data() + i * entry_bytes_;
    ExpertStreamStats& ls = per_layer_[size_t(layer)];
    for (const Piece& p : pieces_[size_t(layer)]) {
        auto slice = e.reads.submit(reader_, expert_offset(p, expert), size_t(p.slice_bytes),
                                    base + p.entry_offset);
        if (!slice) {
            (void)finish_reads(i);
            return slice.take_error();
        }
        e.slice.push_back(*slice);
        store_stats_.bytes_from_disk += p.slice_bytes;
        total_.bytes_from_disk += p.slice_bytes;
        ls.bytes_from_disk += p.slice_bytes;
        if (speculative) {
            total_.prefetch_bytes += p.slice_bytes;
            ls.prefetch_bytes += p.slice_bytes;
        }
    }
    if (speculative) {
        ++total_.prefetches;
        ++ls.prefetches;
        ++speculative_in_flight_;
    }
    return {};
}

Result<void> ExpertCache::finish_reads(size_t i) {
    Entry& e = entries_[i];
    const bool was_in_flight = e.reads.in_flight();
    auto first = e.reads.wait(reader_);
    if (was_in_flight && e.speculative && speculative_in_flight_ > 0) --speculative_in_flight_;
    if (!first) {  // never keep an entry whose bytes did not all arrive
        if (e.layer >= 0) where_[size_t(e.layer) * size_t(n_expert_) + size_t(e.expert)] = -1;
        e.reset();
        return first;
    }
    e.valid = e.layer >= 0;
    return {};
}

void ExpertCache::prepare(int layer, std::span<const int32_t> choices,
                          std::span<const char> elsewhere) {
    if (layer < 0 || layer >= n_layer_ || pieces_[size_t(layer)].empty()) return;
    for (Entry& e : entries_) e.held = false;  // a new batch: earlier holds are over
    std::vector<char>& in_union = in_union_;
    in_union.assign(size_t(n_expert_), 0);
    for (int32_t x : choices) {
        if (x >= 0 && x < n_expert_) in_union[size_t(x)] = 1;
    }
    if (tracing_) trace_.emplace_back();
    for (int x = 0; x < n_expert_; ++x) {
        if (!in_union[size_t(x)]) continue;
        const size_t key = size_t(layer) * size_t(n_expert_) + size_t(x);
        policy_.chosen(key);
        if (tracing_) trace_.back().push_back(uint32_t(key));
    }
    // The union: cached members held first, so that reading the missing ones (in the order the
    // engine acquires them, ascending) never evicts a member; missing ones read as long as
    // entries are free.
    for (int x = 0; x < n_expert_; ++x) {
        const int at = in_union[size_t(x)] ? find(layer, x) : -1;
        if (at >= 0) entries_[size_t(at)].held = true;
    }
    for (int x = 0; x < n_expert_; ++x) {
        if (!in_union[size_t(x)] || find(layer, x) >= 0) continue;
        if (size_t(x) < elsewhere.size() && elsewhere[size_t(x)]) continue;
        auto slot = claim_entry(layer);
        if (!slot) break;  // the union is larger than the cache: the rest is read on acquire
        if (!start_reads(*slot, layer, x, false)) break;  // acquire reports the error
        entries_[*slot].held = true;
    }
}

void ExpertCache::note_guess(bool used) {
    (used ? guesses_used_ : guesses_wasted_) += 1;
    if (guesses_used_ + guesses_wasted_ > 64) {  // decay: the accuracy of recent guesses
        guesses_used_ /= 2;
        guesses_wasted_ /= 2;
    }
}

void ExpertCache::prefetch(int layer, std::span<const int32_t> candidates) {
    if (!config_.prefetch || !serves(layer) || candidates.empty()) return;
    const double judged = guesses_used_ + guesses_wasted_;
    const bool accurate = judged < 8 || guesses_used_ >= kMinPrefetchAccuracy * judged;
    size_t allowed = candidates.size();
    if (!accurate) {
        ++total_.prefetch_skipped;
        ++per_layer_[size_t(layer)].prefetch_skipped;
        if (++prepares_ % kProbeEvery != 0) return;
        allowed = 1;  // a probe keeps the accuracy measured
    }
    candidates = candidates.first(std::min(allowed, candidates.size()));
    // Collect guesses that have landed, so the bound counts only reads still in flight.
    for (size_t i = 0; i < entries_.size(); ++i) {
        Entry& e = entries_[i];
        if (e.speculative && e.reads.in_flight() && e.reads.landed(reader_)) (void)finish_reads(i);
    }
    for (int32_t x : candidates) {
        if (speculative_in_flight_ >= config_.prefetch_limit) break;
        if (x < 0 || x >= n_expert_ || find(layer, x) >= 0) continue;
        auto slot = claim_entry(layer);
        if (!slot) break;
        if (!start_reads(*slot, layer, x, true)) break;  // a failed guess costs nothing more
    }
}

Result<ExpertView> ExpertCache::acquire(int layer, int expert) {
    if (layer < 0 || layer >= n_layer_ || expert < 0 || expert >= n_expert_ ||
        pieces_[size_t(layer)].empty()) {
        return err("expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                   " does not exist");
    }
    const auto t0 = std::chrono::steady_clock::now();
    ExpertStreamStats& ls = per_layer_[size_t(layer)];
    ++total_.requests;
    ++ls.requests;
    int at = find(layer, expert);
    if (at >= 0 && !entries_[size_t(at)].valid && !entries_[size_t(at)].reads.in_flight()) {
        // Mapped but not whole (it never is after finish_reads; a poisoned entry in tests):
        // read it again rather than compute with it.
        where_[size_t(layer) * size_t(n_expert_) + size_t(expert)] = -1;
        entries_[size_t(at)].reset();
        at = -1;
    }
    if (at < 0) {
        STRATA_ASSIGN(const size_t slot, claim_entry(layer));
        STRATA_TRY(start_reads(slot, layer, expert, false));
        at = int(slot);
    }
    Entry& e = entries_[size_t(at)];
    if (e.fresh_demand) {
        ++total_.misses;
        ++ls.misses;
    } else {
        ++total_.hits;
        ++ls.hits;
        if (e.speculative) {
            ++total_.prefetch_used;
            ++ls.prefetch_used;
            note_guess(true);
        }
    }
    if (e.reads.in_flight()) {
        ++total_.waits;
        ++ls.waits;
        STRATA_TRY(finish_reads(size_t(at)));
    }
    e.speculative = false;
    e.fresh_demand = false;
    e.held = true;
    policy_.used(size_t(at));
    const double stall = seconds_since(t0);
    store_stats_.stall_seconds += stall;
    total_.stall_seconds += stall;
    ls.stall_seconds += stall;

    const std::byte* base = pool_.data() + size_t(at) * entry_bytes_;
    const auto& pieces = pieces_[size_t(layer)];
    ExpertView v;
    TensorView* dst[3] = {&v.gate, &v.up, &v.down};
    for (size_t j = 0; j < pieces.size(); ++j) {
        TensorView t = make_tensor_view(pieces[j].info, base + pieces[j].entry_offset + e.slice[j]);
        t.ne = {t.ne[0], t.ne[1], 1, 1};
        *dst[piece_order(pieces[j].role)] = t;
    }
    const uint64_t bytes = expert_bytes(v);
    store_stats_.bytes_served += bytes;
    total_.bytes_requested += bytes;
    ls.bytes_requested += bytes;
    return v;
}

void ExpertCache::release(int layer, int expert) {
    if (layer < 0 || layer >= n_layer_ || expert < 0 || expert >= n_expert_) return;
    const int at = find(layer, expert);
    if (at >= 0) entries_[size_t(at)].held = false;
}

void ExpertCache::warm_up(const CoactivationStats& routing) {
    // The most chosen experts of earlier runs, as many as the cache holds, read in one go.
    const auto favourites = routing.most_frequent(entries_.size());
    for (const auto& [layer, expert] : favourites) {
        if (pieces_[size_t(layer)].empty()) continue;
        auto slot = claim_entry(layer);
        if (!slot || !start_reads(*slot, layer, expert, false)) break;
        entries_[*slot].fresh_demand = false;
    }
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].reads.in_flight()) (void)finish_reads(i);
    }
    reset_stats();
}

void ExpertCache::reset_stats() {
    total_ = {};
    per_layer_.assign(size_t(n_layer_), {});
}

void ExpertCache::poison_entry_for_test(size_t i) {
    if (i >= entries_.size() || entries_[i].reads.in_flight()) return;
    std::memset(pool_.data() + i * entry_bytes_, 0x7f, entry_bytes_);
    entries_[i].valid = false;
}

}  // namespace strata
