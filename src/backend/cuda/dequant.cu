// Whole rows of a weight in any supported format, dequantized to the exact floats of
// quant::dequantize_row: to fp16 for the prompt GEMM's staging, to fp32 for embedding rows; and
// the small kernels around the GEMM (its activations as the CPU rounds them, the bias).
//
// One thread per 8 consecutive elements of a row (formats_all.cuh, dequant_group): neighbouring
// threads read neighbouring bytes of a block (cached in L1 between them) and write 16 or 32
// consecutive bytes, so the writes are coalesced.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/formats_all.cuh"
#include "backend/cuda/matmul_kernels.h"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t items) {
    return unsigned((items + kThreads - 1) / kThreads);
}

struct DequantArgs {
    const uint8_t* w;
    size_t row_stride;
    int64_t row0;   // first row (without ids)
    int64_t nrows;  // rows written
    int cols;
    const int32_t* ids;  // rows to read, or null for row0 + i
    int64_t table_rows;  // valid ids are below this
    void* out;           // nrows x cols, half or float
    bool vec_store;      // out 16-byte aligned and cols % 8 == 0
};

// Grid: one thread per (output row, group of 8 elements).
// PRECONDITION: the WeightRows preconditions (matmul_kernels.h).
template <class F, bool kHalf>
__global__ void __launch_bounds__(kThreads) dequant_rows(const DequantArgs a) {
    const int groups = (a.cols + 7) / 8;
    const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    if (i >= a.nrows * groups) return;
    const int64_t r = i / groups;
    const int g = int(i - r * groups);
    const int count = min(8, a.cols - 8 * g);
    int64_t src = a.row0 + r;
    bool valid = true;
    if (a.ids) {
        src = a.ids[r];
        valid = src >= 0 && src < a.table_rows;
    }
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (valid) dequant_group<F>(a.w + size_t(src) * a.row_stride, g, count, v);

    const size_t o = size_t(r) * size_t(a.cols) + size_t(8 * g);
    if constexpr (kHalf) {
        __half* dst = static_cast<__half*>(a.out) + o;
        if (a.vec_store && count == 8) {
            uint4 packed;
            packed.x = __half_as_ushort(__float2half_rn(v[0])) |
                       unsigned(__half_as_ushort(__float2half_rn(v[1]))) << 16;
            packed.y = __half_as_ushort(__float2half_rn(v[2])) |
                       unsigned(__half_as_ushort(__float2half_rn(v[3]))) << 16;
            packed.z = __half_as_ushort(__float2half_rn(v[4])) |
                       unsigned(__half_as_ushort(__float2half_rn(v[5]))) << 16;
            packed.w = __half_as_ushort(__float2half_rn(v[6])) |
                       unsigned(__half_as_ushort(__float2half_rn(v[7]))) << 16;
            *reinterpret_cast<uint4*>(dst) = packed;
        } else {
            for (int k = 0; k < count; ++k) dst[k] = __float2half_rn(v[k]);
        }
    } else {
        float* dst = static_cast<float*>(a.out) + o;
        if (a.vec_store && count == 8) {
            reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
            reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
        } else {
            for (int k = 0; k < count; ++k) dst[k] = v[k];
        }
    }
}

template <bool kHalf>
void launch_dequant(const WeightRows& w, DequantArgs a, cudaStream_t stream) {
    a.w = w.data;
    a.row_stride = w.row_stride;
    a.cols = int(w.cols);
    a.table_rows = w.rows;
    a.vec_store = reinterpret_cast<uintptr_t>(a.out) % 16 == 0 && w.cols % 8 == 0;
    const int64_t items = a.nrows * ((w.cols + 7) / 8);
    if (items == 0) return;
    with_format(w.type, [&](auto format) {
        using F = decltype(format);
        dequant_rows<F, kHalf><<<blocks_for(items), kThreads, 0, stream>>>(a);
        STRATA_CUDA_LAUNCHED();
    });
}

// One thread per element, one block per 256 elements of a token (blockIdx.x = token * blocks +
// block), so that a Q8_K block is a thread block and a Q8_0 / Q8_1 block a warp. Writes the
// 16-bit GEMM input: bf16 for BF16 weights, fp16 for the others.
// PRECONDITION: cols a multiple of activation_block_elems(A) for the block types.
template <TensorType A>
__global__ void __launch_bounds__(kThreads)
    gemm_activations(const float* __restrict__ x, int cols, uint16_t* __restrict__ out) {
    static_assert(kThreads == 256);
    const int blocks = (cols + kThreads - 1) / kThreads;
    const int t = int(blockIdx.x) / blocks;
    const int e = (int(blockIdx.x) - t * blocks) * kThreads + int(threadIdx.x);
    const size_t i = size_t(t) * size_t(cols) + size_t(e);
    const bool inside = e < cols;
    const float v = inside ? x[i] : 0.0f;
    if constexpr (A == TensorType::BF16) {
        if (inside) out[i] = uint16_t(float_to_bf16_bits(v));
    } else if constexpr (A == TensorType::F16) {
        if (inside) out[i] = __half_as_ushort(__float2half_rn(v));
    } else {
        __shared__ BlockRoundingScratch scratch;
        const RoundedActivation r = round_in_block<A>(v, scratch);
        if (inside) out[i] = __half_as_ushort(__float2half_rn(r.value()));
    }
}

__global__ void __launch_bounds__(kThreads)
    add_bias(float* __restrict__ y, const float* __restrict__ bias, int64_t rows, int64_t count) {
    const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    if (i < count) y[i] += bias[i % rows];
}

}  // namespace

void launch_dequant_f16(const WeightRows& w, int64_t row0, int64_t nrows, void* out,
                        cudaStream_t stream) {
    DequantArgs a{};
    a.row0 = row0;
    a.nrows = nrows;
    a.out = out;
    launch_dequant<true>(w, a, stream);
}

void launch_gather_rows(const WeightRows& w, const int32_t* ids, int64_t n, float* out,
                        cudaStream_t stream) {
    DequantArgs a{};
    a.nrows = n;
    a.ids = ids;
    a.out = out;
    launch_dequant<false>(w, a, stream);
}

void launch_gemm_activations(TensorType weight, const float* x, int64_t n, int64_t cols, void* out,
                             cudaStream_t stream) {
    const int64_t blocks = n * ((cols + kThreads - 1) / kThreads);
    if (blocks == 0) return;
    auto launch = [&](auto kernel) {
        kernel<<<unsigned(blocks), kThreads, 0, stream>>>(x, int(cols),
                                                          static_cast<uint16_t*>(out));
        STRATA_CUDA_LAUNCHED();
    };
    switch (activation_type(weight)) {
        case TensorType::F16:
            return launch(gemm_activations<TensorType::F16>);
        case TensorType::BF16:
            return launch(gemm_activations<TensorType::BF16>);
        case TensorType::Q8_0:
            return launch(gemm_activations<TensorType::Q8_0>);
        case TensorType::Q8_1:
            return launch(gemm_activations<TensorType::Q8_1>);
        case TensorType::Q8_K:
            return launch(gemm_activations<TensorType::Q8_K>);
        default:
            return;  // F32 weights multiply x as it is
    }
}

void launch_add_bias(float* y, const float* bias, int64_t rows, int64_t n, cudaStream_t stream) {
    if (rows * n == 0) return;
    add_bias<<<blocks_for(rows * n), kThreads, 0, stream>>>(y, bias, rows, rows * n);
    STRATA_CUDA_LAUNCHED();
}

}  // namespace strata::cuda
