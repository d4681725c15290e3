// The decode matvec's entry point (host code): the scratch layout and the launch. The kernels
// are in matvec_kernels.cuh, instantiated in matvec_formats_32.cu and matvec_formats_256.cu.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_launch.h"

namespace strata::cuda {

namespace {

size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

// Elements of a token's row of codes: whole activation groups.
size_t q_stride(int64_t cols) {
    return round_up(size_t(std::max<int64_t>(cols, 1)), size_t(kGroupElems));
}

// Where the arrays of MatvecScratch start (each 256-byte aligned), for up to max_cols columns:
// int8 codes, a step per 32 elements at most, a sum per 16 (Q8_K), a Q8_1 sum per 32, and the
// rounded floats of F16 / BF16 weights.
struct ScratchLayout {
    size_t q = 0, step = 0, sums = 0, q8_1_sums = 0, x = 0, total = 0;
};
ScratchLayout scratch_layout(int64_t max_cols) {
    const size_t cols = kMaxMatvecTokens * q_stride(max_cols);  // all tokens' elements
    ScratchLayout l;
    l.step = l.q + round_up(cols * sizeof(int8_t), 256);
    l.sums = l.step + round_up(cols / 32 * sizeof(float), 256);
    l.q8_1_sums = l.sums + round_up(cols / 16 * sizeof(int), 256);
    l.x = l.q8_1_sums + round_up(cols / 32 * sizeof(float), 256);
    l.total = l.x + round_up(cols * sizeof(float), 256);
    return l;
}

QuantizedActivations scratch_arrays(const MatvecScratch& s, int64_t cols) {
    const ScratchLayout l = scratch_layout(s.max_cols);
    auto* base = static_cast<uint8_t*>(s.base);
    QuantizedActivations a;
    a.q = reinterpret_cast<int8_t*>(base + l.q);
    a.step = reinterpret_cast<float*>(base + l.step);
    a.sums = reinterpret_cast<int*>(base + l.sums);
    a.q8_1_sums = reinterpret_cast<float*>(base + l.q8_1_sums);
    a.x = reinterpret_cast<float*>(base + l.x);
    a.q_stride = int(q_stride(cols));
    return a;
}

// Widest power of two (at most 16) dividing both the address and the stride.
int load_width(const void* p, size_t stride) {
    const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | stride;
    int w = 16;
    while (w > 1 && bits % uintptr_t(w) != 0) w /= 2;
    return w;
}

}  // namespace

size_t MatvecScratch::bytes(int64_t max_cols) {
    return scratch_layout(max_cols).total;
}

void launch_matvec(const WeightRows& w, const float* x, int n, const float* bias, float* y,
                   const MatvecScratch& scratch, cudaStream_t stream) {
    MatvecArgs a{};
    a.w = w.data;
    a.row_stride = w.row_stride;
    a.rows = w.rows;
    a.cols = int(w.cols);
    a.load_width = load_width(w.data, w.row_stride);
    a.n = n;
    a.x = x;
    // The floats the float formats read: x itself for F32, the rounded copy in the scratch (whose
    // rows are cols floats from a 256-byte aligned start) for F16 / BF16.
    const bool own_copy = w.type == TensorType::F16 || w.type == TensorType::BF16;
    a.x_aligned = (own_copy || reinterpret_cast<uintptr_t>(x) % 16 == 0) && w.cols % 4 == 0;
    a.act = scratch_arrays(scratch, w.cols);
    a.bias = bias;
    a.y = y;
    if (!launch_matvec_32(w.type, a, stream)) launch_matvec_256(w.type, a, stream);
}

}  // namespace strata::cuda
