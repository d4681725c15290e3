#include "backend/cpu/mla_attention.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"

namespace strata::cpu {

namespace {

// Kernels called inside a task run on the task's thread: a pool of one runs work inline.
ThreadPool& inline_pool() {
    static thread_local ThreadPool pool(1);
    return pool;
}

// Bytes of the first n elements of a cache row (n whole blocks for Q8_0).
size_t element_bytes(TensorType t, int64_t n) {
    return t == TensorType::F16 ? size_t(n) * 2 : size_t(n / 32) * sizeof(quant::BlockQ8_0);
}

struct MlaScratch {
    std::vector<float> scores;  // a task's rows x the positions they see
    std::vector<float> tile;    // kMlaPositionsPerTile latent parts, dequantized
    std::vector<float> head;    // one head's key rows, dequantized (mla_absorb_transposed)
};

MlaScratch& scratch() {
    static thread_local MlaScratch sc;
    return sc;
}

// Rows [r0, r1) of the head-major batch (row = h * n + t): scores, softmax, weighted latents.
void attend_rows(const KvCache& kv, int layer, const MlaShape& s, const float* q, int64_t n,
                 int64_t pos0, int64_t r0, int64_t r1, float* out) {
    MlaScratch& sc = scratch();
    const int64_t m = r1 - r0, width = s.row_width();
    // The positions the block's latest token sees (its rows' tokens need not be consecutive).
    int64_t t_last = 0;
    for (int64_t r = r0; r < r1; ++r) t_last = std::max(t_last, r % n);
    const int64_t n_kv = pos0 + t_last + 1;
    const TensorType et = kv.element_type();

    const QuantMatrix K{et, kv.key_row(layer, 0), n_kv, width, kv.key_row_bytes(layer)};
    sc.scores.resize(size_t(m * n_kv));
    matmul(K, q + r0 * width, sc.scores.data(), m, inline_pool());
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < m; ++c) {
        float* row = &sc.scores[size_t(c * n_kv)];
        const int64_t seen = pos0 + (r0 + c) % n + 1;
        for (int64_t p = 0; p < seen; ++p) row[p] *= s.scale;
        std::fill(row + seen, row + n_kv, kMasked);
        softmax(row, n_kv);
    }

    // With the F16 cache the weights are rounded to F16, as the reference's product of the
    // (F16) values with the weights converted to their type does.
    const bool f16_weights = et == TensorType::F16;
    float* o = out + r0 * s.rank;
    std::fill(o, o + m * s.rank, 0.0f);
    sc.tile.resize(size_t(kMlaPositionsPerTile * s.rank));
    for (int64_t p0 = 0; p0 < n_kv; p0 += kMlaPositionsPerTile) {
        const int64_t p1 = std::min(n_kv, p0 + kMlaPositionsPerTile);
        for (int64_t p = p0; p < p1; ++p) {
            quant::dequantize_row(et, kv.key_row(layer, p), &sc.tile[size_t((p - p0) * s.rank)],
                                  s.rank);
        }
        for (int64_t c = 0; c < m; ++c) {
            const float* w = &sc.scores[size_t(c * n_kv)];
            float* oc = o + c * s.rank;
            for (int64_t p = p0; p < p1; ++p) {
                const float wp =
                    f16_weights ? quant::fp16_to_fp32(quant::fp32_to_fp16(w[p])) : w[p];
                if (wp != 0.0f) axpy(oc, wp, &sc.tile[size_t((p - p0) * s.rank)], s.rank);
            }
        }
    }
}

// A decode step (one token, every head) split over the cached rows, so that each is read once
// however many threads share the heads: the scores of every head over a chunk of positions per
// task, each head's softmax, then per task a slice of the latent's values of every head over all
// positions. Each score is the same product and each output sums the same weighted values in
// position order as in attend_rows: the same bits.
void attend_by_positions(const KvCache& kv, int layer, const MlaShape& s, const float* q,
                         int64_t pos0, float* out, std::vector<float>& scores, ThreadPool& pool) {
    const int64_t heads = s.n_head, width = s.row_width(), n_kv = pos0 + 1;
    const TensorType et = kv.element_type();
    constexpr int64_t kMinChunk = 64;  // positions: a task worth waking a thread for
    const int64_t chunks =
        std::clamp<int64_t>(2 * pool.size(), 1, (n_kv + kMinChunk - 1) / kMinChunk);
    const int64_t chunk = (n_kv + chunks - 1) / chunks;
    scores.resize(size_t(heads * n_kv));
    pool.parallel_for(chunks, 1, [&](int64_t begin, int64_t end, int) {
        MlaScratch& sc = scratch();
        for (int64_t c = begin; c < end; ++c) {
            const int64_t p0 = c * chunk, p1 = std::min(n_kv, p0 + chunk);
            if (p0 >= p1) continue;
            const QuantMatrix K{et, kv.key_row(layer, p0), p1 - p0, width, kv.key_row_bytes(layer)};
            sc.scores.resize(size_t(heads * (p1 - p0)));
            matmul(K, q, sc.scores.data(), heads, inline_pool());
            for (int64_t h = 0; h < heads; ++h) {
                std::copy_n(&sc.scores[size_t(h * (p1 - p0))], p1 - p0,
                            &scores[size_t(h * n_kv + p0)]);
            }
        }
    });
    const bool f16_weights = et == TensorType::F16;
    pool.parallel_for(heads, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t h = begin; h < end; ++h) {
            float* row = &scores[size_t(h * n_kv)];
            for (int64_t p = 0; p < n_kv; ++p) row[p] *= s.scale;
            softmax(row, n_kv);
            if (!f16_weights) continue;
            for (int64_t p = 0; p < n_kv; ++p) {
                row[p] = quant::fp16_to_fp32(quant::fp32_to_fp16(row[p]));
            }
        }
    });
    // Slices of whole 32-value blocks (a Q8_0 row's), two per thread where the latent allows.
    const int64_t blocks = s.rank / 32;
    const int64_t slices = std::clamp<int64_t>(2 * pool.size(), 1, std::max<int64_t>(1, blocks));
    const int64_t slice = blocks > 0 ? (blocks + slices - 1) / slices * 32 : s.rank;
    pool.parallel_for(slices, 1, [&](int64_t begin, int64_t end, int) {
        MlaScratch& sc = scratch();
        for (int64_t task = begin; task < end; ++task) {
            const int64_t d0 = task * slice, d1 = std::min<int64_t>(s.rank, d0 + slice);
            if (d0 >= d1) continue;
            const int64_t cols = d1 - d0;
            for (int64_t h = 0; h < heads; ++h) std::fill_n(out + h * s.rank + d0, cols, 0.0f);
            for (int64_t p0 = 0; p0 < n_kv; p0 += kMlaPositionsPerTile) {
                const int64_t p1 = std::min(n_kv, p0 + kMlaPositionsPerTile);
                for (int64_t p = p0; p < p1; ++p) {
                    quant::dequantize_row(et, kv.key_row(layer, p) + element_bytes(et, d0),
                                          &sc.tile[size_t((p - p0) * cols)], cols);
                }
                for (int64_t h = 0; h < heads; ++h) {
                    const float* w = &scores[size_t(h * n_kv)];
                    float* oh = out + h * s.rank + d0;
                    for (int64_t p = p0; p < p1; ++p) {
                        if (w[p] != 0.0f) axpy(oh, w[p], &sc.tile[size_t((p - p0) * cols)], cols);
                    }
                }
            }
        }
    });
}

}  // namespace

