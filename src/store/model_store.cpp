#include "store/model_store.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace strata {

namespace {

// Tensor indices per layer whose residence is `r`.
std::vector<std::vector<size_t>> groups_of(const ModelInfo& info, const StoreLayout& layout,
                                           Residence r) {
    std::vector<std::vector<size_t>> groups(info.hparams ? info.hparams->n_layer : 0);
    for (size_t i = 0; i < info.tensors.size() && i < layout.tensors.size(); ++i) {
        const ModelTensor& t = info.tensors[i];
        if (layout.tensors[i] == r && t.layer >= 0 && size_t(t.layer) < groups.size()) {
            groups[size_t(t.layer)].push_back(i);
        }
    }
    return groups;
}

}  // namespace

Result<std::unique_ptr<ModelStore>> ModelStore::open(const ModelInfo& info,
                                                     const StoreLayout& layout,
                                                     const ResidentLoadOptions& options) {
    if (layout.tensors.size() != info.tensors.size()) {
        return err("the store layout names " + std::to_string(layout.tensors.size()) +
                   " tensors but the model has " + std::to_string(info.tensors.size()));
    }
    std::vector<bool> held(info.tensors.size(), true);
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        const ModelTensor& t = info.tensors[i];
        const bool rows_ok = t.layer < 0 && !t.is_bias &&
                             (t.role == TensorRole::TokenEmbedding || t.role == TensorRole::Output);
        if (layout.tensors[i] == Residence::Rows
                ? !rows_ok
                : layout.tensors[i] != Residence::Arena && t.layer < 0) {
            return err("tensor " + info.info(t).name + " cannot stream as the layout says");
        }
        held[i] = layout.tensors[i] == Residence::Arena;
    }
    std::unique_ptr<ModelStore> s(new ModelStore());
    s->n_layer_ = info.hparams ? int(info.hparams->n_layer) : 0;
    s->n_expert_ = info.hparams ? int(info.hparams->n_expert) : 0;
    s->mode_ = layout.mode;
    if (layout.mapped) {
        STRATA_ASSIGN(s->arena_, Arena::map(info));
        s->views_ = s->arena_.views();
        s->globals_ = s->views_.globals;
        s->find_expert_stacks();
        STRATA_TRY(s->read_selection_biases(info));
        return s;
    }
    STRATA_ASSIGN(s->reader_, StreamReader::open(info.file.path, 32));
    STRATA_ASSIGN(s->ring_, SlotRing::create(info, groups_of(info, layout, Residence::Slot),
                                             layout.ring, s->reader_));
    if (layout.arena_place.kind == MemoryKind::Device) {
        // Beside a GPU, what streams lands in RAM for the CPU (plan.h, "GPU and CPU together"):
        // the CPU's FFN layers in the ring's slots, routed experts in the cache's entries.
        if (layout.any(Residence::Rows)) {
            return err(
                "a store with its arena on the GPU reads no tensor by rows (embedding rows and "
                "head chunks beside a GPU are not built yet)");
        }
        // Two arenas: the GPU's, and RAM's for what the host reads or the CPU computes.
        std::vector<bool> on_device(held.size(), false), on_host(held.size(), false);
        for (size_t i = 0; i < held.size(); ++i) {
            const ModelTensor& t = info.tensors[i];
            const bool host = (i < layout.on_host.size() && layout.on_host[i]) ||
                              (t.layer < 0 && t.role == TensorRole::RopeFreqs);
            (host ? on_host : on_device)[i] = held[i];
        }
        STRATA_ASSIGN(s->arena_, Arena::load_to_device(info, on_device, s->reader_, options,
                                                       layout.arena_place.device));
        STRATA_ASSIGN(s->host_arena_, Arena::load(info, on_host, s->reader_, options));
        if (layout.pin_host) {
            // Without it the shipping still works, at pageable copy speed.
            if (auto pinned = s->host_arena_.pin_for_gpu(); !pinned) {
                std::fprintf(options.progress_out ? options.progress_out : stderr,
                             "strata: %s; prompts ship experts to the GPU at pageable speed\n",
                             pinned.error().message.c_str());
            }
        }
    } else {
        STRATA_ASSIGN(s->arena_, Arena::load(info, held, s->reader_, options));
    }
    s->views_ = s->arena_.views();
    merge_views(s->views_, s->host_arena_.views());
    s->globals_ = s->views_.globals;
    size_t embedding = SIZE_MAX, head = SIZE_MAX;
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        if (layout.tensors[i] != Residence::Rows) continue;
        const ModelTensor& t = info.tensors[i];
        TensorView shape = make_tensor_view(info.info(t), nullptr);
        s->globals_.weights[size_t(t.role)] = shape;
        const bool tied = info.hparams && info.hparams->tied_output;
        if (t.role == TensorRole::TokenEmbedding) embedding = i;
        if (t.role == TensorRole::Output || tied) head = i;
    }
    STRATA_ASSIGN(s->rows_, RowStream::create(info, embedding, head, layout.head_chunk_bytes,
                                              s->reader_, s->stats_));
    s->open_routing_statistics(info, layout);
    if (layout.any(Residence::ExpertCache)) {
        STRATA_ASSIGN(s->cache_,
                      ExpertCache::create(info, groups_of(info, layout, Residence::ExpertCache),
                                          layout.experts, s->reader_, s->stats_, s->routing_));
    }
    s->active_.assign(size_t(s->n_layer_), LayerView{});
    s->active_experts_.assign(size_t(s->n_layer_), {});
    s->reset_stats();  // the cache's warm-up is part of opening, not of the run
    s->find_expert_stacks();
    STRATA_TRY(s->read_selection_biases(info));
    return s;
}

