#include "backend/cpu/attention.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "model/activation_memory.h"
#include "quant/quant.h"

namespace strata::cpu {

namespace {

constexpr int64_t kTokensPerTask = kAttentionTokensPerTask;

// Kernels called inside a task run on the task's thread: a pool of one runs work inline.
ThreadPool& inline_pool() {
    static thread_local ThreadPool pool(1);
    return pool;
}

size_t element_offset(TensorType t, int64_t n) {
    return t == TensorType::F16 ? size_t(n) * 2 : size_t(n / 32) * sizeof(quant::BlockQ8_0);
}

struct TaskScratch {
    std::vector<float> q, scores, out, values;
};

TaskScratch& task_scratch() {
    static thread_local TaskScratch sc;
    return sc;
}

// The position slot `slot` of a layer's cache holds when the last stored position is pos_last: the
// slot itself until the ring wraps, then the latest position of its residue.
int64_t slot_position(int64_t slot, int64_t pos_last, int64_t slots) {
    return pos_last < slots ? slot : pos_last - (pos_last - slot) % slots;
}

// Scales and masks one query's scores over n_kv slots and softmaxes them (with its head's sink).
void weigh_scores(float* row, int64_t n_kv, int64_t query_pos, int64_t pos_last, int64_t slots,
                  const AttentionShape& s, int head) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    const int64_t first = s.window > 0 ? query_pos - s.window + 1 : 0;
    if (pos_last < slots) {
        // Slot = position: the visible ones are one run.
        const int64_t lo = std::clamp<int64_t>(first, 0, n_kv);
        const int64_t hi = std::clamp<int64_t>(query_pos + 1, lo, n_kv);
        std::fill(row, row + lo, kMasked);
        for (int64_t p = lo; p < hi; ++p) row[p] *= s.scale;
        std::fill(row + hi, row + n_kv, kMasked);
    } else {
        for (int64_t slot = 0; slot < n_kv; ++slot) {
            const int64_t p = slot_position(slot, pos_last, slots);
            row[slot] = p >= first && p <= query_pos ? row[slot] * s.scale : kMasked;
        }
    }
    softmax(row, n_kv, s.sinks ? s.sinks[head] : kMasked);
}

// One task: query heads [j0, j1) of the group sharing KV head kvh, tokens [t0, t1) of a batch of
// n at pos0.
void attend_block(const KvCache& kv, int layer, const AttentionShape& s, const float* q, int64_t t0,
                  int64_t t1, int64_t pos0, int64_t n, int kvh, int j0, int j1, float* out) {
    TaskScratch& sc = task_scratch();
    const int group_all = s.n_head / s.n_head_kv;
    const int group = j1 - j0;
    const int64_t n_q = (t1 - t0) * group;
    const int64_t slots = kv.positions(layer);
    const int64_t pos_last = pos0 + n - 1;  // the batch's last position, stored like the rest
    // Slots the block reads: the positions its last token sees, or the whole ring once wrapped.
    const int64_t n_kv = pos_last < slots ? pos0 + t1 : slots;
    const TensorType et = kv.element_type();

    // Queries of the heads sharing this KV head, one row per (token, head).
    sc.q.resize(size_t(n_q * s.head_dim_k));
    for (int64_t t = t0; t < t1; ++t) {
        for (int j = 0; j < group; ++j) {
            const float* src =
                q + t * s.n_head * s.head_dim_k + (kvh * group_all + j0 + j) * s.head_dim_k;
            std::memcpy(&sc.q[size_t(((t - t0) * group + j) * s.head_dim_k)], src,
                        sizeof(float) * size_t(s.head_dim_k));
        }
    }
    cpu::QuantMatrix K{et, kv.key_row(layer, 0) + element_offset(et, kvh * s.head_dim_k), n_kv,
                       s.head_dim_k, kv.key_row_bytes(layer)};
    sc.scores.resize(size_t(n_q * n_kv));
    cpu::matmul(K, sc.q.data(), sc.scores.data(), n_q, inline_pool());

    for (int64_t c = 0; c < n_q; ++c) {
        weigh_scores(&sc.scores[size_t(c * n_kv)], n_kv, pos0 + t0 + c / group, pos_last, slots, s,
                     kvh * group_all + j0 + int(c % group));
    }

    sc.out.resize(size_t(n_q * s.head_dim_v));
    if (kv.values_transposed()) {
        cpu::QuantMatrix Vt{et, kv.value_row(layer, int64_t(kvh) * s.head_dim_v), s.head_dim_v,
                            n_kv, kv.value_row_bytes(layer)};
        cpu::matmul(Vt, sc.scores.data(), sc.out.data(), n_q, inline_pool());
    } else {
        sc.values.resize(size_t(n_kv * s.head_dim_v));
        for (int64_t p = 0; p < n_kv; ++p) {
            quant::dequantize_row(et,
                                  kv.value_row(layer, p) + element_offset(et, kvh * s.head_dim_v),
                                  &sc.values[size_t(p * s.head_dim_v)], s.head_dim_v);
        }
        std::fill(sc.out.begin(), sc.out.end(), 0.0f);
        for (int64_t c = 0; c < n_q; ++c) {
            const float* w = &sc.scores[size_t(c * n_kv)];
            float* o = &sc.out[size_t(c * s.head_dim_v)];
            for (int64_t p = 0; p < n_kv; ++p) {
                if (w[p] != 0.0f) axpy(o, w[p], &sc.values[size_t(p * s.head_dim_v)], s.head_dim_v);
            }
        }
    }
    for (int64_t t = t0; t < t1; ++t) {
        for (int j = 0; j < group; ++j) {
            std::memcpy(
                out + t * s.n_head * s.head_dim_v + (kvh * group_all + j0 + j) * s.head_dim_v,
                &sc.out[size_t(((t - t0) * group + j) * s.head_dim_v)],
                sizeof(float) * size_t(s.head_dim_v));
        }
    }
}

// Decode (one token) over a context split into chunks of positions, so that no key or value is
// read twice however many threads share a KV head. Phase one: per (KV head, chunk) the group's
// scores over the chunk's keys; the task that finishes a KV head's last chunk scales and
// softmaxes the group's rows. Phase two: per (KV head, slice of the value dimensions) the
// transposed values' rows times the group's weights. Every score and output is the same
// product, row by row, as in attend_block (a tile kernel's rows are independent), so the bits
// do not depend on the split.
void attend_by_positions(const KvCache& kv, int layer, const AttentionShape& s, const float* q,
                         int64_t pos0, float* out, DecodeScratch& sd, ThreadPool& pool) {
    const int group = s.n_head / s.n_head_kv;
    const int64_t n_kv = pos0 + 1;
    const TensorType et = kv.element_type();
    const int64_t want = 2 * int64_t(pool.size());  // tasks: two per thread
    constexpr int64_t kMinChunk = 64;               // positions: a task worth waking a thread for
    const int64_t chunks = std::clamp<int64_t>((want + s.n_head_kv - 1) / s.n_head_kv, 1,
                                               (n_kv + kMinChunk - 1) / kMinChunk);
    const int64_t chunk = (n_kv + chunks - 1) / chunks;
    sd.scores.resize(size_t(s.n_head) * size_t(n_kv));
    for (int h = 0; h < s.n_head_kv; ++h)
        sd.finished[size_t(h)].store(0, std::memory_order_relaxed);

    pool.parallel_for(s.n_head_kv * chunks, 1, [&](int64_t begin, int64_t end, int) {
        TaskScratch& sc = task_scratch();
        for (int64_t task = begin; task < end; ++task) {
            const int kvh = int(task / chunks);
            const int64_t p0 = (task % chunks) * chunk, p1 = std::min(n_kv, p0 + chunk);
            if (p0 < p1) {
                cpu::QuantMatrix K{et,
                                   kv.key_row(layer, p0) + element_offset(et, kvh * s.head_dim_k),
                                   p1 - p0, s.head_dim_k, kv.key_row_bytes(layer)};
                sc.scores.resize(size_t(group * (p1 - p0)));
                cpu::matmul(K, q + int64_t(kvh) * group * s.head_dim_k, sc.scores.data(), group,
                            inline_pool());
                for (int j = 0; j < group; ++j) {
                    std::memcpy(&sd.scores[size_t((kvh * group + j) * n_kv + p0)],
                                &sc.scores[size_t(j * (p1 - p0))], sizeof(float) * size_t(p1 - p0));
                }
            }
            // The last chunk of a KV head in: its rows are whole (acquire: every chunk's copy
            // happened before its count).
            if (sd.finished[size_t(kvh)].fetch_add(1, std::memory_order_acq_rel) == chunks - 1) {
                for (int j = 0; j < group; ++j) {
                    float* row = &sd.scores[size_t((kvh * group + j) * n_kv)];
                    for (int64_t p = 0; p < n_kv; ++p) row[p] *= s.scale;
                    softmax(row, n_kv,
                            s.sinks ? s.sinks[kvh * group + j]
                                    : -std::numeric_limits<float>::infinity());
                }
            }
        }
    });

    const int64_t slices = std::clamp<int64_t>((want + s.n_head_kv - 1) / s.n_head_kv, 1,
                                               std::max(1, s.head_dim_v / 8));
    const int64_t slice = (s.head_dim_v + slices - 1) / slices;
    pool.parallel_for(s.n_head_kv * slices, 1, [&](int64_t begin, int64_t end, int) {
        TaskScratch& sc = task_scratch();
        for (int64_t task = begin; task < end; ++task) {
            const int kvh = int(task / slices);
            const int64_t d0 = (task % slices) * slice,
                          d1 = std::min<int64_t>(s.head_dim_v, d0 + slice);
            if (d0 >= d1) continue;
            cpu::QuantMatrix Vt{et, kv.value_row(layer, int64_t(kvh) * s.head_dim_v + d0), d1 - d0,
                                n_kv, kv.value_row_bytes(layer)};
            sc.out.resize(size_t(group * (d1 - d0)));
            cpu::matmul(Vt, &sd.scores[size_t(kvh * group) * size_t(n_kv)], sc.out.data(), group,
                        inline_pool());
            for (int j = 0; j < group; ++j) {
                std::memcpy(out + (int64_t(kvh) * group + j) * s.head_dim_v + d0,
                            &sc.out[size_t(j * (d1 - d0))], sizeof(float) * size_t(d1 - d0));
            }
        }
    });
}

}  // namespace

