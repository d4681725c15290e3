// Per-layer byte accounting, cached-layer choice and prefetch gaps for make_plan (plan.h has
// the rules these implement).
#include "plan/plan_layers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "model/tensor_view.h"

namespace strata::plan_detail {

uint64_t widened_bytes(uint64_t offset, uint64_t n, uint32_t block) {
    if (n == 0) return 0;
    const uint64_t b = block ? block : 1;
    const uint64_t begin = offset / b * b;
    const uint64_t end = (offset + n + b - 1) / b * b;
    return end - begin;
}

StreamSet stream_set(PlanMode group) {
    return group == PlanMode::ExpertStream ? StreamSet::RoutedExperts : StreamSet::LayerFfn;
}

uint64_t ModelBytes::resident() const {
    uint64_t sum = non_layer;
    for (const LayerBytes& l : layers) sum += l.resident;
    return sum;
}

uint64_t ModelBytes::stream() const {
    uint64_t sum = 0;
    for (const LayerBytes& l : layers) sum += l.stream;
    return sum;
}

uint64_t embedding_row_buffer_bytes(uint64_t row_bytes, uint32_t block) {
    const uint64_t b = block ? block : 1;
    return kRowsPerLookup * ((row_bytes + b - 1) / b * b + b);
}

uint64_t head_chunk_buffer_bytes(uint64_t row_bytes, uint64_t rows, uint32_t block) {
    const uint64_t b = block ? block : 1;
    const uint64_t chunk = std::min<uint64_t>(rows, head_chunk_rows(row_bytes)) * row_bytes;
    return kHeadChunks * ((chunk + b - 1) / b * b + b);
}

ModelBytes model_bytes(const ModelInfo& model, PlanMode group, uint32_t block,
                       const DeepStreaming& deep) {
    ModelBytes mb;
    mb.layers.resize(model.hparams ? model.hparams->n_layer : 0);
    const bool tied = model.hparams && model.hparams->tied_output;
    for (const ModelTensor& t : model.tensors) {
        const TensorInfo& ti = model.info(t);
        const double per_token = static_cast<double>(ti.n_bytes) * t.reads_per_token;
        if (t.layer < 0 || static_cast<size_t>(t.layer) >= mb.layers.size()) {
            if (t.layer < 0 && stream_unit(t, stream_set(group), deep, tied) == StreamUnit::Rows) {
                mb.rows_streamed += ti.n_bytes;
                const uint64_t rows = ti.shape[1] ? ti.shape[1] : 1;
                const uint64_t row_bytes = ti.n_bytes / rows;
                if (t.role == TensorRole::TokenEmbedding) {
                    mb.row_buffers += embedding_row_buffer_bytes(row_bytes, block);
                }
                if (is_head_tensor(t, tied)) {
                    mb.row_buffers += head_chunk_buffer_bytes(row_bytes, rows, block);
                }
                continue;
            }
            mb.non_layer += ti.n_bytes;
            mb.non_layer_per_token += per_token;
            continue;
        }
        LayerBytes& l = mb.layers[t.layer];
        if (stream_unit(t, stream_set(group), deep, tied) != StreamUnit::None) {
            l.stream += ti.n_bytes;
            l.stream_widened += widened_bytes(ti.offset, ti.n_bytes, block);
            l.stream_per_token += per_token;
        } else {
            l.resident += ti.n_bytes;
            l.resident_per_token += per_token;
        }
    }
    return mb;
}

std::vector<int> bisection_order(int n) {
    std::vector<int> order;
    if (n <= 0) return order;
    int bits = 0;
    while ((1ll << bits) < n) ++bits;
    const uint64_t k = 1ull << bits;
    std::vector<bool> seen(n, false);
    for (uint64_t j = 0; j < k; ++j) {
        uint64_t r = 0;  // j with its `bits` low bits reversed: 0, k/2, k/4, 3k/4, ...
        for (int b = 0; b < bits; ++b) r |= ((j >> b) & 1) << (bits - 1 - b);
        const int layer = static_cast<int>(r * static_cast<uint64_t>(n) / k);
        if (!seen[layer]) {
            seen[layer] = true;
            order.push_back(layer);
        }
    }
    return order;
}

std::vector<bool> pick_cached_layers(const ModelBytes& mb, uint64_t room) {
    const int n = static_cast<int>(mb.layers.size());
    std::vector<int> order = bisection_order(n);
    auto benefit = [&](int l) {
        const LayerBytes& x = mb.layers[l];
        return x.stream ? x.stream_per_token / static_cast<double>(x.stream) : 0.0;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return benefit(a) > benefit(b); });
    std::vector<bool> cached(n, false);
    for (int l : order) {
        const uint64_t bytes = mb.layers[l].stream;
        if (bytes == 0 || bytes > room) continue;
        cached[l] = true;
        room -= bytes;
    }
    return cached;
}