ModelStore::~ModelStore() {
    // Reads into the ring's slots and the cache's entries end before their buffers go.
    cache_.reset();
    if (!routing_path_.empty() && routing_.tokens_recorded() > 0) {
        (void)routing_.save(routing_path_, routing_identity_);
    }
    if (reader_.io) {
        ring_.drain(reader_);
        rows_.drain(reader_);
    }
}

Result<const LayerView*> ModelStore::acquire_layer(int layer) {
    if (layer < 0 || layer >= n_layer_) {
        return err("layer " + std::to_string(layer) + " does not exist");
    }
    const BoundViews& v = views_;
    stats_.bytes_served += v.layer_bytes[size_t(layer)];
    if (!ring_.streams(layer)) return &v.layers[size_t(layer)];
    LayerView& out = active_[size_t(layer)];
    out = v.layers[size_t(layer)];
    std::vector<ExpertView>& experts = active_experts_[size_t(layer)];
    experts.assign(v.experts[size_t(layer)].begin(), v.experts[size_t(layer)].end());
    STRATA_TRY(ring_.acquire(layer, reader_, out, experts, stats_));
    return &out;
}

void ModelStore::release_layer(int layer) {
    ring_.release(layer);
}

std::optional<ExpertStack> ModelStore::resident_experts(int layer) const {
    if (layer < 0 || size_t(layer) >= stacks_.size()) return {};
    return stacks_[size_t(layer)];
}

MemoryPlace ModelStore::experts_place(int layer) const {
    // Streamed experts land in host memory (the ring's slots, the cache's entries).
    if ((cache_ && cache_->serves(layer)) || ring_.streams(layer) || layer < 0 ||
        size_t(layer) >= views_.experts.size() || views_.experts[size_t(layer)].empty()) {
        return {};
    }
    return views_.experts[size_t(layer)].front().gate.where;
}

void ModelStore::find_expert_stacks() {
    stacks_.assign(size_t(n_layer_), std::nullopt);
    for (int layer = 0; layer < n_layer_; ++layer) {
        auto& stack = stacks_[size_t(layer)] = expert_stack(layer);
        // Expert 0's bias rows; expert x's lie x rows after them (the layer's bias tensors).
        if (stack) stack->first = with_biases(layer, 0, stack->first);
    }
}

std::optional<ExpertStack> ModelStore::expert_stack(int layer) const {
    const auto& all = views_.experts;
    if ((cache_ && cache_->serves(layer)) || ring_.streams(layer) || size_t(layer) >= all.size() ||
        all[size_t(layer)].empty()) {
        return {};
    }
    const std::vector<ExpertView>& ev = all[size_t(layer)];
    const auto stride = [&](TensorView ExpertView::*m) -> std::optional<size_t> {
        const TensorView& t0 = ev[0].*m;
        if (!t0.present()) return {};
        if (ev.size() > 1 && (ev[1].*m).data <= t0.data) return {};
        const size_t s = ev.size() > 1 ? size_t((ev[1].*m).data - t0.data) : 0;
        for (size_t e = 1; e < ev.size(); ++e) {
            const TensorView& t = ev[e].*m;
            if (t.data != t0.data + e * s || t.type != t0.type || t.ne != t0.ne ||
                t.row_bytes != t0.row_bytes || !(t.where == t0.where)) {
                return {};
            }
        }
        return s;
    };
    const auto g = stride(&ExpertView::gate), u = stride(&ExpertView::up),
               d = stride(&ExpertView::down);
    if (!g || !u || !d) return {};
    return ExpertStack{ev[0], *g, *u, *d, int(ev.size())};
}