void reserve_attention_scratch(const KvCache& kv, const AttentionShape& widest, int most_heads,
                               int most_kv_heads, int64_t max_batch, DecodeScratch& shared,
                               ThreadPool& pool) {
    const size_t group = size_t(widest.n_head / std::max(1, widest.n_head_kv));
    const size_t n_ctx = kv.n_ctx();
    // The most query rows a task takes: a block of tokens of the widest group.
    const size_t q_rows = size_t(std::clamp<int64_t>(max_batch, 1, kTokensPerTask)) * group;
    // Queries converted for the keys' type; with F16 values, scores converted for them too.
    const TensorType act = quant::vec_dot_type(kv.element_type());
    size_t converted = q_rows * size_t(quant::quant_row_bytes(act, widest.head_dim_k).value());
    if (kv.values_transposed()) {
        converted = std::max(converted,
                             q_rows * size_t(quant::quant_row_bytes(act, int64_t(n_ctx)).value()));
    }
    if (kv.values_transposed()) {
        shared.scores.reserve(size_t(most_heads) * n_ctx);
        if (shared.kv_heads < most_kv_heads) {
            shared.finished = std::make_unique<std::atomic<int>[]>(size_t(most_kv_heads));
            shared.kv_heads = most_kv_heads;
        }
    }
    pool.run([&](int, int) {
        TaskScratch& sc = task_scratch();
        sc.q.reserve(q_rows * size_t(widest.head_dim_k));
        sc.scores.reserve(q_rows * n_ctx);
        sc.out.reserve(q_rows * size_t(widest.head_dim_v));
        if (!kv.values_transposed()) sc.values.reserve(n_ctx * size_t(widest.head_dim_v));
        reserve_converted_activations(converted);
    });
}