GapFigures compute_gaps(const ModelBytes& mb, const std::vector<bool>& cached, double ram_bandwidth,
                        double disk_bandwidth) {
    GapFigures g;
    const int n = static_cast<int>(mb.layers.size());
    std::vector<int> streamed;
    for (int l = 0; l < n; ++l) {
        if (mb.layers[l].stream > 0 && !cached[l]) streamed.push_back(l);
    }
    if (streamed.empty() || ram_bandwidth <= 0 || disk_bandwidth <= 0) return g;

    auto full = [&](int l) {
        const LayerBytes& x = mb.layers[l];
        return (x.resident_per_token + x.stream_per_token) / ram_bandwidth;
    };
    auto attention = [&](int l) { return mb.layers[l].resident_per_token / ram_bandwidth; };

    g.layer_read_seconds = 1e300;
    for (int l : streamed) {
        g.layer_read_seconds =
            std::min(g.layer_read_seconds, mb.layers[l].stream_widened / disk_bandwidth);
    }
    const size_t m = streamed.size();
    for (size_t i = 0; i < m; ++i) {
        const int b = streamed[i];
        double gap = attention(b);
        if (i > 0) {
            for (int l = streamed[i - 1] + 1; l < b; ++l) gap += full(l);
        } else {
            // Across the token boundary: the layers after the last streamed one, the output head
            // and the next token's embedding, and the layers before the first.
            for (int l = streamed[m - 1] + 1; l < n; ++l) gap += full(l);
            gap += mb.non_layer_per_token / ram_bandwidth;
            for (int l = 0; l < b; ++l) gap += full(l);
        }
        g.longest_gap_seconds = std::max(g.longest_gap_seconds, gap);
    }
    const double ratio = g.longest_gap_seconds / g.layer_read_seconds;
    g.lookahead_needed = static_cast<uint32_t>(std::min(1e6, std::ceil(ratio)));
    return g;
}

uint64_t expert_unit_bytes(const ModelInfo& model, uint32_t block) {
    // (layer, expert) -> bytes of that expert's slices in that layer.
    std::map<std::pair<int, int>, uint64_t> unit;
    for (const ModelTensor& t : model.tensors) {
        if (!t.is_routed_expert() || t.layer < 0) continue;
        if (t.expert >= 0) {  // old layout: one tensor per expert
            const TensorInfo& ti = model.info(t);
            unit[{t.layer, t.expert}] += widened_bytes(ti.offset, ti.n_bytes, block);
            continue;
        }
        for (const ExpertSlice& s : expert_slices(model, t)) {
            unit[{t.layer, static_cast<int>(s.expert)}] +=
                widened_bytes(s.offset, s.n_bytes, block);
        }
    }
    uint64_t largest = 0;
    for (const auto& [key, bytes] : unit) largest = std::max(largest, bytes);
    return largest;
}

uint64_t expert_entry_bytes(const ModelInfo& model) {
    const auto piece = [](uint64_t bytes) {
        return (bytes + kExpertEntryAlign - 1) / kExpertEntryAlign * kExpertEntryAlign;
    };
    std::map<std::pair<int, int>, uint64_t> entry;  // (layer, expert) -> bytes
    for (const ModelTensor& t : model.tensors) {
        if (t.is_bias && is_expert_role(t.role) && t.layer >= 0) {
            // One F32 row per expert (gpt-oss's ffn_*_exps.bias), copied with its expert.
            const TensorInfo& info = model.info(t);
            for (uint64_t e = 0; e < info.shape[1]; ++e) {
                entry[{t.layer, static_cast<int>(e)}] += piece(info.row_bytes());
            }
            continue;
        }
        if (!t.is_routed_expert() || t.layer < 0) continue;
        if (t.expert >= 0) {
            entry[{t.layer, t.expert}] += piece(model.info(t).n_bytes);
            continue;
        }
        for (const ExpertSlice& s : expert_slices(model, t)) {
            entry[{t.layer, static_cast<int>(s.expert)}] += piece(s.n_bytes);
        }
    }
    uint64_t largest = 0;
    for (const auto& [key, bytes] : entry) largest = std::max(largest, bytes);
    return largest;
}

}  // namespace strata::plan_detail