const TensorView* ModelStore::resident_router(int layer) const {
    if (layer < 0 || layer >= n_layer_ || ring_.streams(layer)) return nullptr;
    const TensorView& r = views_.layers[size_t(layer)].weight(TensorRole::MoeRouter);
    return r.present() ? &r : nullptr;
}

const TensorView* ModelStore::resident_router_bias(int layer) const {
    if (!resident_router(layer)) return nullptr;
    const TensorView& b = views_.layers[size_t(layer)].bias(TensorRole::MoeRouter);
    return b.present() ? &b : nullptr;
}

const float* ModelStore::selection_bias(int layer) const {
    if (layer < 0 || size_t(layer) >= has_selection_bias_.size() ||
        !has_selection_bias_[size_t(layer)]) {
        return nullptr;
    }
    return selection_bias_.data() + size_t(layer) * size_t(n_expert_);
}

Result<void> ModelStore::read_selection_biases(const ModelInfo& info) {
    for (const ModelTensor& t : info.tensors) {
        if (t.role != TensorRole::MoeRouterBias || !t.is_bias || t.layer < 0 ||
            t.layer >= n_layer_) {
            continue;
        }
        const TensorInfo& ti = info.info(t);
        if (ti.type != TensorType::F32 || ti.n_elements() != uint64_t(n_expert_)) {
            return err("tensor " + ti.name + " should hold " + std::to_string(n_expert_) +
                       " F32 values (one per expert) but is " +
                       std::string(tensor_type_name(ti.type)) + " " + ti.shape_string());
        }
        if (selection_bias_.empty()) {
            selection_bias_.assign(size_t(n_layer_) * size_t(n_expert_), 0.0f);
            has_selection_bias_.assign(size_t(n_layer_), 0);
        }
        float* dst = selection_bias_.data() + size_t(t.layer) * size_t(n_expert_);
        const TensorView* v = size_t(t.layer) < views_.layers.size()
                                  ? &views_.layers[size_t(t.layer)].bias(TensorRole::MoeRouterBias)
                                  : nullptr;
        if (v && v->present() && v->where.host_readable()) {
            std::memcpy(dst, v->data, ti.n_bytes);
        } else if (reader_.io) {
            STRATA_TRY(reader_.io->read(ti.offset, size_t(ti.n_bytes), dst));
        } else {
            return err("tensor " + ti.name + " is neither in memory nor readable from the file");
        }
        has_selection_bias_[size_t(t.layer)] = 1;
    }
    return {};
}

Result<WeightStore::EmbeddingLookup> ModelStore::embedding_rows(std::span<const int32_t> tokens) {
    if (!rows_.embedding_streamed()) return WeightStore::embedding_rows(tokens);
    STRATA_ASSIGN(const TensorView* table, rows_.embedding_rows(tokens));
    return EmbeddingLookup{table, true};
}

int ModelStore::head_pieces() const {
    return rows_.head_streamed() ? rows_.head_chunks() : 1;
}

Result<const TensorView*> ModelStore::acquire_head_piece(int piece, int64_t& first_row) {
    if (!rows_.head_streamed()) return WeightStore::acquire_head_piece(piece, first_row);
    return rows_.acquire_head_chunk(piece, first_row);
}

void ModelStore::release_head_piece(int piece) {
    if (rows_.head_streamed()) rows_.release_head_chunk(piece);
}

void ModelStore::reset_stats() {
    stats_ = {};
    gpu_stats_ = {};
    ring_.reset_stats();
    if (cache_) cache_->reset_stats();
}

std::string ModelStore::mode_name() const {
    return mode_;
}

StoreReport ModelStore::report() const {
    StoreReport r;
    r.mode = mode_name();
    r.resident_bytes = resident_bytes();
    r.load_seconds = arena_.load_seconds() + host_arena_.load_seconds();
    r.totals = stats_;
    r.slots = ring_.slot_count();
    r.slot_bytes = ring_.slot_bytes();
    r.slot_stats = ring_.stats();
    if (cache_) {
        r.cache_entries = cache_->entries();
        r.entry_bytes = cache_->entry_bytes();
        r.experts = cache_->totals();
        r.expert_layers = cache_->layer_stats();
    }
    if (gpu_level_) {
        r.gpu_expert_entries = gpu_level_->entries();
        r.gpu_experts = gpu_stats_;
    }
    r.warnings.insert(r.warnings.end(), warnings_.begin(), warnings_.end());
    return r;
}

}  // namespace strata