void attention(const KvCache& kv, int layer, const AttentionShape& s, const float* q, int64_t n,
               int64_t pos0, float* out, ThreadPool& pool, DecodeScratch* shared) {
    // Split over positions only where the whole context is in order (no window, no ring).
    if (shared != nullptr && n == 1 && kv.values_transposed() && s.n_head_kv < pool.size() &&
        s.window == 0 && int64_t(kv.positions(layer)) == int64_t(kv.n_ctx()) &&
        shared->kv_heads >= s.n_head_kv &&
        shared->scores.capacity() >= size_t(s.n_head) * size_t(pos0 + 1)) {
        return attend_by_positions(kv, layer, s, q, pos0, out, *shared, pool);
    }
    const int64_t blocks = (n + kTokensPerTask - 1) / kTokensPerTask;
    // Decode has one block per KV head: too few tasks for many threads, so the query heads of a
    // group are then split over tasks too (each re-reads the group's keys, a small cost next to
    // idle cores).
    const int group = s.n_head / s.n_head_kv;
    int splits = 1;
    while (splits < group && blocks * s.n_head_kv * splits < 2 * int64_t(pool.size())) splits *= 2;
    while (group % splits != 0) --splits;
    const int per_split = group / splits;
    const int64_t tasks = blocks * s.n_head_kv * splits;
    pool.parallel_for(tasks, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t task = begin; task < end; ++task) {
            const int split = int(task % splits);
            const int kvh = int((task / splits) % s.n_head_kv);
            const int64_t t0 = (task / (int64_t(splits) * s.n_head_kv)) * kTokensPerTask;
            const int64_t t1 = std::min(n, t0 + kTokensPerTask);
            attend_block(kv, layer, s, q, t0, t1, pos0, n, kvh, split * per_split,
                         (split + 1) * per_split, out);
        }
    });
}

}  // namespace strata::cpu
