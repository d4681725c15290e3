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

// One task: query heads [j0, j1) of the group sharing KV head kvh, tokens [t0, t1).
void attend_block(const KvCache& kv, int layer, const AttentionShape& s, const float* q, int64_t t0,
                  int64_t t1, int64_t pos0, int kvh, int j0, int j1, float* out) {
    TaskScratch& sc = task_scratch();
    const int group_all = s.n_head / s.n_head_kv;
    const int group = j1 - j0;
    const int64_t n_q = (t1 - t0) * group;
    const int64_t n_kv = pos0 + t1;  // positions the last token of the block sees
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
        const int64_t visible = pos0 + t0 + c / group + 1;
        float* row = &sc.scores[size_t(c * n_kv)];
        for (int64_t p = 0; p < visible; ++p) row[p] *= s.scale;
        std::fill(row + visible, row + n_kv, -std::numeric_limits<float>::infinity());
        softmax(row, n_kv);
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

}  // namespace

void reserve_attention_scratch(const KvCache& kv, const AttentionShape& widest, int64_t max_batch,
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
               int64_t pos0, float* out, ThreadPool& pool) {
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
            attend_block(kv, layer, s, q, t0, t1, pos0, kvh, split * per_split,
                         (split + 1) * per_split, out);
        }
    });
}

}  // namespace strata::cpu
