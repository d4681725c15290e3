// The store's routed-expert hierarchy: the GPU level, RAM (the arena's experts or the expert
// cache's entries) and disk behind one protocol (store/weight_store.h). Each batch's routing is
// taken once, here, and handed to every level and to the routing statistics; each layer's guesses
// of the next layer's experts are made once, here, from the engine's early guess and the
// statistics, and offered to the level that serves the next layer.
#include <algorithm>
#include <fstream>

#include "store/model_store.h"

namespace strata {

void ModelStore::open_routing_statistics(const ModelInfo& info, const StoreLayout& layout) {
    if (!info.hparams || !info.hparams->is_moe()) return;
    routing_.reset(int(info.hparams->n_layer), int(info.hparams->n_expert));
    // Kept with an expert cache (its prefetch and warm-up use them) and with a statistics file,
    // so that plans of this model learn its routing from resident runs too
    // (PlanOptions::expert_counts). The GPU level's guesses use them where they are kept.
    keeps_routing_ = layout.any(Residence::ExpertCache) || !layout.experts.stats_path.empty();
    routing_path_ = layout.experts.stats_path;
    if (routing_path_.empty()) return;
    routing_identity_ = model_identity(info);
    if (std::ifstream(routing_path_).good()) {
        if (auto r = routing_.load(routing_path_, routing_identity_); !r) {
            warnings_.push_back("ignoring the expert statistics: " + r.error().message);
        }
    }
}

Result<void> ModelStore::add_gpu_level(ExpertEntryMemory& memory, uint32_t entries,
                                       uint64_t entry_bytes, uint32_t prefetch,
                                       std::span<const char> serves) {
    if (gpu_level_) return err("the store has a GPU level of the expert cache already");
    if (n_expert_ == 0) return err("a dense model has no experts for a GPU level to hold");
    STRATA_ASSIGN(gpu_level_, VramExpertCache::create(memory, n_layer_, n_expert_, entries,
                                                      entry_bytes, prefetch, gpu_stats_));
    gpu_memory_ = &memory;
    gpu_serves_.assign(serves.begin(), serves.end());
    gpu_serves_.resize(size_t(n_layer_), 0);
    on_gpu_.assign(size_t(n_expert_), 0);
    acquired_.assign(size_t(n_expert_), ExpertView{});
    return {};
}

const ExpertView* ModelStore::resident_expert(int layer, int expert) const {
    if (layer < 0 || size_t(layer) >= views_.experts.size() || (cache_ && cache_->serves(layer)) ||
        ring_.streams(layer) || expert < 0 ||
        size_t(expert) >= views_.experts[size_t(layer)].size()) {
        return nullptr;
    }
    const ExpertView& ev = views_.experts[size_t(layer)][size_t(expert)];
    if (!ev.gate.present() || !ev.up.present() || !ev.down.present() ||
        ev.gate.where.kind == MemoryKind::Device) {
        return nullptr;
    }
    return &ev;
}

bool ModelStore::wants_guesses(int layer) {
    guess_layer_ = layer;
    // The GPU level's guesses are copied from where the experts rest in RAM; asked once a
    // layer, since the level counts its probes.
    guess_gpu_ = gpu_level_serves(layer) && resident_expert(layer, 0) != nullptr &&
                 gpu_level_->prefetch_wanted();
    const bool ram = cache_ && cache_->prefetching() && cache_->serves(layer);
    return ram || guess_gpu_;
}

size_t ModelStore::route_experts(const ExpertBatch& b, std::vector<const ExpertView*>& gpu) {
    const int layer = b.layer;
    gpu.assign(b.experts.size(), nullptr);
    size_t served = 0;
    if (gpu_level_serves(layer)) {
        served = gpu_level_->route(layer, b.experts, gpu);
        std::fill(on_gpu_.begin(), on_gpu_.end(), 0);
        for (size_t j = 0; j < b.experts.size(); ++j) {
            if (gpu[j]) on_gpu_[size_t(b.experts[j])] = 1;
        }
    }
    if (keeps_routing_) routing_.record(layer, b.choices, b.k);
    if (cache_) {
        cache_->prepare(layer, b.choices,
                        served > 0 ? std::span<const char>(on_gpu_) : std::span<const char>());
    }
    // The next layer's guesses, behind this layer's reads: the engine's, then the experts that
    // followed this batch's last token's choices.
    const int next = layer + 1;
    const bool to_gpu = guess_layer_ == next && guess_gpu_;
    const bool to_ram = cache_ && cache_->prefetching() && cache_->serves(next);
    gpu_guesses_for_ = -1;
    guess_layer_ = -1;
    if (!to_gpu && !to_ram) return served;
    candidates_.assign(b.next_guess.begin(), b.next_guess.end());
    const size_t n = b.k > 0 ? b.choices.size() / size_t(b.k) : 0;
    if (n > 0 && routing_.tokens_recorded() > 0 && next < routing_.n_layer()) {
        const auto last = b.choices.subspan((n - 1) * size_t(b.k), size_t(b.k));
        routing_.predict(next, last, size_t(b.k), predicted_);
        for (int32_t x : predicted_.experts) {
            if (std::find(candidates_.begin(), candidates_.end(), x) == candidates_.end()) {
                candidates_.push_back(x);
            }
        }
    }
    if (to_ram) cache_->prefetch(next, candidates_);
    if (to_gpu) gpu_guesses_for_ = next;
    return served;
}

Result<void> ModelStore::gpu_share_queued(int layer) {
    if (gpu_guesses_for_ != layer + 1) return {};
    gpu_guesses_for_ = -1;
    for (int32_t x : candidates_) {
        if (const ExpertView* host = resident_expert(layer + 1, x)) {
            STRATA_TRY(gpu_level_->prefetch(layer + 1, x, with_biases(layer + 1, x, *host)));
        }
    }
    return {};
}

Result<ExpertView> ModelStore::acquire_expert(int layer, int expert) {
    ExpertView ev;
    if (cache_ && cache_->serves(layer)) {
        STRATA_ASSIGN(ev, cache_->acquire(layer, expert));
    } else {
        const auto& experts = ring_.streams(layer) ? active_experts_ : views_.experts;
        if (layer < 0 || size_t(layer) >= experts.size() || expert < 0 ||
            size_t(expert) >= experts[size_t(layer)].size()) {
            return err("expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                       " does not exist");
        }
        ev = experts[size_t(layer)][size_t(expert)];
        if (!ev.gate.present() || !ev.up.present() || !ev.down.present()) {
            return err("expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                       " lacks one of its gate, up and down matrices");
        }
        stats_.bytes_served += expert_bytes(ev);
    }
    ev = with_biases(layer, expert, ev);
    if (gpu_level_serves(layer)) acquired_[size_t(expert)] = ev;
    return ev;
}

ExpertView ModelStore::with_biases(int layer, int expert, const ExpertView& ev) const {
    // The biases lie with the router: the layer's views, or the ring slot's for a streamed layer.
    const LayerView& w =
        ring_.streams(layer) ? active_[size_t(layer)] : views_.layers[size_t(layer)];
    return with_expert_biases(ev, w, expert);
}

Result<void> ModelStore::release_expert(int layer, int expert) {
    const bool streamed = (cache_ && cache_->serves(layer)) || ring_.streams(layer);
    Result<void> offered;
    if (gpu_level_serves(layer) && expert >= 0 && expert < n_expert_) {
        // A miss of the GPU level, offered to it now that the CPU has it. Its RAM copy may be
        // reused once released when it streams, so a copy it starts lands first.
        if (auto loading = gpu_level_->offer(layer, expert, acquired_[size_t(expert)]); !loading) {
            offered = loading.take_error();
        } else if (*loading && streamed) {
            gpu_memory_->wait_expert_loads();
        }
    }
    if (cache_ && cache_->serves(layer)) cache_->release(layer, expert);
    return offered;
}

}  // namespace strata