void mla_attention(const KvCache& kv, int layer, const MlaShape& s, const float* q, int64_t n,
                   int64_t pos0, float* out, ThreadPool& pool, std::vector<float>* decode_scores) {
    // A decode step over a context long enough to share out by positions, when the scores of
    // every head over it fit what was reserved.
    if (decode_scores != nullptr && n == 1 && pool.size() > 1 && pos0 + 1 >= 256 &&
        decode_scores->capacity() >= size_t(s.n_head) * size_t(pos0 + 1)) {
        return attend_by_positions(kv, layer, s, q, pos0, out, *decode_scores, pool);
    }
    const int64_t rows = int64_t(s.n_head) * n;
    // Two tasks per thread where the rows allow (a decode step's heads), at most
    // kMlaRowsPerTask rows each (a prompt's).
    const int64_t per_task = std::clamp<int64_t>(
        (rows + 2 * pool.size() - 1) / (2 * int64_t(pool.size())), 1, kMlaRowsPerTask);
    const int64_t tasks = (rows + per_task - 1) / per_task;
    pool.parallel_for(tasks, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t r0 = task * per_task;
            attend_rows(kv, layer, s, q, n, pos0, r0, std::min(rows, r0 + per_task), out);
        }
    });
}

void reserve_mla_scratch(const KvCache& kv, const MlaShape& s, std::vector<float>& decode_scores,
                         ThreadPool& pool) {
    decode_scores.reserve(size_t(s.n_head) * kv.n_ctx());
    const TensorType act = quant::vec_dot_type(kv.element_type());
    size_t row = size_t(quant::quant_row_bytes(act, s.row_width()).value());
    // Q8_0 rows carry a float and an int per block after 8-byte alignment (matmul.h).
    if (act == TensorType::Q8_0) row += 8 + size_t(s.row_width()) / 32 * 8;
    const size_t converted = size_t(kMlaRowsPerTask) * row;
    pool.run([&](int, int) {
        MlaScratch& sc = scratch();
        // A task's rows over the context, or a decode step's heads over a chunk of it (a
        // quarter at most: the step is shared out only over four chunks or more).
        sc.scores.reserve(std::max(size_t(kMlaRowsPerTask) * kv.n_ctx(),
                                   size_t(s.n_head) * (kv.n_ctx() / 4 + 1)));
        sc.tile.reserve(size_t(kMlaPositionsPerTile * s.rank));
        reserve_converted_activations(converted);
    });
}

void mla_absorb_transposed(const TensorView& kv_b, int n_head, int nope, int head_dim_v,
                           const float* x, int64_t n, float* y, ThreadPool& pool) {
    const int64_t rank = kv_b.ne[0];
    pool.parallel_for(n_head, 1, [&](int64_t begin, int64_t end, int) {
        MlaScratch& sc = scratch();
        sc.head.resize(size_t(nope * rank));
        for (int64_t h = begin; h < end; ++h) {
            // Head h's key rows come first in its nope + head_dim_v rows.
            const int64_t first = h * (nope + head_dim_v);
            for (int i = 0; i < nope; ++i) {
                quant::dequantize_row(kv_b.type, kv_b.data + size_t(first + i) * kv_b.row_bytes,
                                      &sc.head[size_t(i) * size_t(rank)], rank);
            }
            for (int64_t t = 0; t < n; ++t) {
                const float* xt = x + (h * n + t) * nope;
                float* yt = y + (h * n + t) * rank;
                std::fill(yt, yt + rank, 0.0f);
                for (int i = 0; i < nope; ++i)
                    axpy(yt, xt[i], &sc.head[size_t(i) * size_t(rank)], rank);
            }
        }
    });
}

void reserve_mla_absorb_scratch(int nope, int rank, ThreadPool& pool) {
    pool.run([&](int, int) { scratch().head.reserve(size_t(nope) * size_t(rank)); });
}

}  // namespace strata::cpu
