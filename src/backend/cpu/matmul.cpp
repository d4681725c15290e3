// The matmul driver: activation conversion, tiling, threading, and the scalar path.
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/tile_kernel.h"
#include "model/activation_memory.h"
#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"

namespace strata::cpu {

namespace {

// Growable scratch that keeps its memory between calls, so the decode loop does not allocate
// once it has seen its largest shape. 64-byte aligned (any block struct fits). It grows to exactly
// the size asked, the old block freed first, so it never holds more than the largest call needed
// (model/activation_memory.h counts that, not a doubling vector's capacity).
class Scratch {
  public:
    void* bytes(size_t n) {
        const size_t lines = (n + sizeof(Line) - 1) / sizeof(Line);
        if (lines > words_.size()) {
            std::vector<Line>().swap(words_);
            words_.resize(lines);
        }
        return words_.data();
    }
    float* floats(size_t n) { return static_cast<float*>(bytes(n * sizeof(float))); }

  private:
    struct alignas(64) Line {
        unsigned char b[64];
    };
    std::vector<Line> words_;
};

// The activations of a matmul converted to the weight's dot-product type, on the calling thread.
Scratch& converted_scratch() {
    static thread_local Scratch scratch;
    return scratch;
}

size_t type_alignment(TensorType t) {
    using namespace quant;
    switch (t) {
        case TensorType::F32:
            return alignof(float);
        case TensorType::F16:
        case TensorType::BF16:
            return alignof(uint16_t);
        case TensorType::MXFP4:
            return alignof(BlockMXFP4);
        default:
            return alignof(uint16_t);  // every other block struct starts with fp16 fields
    }
}

// The fast kernel of `path` for t; {} when there is none or this CPU cannot run the path (the
// kernel tables themselves are compiled for their instruction set).
detail::TileKernel tile_kernel_for(CpuPath path, TensorType t) {
    static const CpuFeatures features = detect_cpu_features();
    if (!cpu_path_runs_on(path, features)) return {};
    switch (path) {
        case CpuPath::avx2:
            return detail::avx2_tile_kernel(t);
        case CpuPath::avx512:
            return detail::avx512_tile_kernel(t);
        case CpuPath::scalar:
            break;
    }
    return {};
}

// The activation quantizer of `path` for act; nullptr when it has none or this CPU cannot run it.
detail::QuantizeActivationsFn activation_quantizer_for(CpuPath path, TensorType act) {
    static const CpuFeatures features = detect_cpu_features();
    if (!cpu_path_runs_on(path, features)) return nullptr;
    switch (path) {
        case CpuPath::avx2:
            return detail::avx2_activation_quantizer(act);
        case CpuPath::avx512:
            return detail::avx512_activation_quantizer(act);
        case CpuPath::scalar:
            break;
    }
    return nullptr;
}

// Rows of W per chunk handed to a thread: several chunks per thread so that a late or slow thread
// takes fewer of them, a whole number of tiles, and (for batches) few enough weight bytes that
// the chunk stays in the core's L2 cache while every column tile passes over it. The chunks are
// cut by bytes from the whole parallel job (`job_bytes`: every matrix it shares out; 0: W
// alone), so a job of many small matrices (a token's experts) is not many tiny chunks, each a
// turn at the shared counter, which with many threads costs as much as the reads.
int64_t rows_per_chunk(const QuantMatrix& W, int64_t n_cols, int tile_rows, int n_threads,
                       uint64_t job_bytes = 0) {
    constexpr uint64_t kChunksPerThread = 8;
    constexpr size_t kChunkCacheBytes = 256 * 1024;
    if (job_bytes == 0) job_bytes = uint64_t(W.rows) * W.row_stride;
    const uint64_t chunk_bytes = job_bytes / (uint64_t(n_threads) * kChunksPerThread);
    int64_t rows = std::clamp<int64_t>(W.row_stride ? int64_t(chunk_bytes / W.row_stride) : W.rows,
                                       1, std::max<int64_t>(W.rows, 1));
    if (n_cols > 1) {
        rows = std::min<int64_t>(rows, std::max<size_t>(1, kChunkCacheBytes / W.row_stride));
    }
    return std::max<int64_t>(tile_rows, rows / tile_rows * tile_rows);
}

// Activation rows of `cols` values converted per task: enough that a few rows (a decode step's
// experts, all copies of one token) are converted on the calling thread, which takes less time
// than waking the pool for them.
int64_t quantize_grain(int64_t cols) {
    constexpr int64_t kValuesPerTask = 16384;
    return std::max<int64_t>(1, kValuesPerTask / std::max<int64_t>(cols, 1));
}

// Scalar path: each weight row dequantized by the reference dequantizer and dotted in double
// with the dequantized activations (exact products of the same quantized values the fast paths
// use, so it is their reference up to summation order). The activations are dequantized
// kScalarMatmulColumns columns at a time, so its scratch does not grow with the batch.
void scalar_matmul(const QuantMatrix& W, const uint8_t* act, size_t act_row_bytes, int64_t n,
                   float* Y, ThreadPool& pool) {
    const TensorType act_type = quant::vec_dot_type(W.type);
    static thread_local Scratch act_floats_scratch;
    const int64_t block = std::min<int64_t>(n, kScalarMatmulColumns);
    float* act_floats = act_floats_scratch.floats(size_t(block * W.cols));
    const int64_t chunk = rows_per_chunk(W, block, 1, pool.size());
    for (int64_t c0 = 0; c0 < n; c0 += block) {
        const int64_t cols = std::min(block, n - c0);
        for (int64_t c = 0; c < cols; ++c) {
            quant::dequantize_row(act_type, act + (c0 + c) * act_row_bytes, act_floats + c * W.cols,
                                  W.cols);
        }
        pool.parallel_for(W.rows, chunk, [&](int64_t begin, int64_t end, int) {
            static thread_local Scratch row_scratch;
            float* row = row_scratch.floats(size_t(W.cols));
            for (int64_t r = begin; r < end; ++r) {
                quant::dequantize_row(
                    W.type, static_cast<const uint8_t*>(W.data) + r * W.row_stride, row, W.cols);
                for (int64_t c = 0; c < cols; ++c) {
                    const float* x = act_floats + c * W.cols;
                    double sum = 0;
                    for (int64_t i = 0; i < W.cols; ++i) sum += double(row[i]) * double(x[i]);
                    Y[(c0 + c) * W.rows + r] = float(sum);
                }
            }
        });
    }
}

// Bytes of an activation row of `cols` values converted to act_type, with the Q8_0 sides
// (tile_kernel.h) where `sides` asks and act_type is Q8_0.
size_t converted_row_bytes(TensorType act_type, int64_t cols, bool sides) {
    if (sides && act_type == TensorType::Q8_0) {
        return detail::q8_0_row_bytes_with_sides(cols / quant::kQK);
    }
    return size_t(quant::quant_row_bytes(act_type, cols).value());
}

// x converted to act_type at `out`, followed by the Q8_0 sides as converted_row_bytes says.
void convert_row(CpuPath path, TensorType act_type, const float* x, uint8_t* out, int64_t cols,
                 bool sides) {
    quantize_activations_on_path(path, act_type, x, out, cols);
    if (sides && act_type == TensorType::Q8_0) detail::write_q8_0_sides(out, cols / quant::kQK);
}

// Rows of a few cache lines set far apart (attention's keys: one head's values inside a cache
// row of every head) are each read in a couple of loads: too little per row for the hardware
// prefetchers, so such a product waits on memory most of its time. A tile of them asks for the
// rows kShortRowLookahead on while it computes (decode attention at 1k context on 2 threads:
// 3.7 ms a token without, 2.0 with; 16 to 64 rows measure alike).
constexpr size_t kShortRowBytes = 512;
constexpr int64_t kShortRowLookahead = 32;

// Each cache line of rows [from, to), once.
void prefetch_short_rows(const uint8_t* w, size_t stride, size_t row_bytes, int64_t from,
                         int64_t to) {
    for (int64_t r = from; r < to; ++r) {
        const uintptr_t row = reinterpret_cast<uintptr_t>(w + size_t(r) * stride);
        for (uintptr_t line = row & ~uintptr_t(63); line < row + row_bytes; line += 64) {
            __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
        }
    }
}

// Rows [begin, end) of W times every activation column, tile by tile.
void tile_rows(const detail::TileKernel& k, const QuantMatrix& W, const uint8_t* act,
               size_t act_row_bytes, int64_t n, float* Y, int64_t begin, int64_t end) {
    const int64_t n_blocks = W.cols / tensor_type_info(W.type)->block_size;
    const auto* w = static_cast<const uint8_t*>(W.data);
    const size_t row_bytes = size_t(quant::quant_row_bytes(W.type, W.cols).value());
    const int64_t lookahead =
        row_bytes <= kShortRowBytes && W.row_stride >= 2 * row_bytes ? kShortRowLookahead : 0;
    for (int64_t c0 = 0; c0 < n; c0 += k.max_cols) {
        const int n_cols = int(std::min<int64_t>(k.max_cols, n - c0));
        for (int64_t r0 = begin; r0 < end; r0 += k.max_rows) {
            const int n_rows = int(std::min<int64_t>(k.max_rows, end - r0));
            if (lookahead > 0 && c0 == 0) {  // later column tiles find the rows in cache
                prefetch_short_rows(w, W.row_stride, row_bytes, std::min(r0 + lookahead, end),
                                    std::min(r0 + lookahead + n_rows, end));
            }
            k.fn(w + r0 * W.row_stride, W.row_stride, n_rows, act + c0 * act_row_bytes,
                 act_row_bytes, n_cols, n_blocks, Y + c0 * W.rows + r0, size_t(W.rows));
        }
    }
}

void tiled_matmul(const detail::TileKernel& k, const QuantMatrix& W, const uint8_t* act,
                  size_t act_row_bytes, int64_t n, float* Y, ThreadPool& pool) {
    const int64_t chunk = rows_per_chunk(W, n, k.max_rows, pool.size());
    pool.parallel_for(W.rows, chunk, [&](int64_t begin, int64_t end, int) {
        tile_rows(k, W, act, act_row_bytes, n, Y, begin, end);
    });
}

}  // namespace

Result<QuantMatrix> make_quant_matrix(TensorType type, const void* data, int64_t rows, int64_t cols,
                                      size_t row_stride) {
    if (!matmul_supports(type)) {
        return err("matmul: weights of type ", std::string(tensor_type_name(type)),
                   " are not supported on the CPU");
    }
    STRATA_ASSIGN(const uint64_t row_bytes, quant::quant_row_bytes(type, cols));
    if (rows < 0) return err("matmul: negative row count ", std::to_string(rows));
    if (row_stride == 0) row_stride = size_t(row_bytes);
    if (row_stride < row_bytes || row_stride % type_alignment(type) != 0 ||
        reinterpret_cast<uintptr_t>(data) % type_alignment(type) != 0) {
        return err("matmul: ", std::string(tensor_type_name(type)), " rows of ",
                   std::to_string(row_bytes), " bytes cannot sit ", std::to_string(row_stride),
                   " bytes apart at this address (too close or misaligned)");
    }
    return QuantMatrix{type, data, rows, cols, row_stride};
}

bool matmul_supports(TensorType t) {
    return quant::is_quant_supported(t) && t != TensorType::Q8_1 && t != TensorType::Q8_K;
}

void matmul_on_path(CpuPath path, const QuantMatrix& W, const float* X, float* Y, int64_t n,
                    ThreadPool& pool) {
    assert(matmul_supports(W.type) && n >= 0);
    assert(cpu_path_runs_on(path, detect_cpu_features()));
    if (n == 0 || W.rows == 0) return;
    if (W.cols == 0) {
        std::fill(Y, Y + n * W.rows, 0.0f);
        return;
    }
    // Activations converted once per call, in parallel over the batch columns.
    const TensorType act_type = quant::vec_dot_type(W.type);
    const detail::TileKernel k = tile_kernel_for(path, W.type);
    const size_t act_row_bytes = converted_row_bytes(act_type, W.cols, k.q8_0_sides);
    auto* act = static_cast<uint8_t*>(converted_scratch().bytes(act_row_bytes * size_t(n)));
    pool.parallel_for(n, quantize_grain(W.cols), [&](int64_t begin, int64_t end, int) {
        for (int64_t c = begin; c < end; ++c) {
            convert_row(path, act_type, X + c * W.cols, act + c * act_row_bytes, W.cols,
                        k.q8_0_sides);
        }
    });
    if (k.fn == nullptr) {
        scalar_matmul(W, act, act_row_bytes, n, Y, pool);
    } else {
        tiled_matmul(k, W, act, act_row_bytes, n, Y, pool);
    }
}

void reserve_converted_activations(size_t bytes) {
    (void)converted_scratch().bytes(bytes);
}

void quantize_activations_on_path(CpuPath path, TensorType act, const float* x, void* out,
                                  int64_t n) {
    const detail::QuantizeActivationsFn fast = activation_quantizer_for(path, act);
    if (fast == nullptr) {
        quant::quantize_row_activations(act, x, out, n);
    } else {
        fast(x, out, n / tensor_type_info(act)->block_size);
    }
}

void matmul(const QuantMatrix& W, const float* X, float* Y, int64_t n, ThreadPool& pool) {
    matmul_on_path(kernel_path(W.type, n), W, X, Y, n, pool);
}

void matvec(const QuantMatrix& W, const float* x, float* y, ThreadPool& pool) {
    matmul_on_path(kernel_path(W.type, 1), W, x, y, 1, pool);
}

void matmul_segments(std::span<const MatmulSegment> segs, const float* X, int64_t rows,
                     ThreadPool& pool) {
    if (rows == 0 || segs.empty()) return;
    const int64_t cols = segs[0].W.cols;
    // Activations converted once per activation type (q, k and v of a Q4_K_M file mix Q4_K and
    // Q6_K, which share Q8_K); one work list over the rows of every matrix.
    // Scratch of the calling thread, reused from call to call (decode calls this a few dozen
    // times a token); the workers reach it through these references, never by name.
    struct Act {
        TensorType type;
        size_t row_bytes;
        uint8_t* bytes;
    };
    struct Item {
        size_t segment;
        int64_t begin, end;
    };
    struct MultiScratch {
        Scratch act_bytes[4];
        std::vector<Act> acts;
        std::vector<Item> items;
        std::vector<size_t> act_of;
        std::vector<detail::TileKernel> kernels;
        std::vector<CpuPath> paths;
    };
    static thread_local MultiScratch tls;
    MultiScratch& sc = tls;
    std::vector<Act>& acts = sc.acts;
    std::vector<Item>& items = sc.items;
    std::vector<size_t>& act_of = sc.act_of;
    std::vector<detail::TileKernel>& kernels = sc.kernels;
    std::vector<CpuPath>& paths = sc.paths;  // each segment's, by its type and its rows' phase
    acts.clear();
    items.clear();
    act_of.assign(segs.size(), 0);
    kernels.assign(segs.size(), {});
    paths.assign(segs.size(), CpuPath::scalar);
    uint64_t job_bytes = 0;
    bool sides = false;  // some kernel reads Q8_0 activations with their sides
    for (size_t i = 0; i < segs.size(); ++i) {
        const MatmulSegment& sg = segs[i];
        if (sg.count == 0) continue;
        job_bytes += uint64_t(sg.W.rows) * sg.W.row_stride;
        paths[i] = kernel_path(sg.W.type, sg.count);
        kernels[i] = tile_kernel_for(paths[i], sg.W.type);
        sides = sides || kernels[i].q8_0_sides;
    }
    for (size_t i = 0; i < segs.size(); ++i) {
        const MatmulSegment& sg = segs[i];
        const QuantMatrix& W = sg.W;
        assert(matmul_supports(W.type) && W.cols == cols);
        assert(sg.first >= 0 && sg.count >= 0 && sg.first + sg.count <= rows);
        if (sg.count == 0) continue;
        if (kernels[i].fn == nullptr || W.cols == 0) {
            // rare: no fast kernel for this type
            matmul_on_path(paths[i], W, X + sg.first * cols, sg.Y + sg.first * W.rows, sg.count,
                           pool);
            continue;
        }
        const TensorType at = quant::vec_dot_type(W.type);
        size_t a = 0;
        while (a < acts.size() && acts[a].type != at) ++a;
        if (a == acts.size()) {
            // At most one activation type per matrix, and callers pass few types. Every path's
            // quantizer writes the same bytes: the first segment's converts for all.
            assert(a < std::size(sc.act_bytes));
            const size_t rb = converted_row_bytes(at, cols, sides);
            const Act act{at, rb, static_cast<uint8_t*>(sc.act_bytes[a].bytes(rb * size_t(rows)))};
            acts.push_back(act);
            pool.parallel_for(rows, quantize_grain(cols), [&](int64_t begin, int64_t end, int) {
                for (int64_t c = begin; c < end; ++c) {
                    convert_row(paths[i], at, X + c * cols, act.bytes + size_t(c) * act.row_bytes,
                                cols, sides);
                }
            });
        }
        act_of[i] = a;
        const int64_t chunk =
            rows_per_chunk(W, sg.count, kernels[i].max_rows, pool.size(), job_bytes);
        for (int64_t r = 0; r < W.rows; r += chunk) {
            items.push_back({i, r, std::min(W.rows, r + chunk)});
        }
    }
    pool.parallel_for(int64_t(items.size()), 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t j = begin; j < end; ++j) {
            const Item& it = items[size_t(j)];
            const MatmulSegment& sg = segs[it.segment];
            const Act& act = acts[act_of[it.segment]];
            tile_rows(kernels[it.segment], sg.W, act.bytes + size_t(sg.first) * act.row_bytes,
                      act.row_bytes, sg.count, sg.Y + sg.first * sg.W.rows, it.begin, it.end);
        }
    });
}

void matmul_multi(std::span<const QuantMatrix> Ws, const float* X, std::span<float* const> Ys,
                  int64_t n, ThreadPool& pool) {
    assert(Ws.size() == Ys.size() && Ws.size() <= 4);
    std::array<MatmulSegment, 4> segs;
    for (size_t i = 0; i < Ws.size(); ++i) segs[i] = {Ws[i], 0, n, Ys[i]};
    matmul_segments({segs.data(), Ws.size()}, X, n, pool);
}

void detail::write_q8_0_sides(uint8_t* row, int64_t n_blocks) {
    const auto* blocks = reinterpret_cast<const quant::BlockQ8_0*>(row);
    uint8_t* sides = row + q8_0_sides_offset(n_blocks);
    for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t sum = 0;
        for (const int8_t q : blocks[b].qs) sum += q;
        const Q8_0Side side{quant::fp16_to_fp32(blocks[b].d), -128 * sum};
        std::memcpy(sides + size_t(b) * sizeof side, &side, sizeof side);
    }
}

std::string_view matmul_kernel_name(CpuPath path, TensorType t) {
    return tile_kernel_for(path, t).fn != nullptr ? cpu_path_name(path) : "scalar";
}

}  // namespace strata::cpu
