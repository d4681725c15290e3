// matvec_q8.h: the activation quantizer kernel, the scratch layout and the dispatch over weight
// formats (their kernels: matvec_q8_k.cu, matvec_q8_32.cu).
#include "backend/cuda/matvec_q8.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/format_traits.h"
#include "backend/cuda/matvec_q8_act.h"
#include "backend/cuda/matvec_q8_kernel.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quantize_q8.cuh"

namespace strata::cuda {

namespace {

// The activation type the CPU backend pairs with weights of type t (quant::vec_dot_type), or
// F32 when matvec_q8 does not handle t (FormatTraits::kQ8Matvec: float weights, IQ4_NL, IQ4_XS
// and MXFP4 have no int8 matvec).
TensorType act_type_for(TensorType t) {
    const FormatInfo f = format_info(t);
    return f.q8_matvec ? f.activation : TensorType::F32;
}

size_t align16(size_t v) {
    return (v + 15) & ~size_t(15);
}

// ---- activation quantizer -----------------------------------------------------------------------

constexpr int kQuantThreads = 256;

// A warp per block, for the blocks of all n tokens in a row: warp g quantizes token g / nb's
// block g % nb (nb blocks per token). Launched with launch_pdl: the matvec behind may start at
// once (its weight loads do not depend on us; it waits for our results before reading them).
// PRECONDITION: blockDim.x == kQuantThreads, cols a multiple of the block, x 16-byte aligned.
__global__ void __launch_bounds__(kQuantThreads)
    quantize_rows(q8warp::Kind kind, const float* x, int64_t cols, int64_t blocks,
                  q8warp::RowOut out) {
    pdl_trigger();
    pdl_wait();
    const int64_t g = (int64_t(blockIdx.x) * kQuantThreads + threadIdx.x) >> 5;
    const int lane = int(threadIdx.x) & 31;
    if (g >= blocks) return;
    const int64_t qk = kind == q8warp::Kind::Q8_K ? 256 : 32;
    const int64_t nb = cols / qk;
    const int64_t t = g / nb, b = g % nb;
    // Token t's row: its codes, and its nb blocks' scales (and sums).
    const q8warp::RowOut row{out.codes + t * cols, out.ds + t * nb, out.d + t * nb,
                             out.bsums + t * (cols / 16)};
    q8warp::row_block(kind, x + t * cols, b, lane, row);
}

}  // namespace

bool device_takes_pdl() {
    static const bool has = [] {
        int dev = 0, major = 0;
        STRATA_CUDA(cudaGetDevice(&dev));
        STRATA_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        return major >= 9;
    }();
    return has;
}

namespace q8detail {

ScratchLayout scratch_layout(TensorType act_type, int64_t cols, int n) {
    ScratchLayout l;
    l.codes = 0;
    l.scales = align16(size_t(n) * size_t(cols));
    if (act_type == TensorType::Q8_K) {
        l.bsums = align16(l.scales + size_t(n) * size_t(cols / 256) * sizeof(float));
        l.end = align16(l.bsums + size_t(n) * size_t(cols / 16) * sizeof(int16_t));
    } else {
        l.bsums = l.scales;
        l.end = align16(l.scales + size_t(n) * size_t(cols / 32) * sizeof(float2));
    }
    return l;
}

ScratchView scratch_view(TensorType act_type, int64_t cols, int n, const void* scratch) {
    const ScratchLayout l = scratch_layout(act_type, cols, n);
    const auto* base = static_cast<const uint8_t*>(scratch);
    return {reinterpret_cast<const int8_t*>(base + l.codes),
            reinterpret_cast<const float2*>(base + l.scales),
            reinterpret_cast<const float*>(base + l.scales),
            reinterpret_cast<const int16_t*>(base + l.bsums)};
}

void launch_quantize_activations(TensorType act_type, const float* x, int n, int64_t cols,
                                 void* scratch, cudaStream_t stream, Pdl pdl) {
    const ScratchLayout l = scratch_layout(act_type, cols, n);
    auto* base = static_cast<uint8_t*>(scratch);
    const q8warp::RowOut out{
        reinterpret_cast<int8_t*>(base + l.codes), reinterpret_cast<float2*>(base + l.scales),
        reinterpret_cast<float*>(base + l.scales), reinterpret_cast<int16_t*>(base + l.bsums)};
    const q8warp::Kind kind = q8warp::kind_of(act_type);
    const int64_t qk = kind == q8warp::Kind::Q8_K ? 256 : 32;
    const int64_t blocks = int64_t(n) * (cols / qk);
    const unsigned grid = unsigned((blocks * 32 + kQuantThreads - 1) / kQuantThreads);
    launch_pdl(pdl, quantize_rows, dim3(grid), dim3(kQuantThreads), 0, stream, kind, x, cols,
               blocks, out);
}

}  // namespace q8detail

bool matvec_q8_supports(TensorType t) {
    return format_info(t).q8_matvec;
}

size_t matvec_q8_scratch_bytes(int64_t max_cols, int max_tokens) {
    const int64_t c = (max_cols + 255) / 256 * 256;
    const int n = max_tokens > kMaxQ8Tokens ? max_tokens : kMaxQ8Tokens;
    const size_t a = q8detail::scratch_layout(TensorType::Q8_0, c, n).end;
    const size_t b = q8detail::scratch_layout(TensorType::Q8_K, c, n).end;
    return a > b ? a : b;
}

TensorType matvec_q8_act_type(TensorType t) {
    return act_type_for(t);
}

void launch_quantize_for(TensorType weight, const float* x, int n, int64_t cols, void* scratch,
                         cudaStream_t stream, Pdl pdl) {
    q8detail::launch_quantize_activations(act_type_for(weight), x, n, cols, scratch, stream, pdl);
}

namespace {

// The kernel arguments of weights w on activations of n tokens quantized into the scratch.
q8k::Args args_for(const WeightRows& w, int n, const float* bias, float* y, const void* scratch) {
    const q8detail::ScratchView v =
        q8detail::scratch_view(act_type_for(w.type), w.cols, n, scratch);
    q8k::Args a;
    a.w = w.data;
    a.stride = w.row_stride;
    a.rows = w.rows;
    a.cols = w.cols;
    a.act.codes = v.codes;
    a.act.ds = v.ds;
    a.act.d = v.d;
    a.act.bsums = v.bsums;
    a.act.cols = w.cols;
    a.bias = bias;
    a.y = y;
    return a;
}

void launch_args(TensorType t, const q8k::Args& a, int n, cudaStream_t stream,
                 const Tuning& tuning) {
    if (act_type_for(t) == TensorType::Q8_K) {
        q8k::launch_k(t, a, n, stream, tuning);
    } else {
        q8k::launch_32(t, a, n, stream, tuning);
    }
}

}  // namespace

void launch_matvec_q8_quantized(const WeightRows& w, int n, const float* bias, float* y,
                                const void* scratch, cudaStream_t stream, const Tuning& tuning) {
    launch_args(w.type, args_for(w, n, bias, y, scratch), n, stream, tuning);
}

void launch_matvec_q8_parts(std::span<const WeightRows> w, int n,
                            std::span<const float* const> biases, std::span<float* const> ys,
                            const void* scratch, cudaStream_t stream, const Tuning& tuning) {
    static_assert(kMaxQ8Parts == q8k::Args::kMaxParts);
    q8k::Args a = args_for(w[0], n, biases[0], ys[0], scratch);
    a.rows = 0;
    for (size_t i = 0; i < w.size(); ++i) {
        a.parts[i] = {w[i].data, w[i].row_stride, ys[i], biases[i], w[i].rows};
        a.rows += w[i].rows;
    }
    a.n_parts = int(w.size());
    launch_args(w[0].type, a, n, stream, tuning);
}

void launch_swiglu_q8(const WeightRows& gate, const WeightRows& up, float* y, const void* scratch,
                      cudaStream_t stream, const Tuning& tuning, const float* gate_bias,
                      const float* up_bias, Glu glu) {
    q8k::Args a = args_for(gate, 1, gate_bias, y, scratch);
    a.w2 = up.data;
    a.stride2 = up.row_stride;
    a.bias2 = up_bias;
    a.glu = glu;
    launch_args(gate.type, a, 1, stream, tuning);
}

void launch_expert_ffn_q8(const WeightRows& gate, size_t gate_stride, const WeightRows& up,
                          size_t up_stride, const WeightRows& down, size_t down_stride,
                          const int32_t* ids, int slots, const float* x, bool x_per_slot, float* h,
                          float* y, void* scratch, cudaStream_t stream, const Tuning& tuning,
                          const ExpertBiases& biases, Glu glu) {
    const int nx = x_per_slot ? slots : 1;
    launch_quantize_for(gate.type, x, nx, gate.cols, scratch, stream, tuning.pdl);
    q8k::Args a = args_for(gate, nx, biases.gate, h, scratch);
    a.w2 = up.data;
    a.stride2 = up.row_stride;
    a.bias2 = biases.up;
    a.glu = glu;
    a.ids = ids;
    a.expert_stride = gate_stride;
    a.expert_stride2 = up_stride;
    a.bias_expert_stride = biases.gate_stride;
    a.bias_expert_stride2 = biases.up_stride;
    a.bias_ids = biases.ids;
    a.y_slot_stride = gate.rows;
    a.slots = slots;
    a.act_per_slot = x_per_slot;
    launch_args(gate.type, a, 1, stream, tuning);

    launch_quantize_for(down.type, h, slots, down.cols, scratch, stream, tuning.pdl);
    // Slot s's activations are token s of the rows just quantized.
    q8k::Args b = args_for(down, slots, biases.down, y, scratch);
    b.ids = ids;
    b.expert_stride = down_stride;
    b.bias_expert_stride = biases.down_stride;
    b.bias_ids = biases.ids;
    b.y_slot_stride = down.rows;
    b.slots = slots;
    b.act_per_slot = true;
    launch_args(down.type, b, 1, stream, tuning);
}

void launch_matvec_q8(const WeightRows& w, const float* x, int n, const float* bias, float* y,
                      void* scratch, cudaStream_t stream, const Tuning& tuning) {
    launch_quantize_for(w.type, x, n, w.cols, scratch, stream, tuning.pdl);
    launch_matvec_q8_quantized(w, n, bias, y, scratch, stream, tuning);
}

}  // namespace strata::cuda
