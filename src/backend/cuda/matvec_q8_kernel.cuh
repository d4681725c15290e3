// The kernel template of matvec_q8 (matvec_q8.h) and the pieces every format shares: weight
// loads into registers, the view of the quantized activations, the launch.
//
// Layout of the work: a warp owns R = 2 rows (so the activation codes a lane loads feed two rows,
// and twice the weight bytes are in flight), its lanes split each row's blocks: F::kLanes lanes per
// weight block (4 for the 256-element K-quants, a quarter each; 1 for the 32-element formats), so
// one warp pass covers 32 / kLanes consecutive blocks: a contiguous, fully used stretch of the row
// (1152 bytes for Q4_K, 1088 for Q8_0). Each lane first issues the loads of F::kUnroll passes
// for all R rows (2-6 16-byte loads each, 64-200 bytes per lane in flight), then does the
// integer dot products. The grid is sized to what fits on the GPU at once, warps stepping over
// row groups, so small matrices fill every SM and big ones run in one wave without a tail of
// late blocks.
//
// Weight rows are 16-byte aligned in practice (Q4_K 4096 columns: 2304 bytes), but many
// formats have blocks of 18, 34 or 210 bytes, so a block sits at any even offset. load_words
// reads such a span with 16-byte aligned loads (one more than the span needs at worst) and
// shifts the words into place in registers: the bytes still come from HBM once (the overlap is
// an L1 hit), with wide loads.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/format_traits.h"
#include "backend/cuda/glu.cuh"
#include "backend/cuda/pdl.cuh"
#include "gguf/tensor_type.h"

namespace strata::cuda::q8k {

inline constexpr int kThreads = 128;  // 4 warps per block

// How the kernel reads weights of format T (FormatTraits<T>::kQ8Matvec says which types have
// it), specialised in matvec_q8_formats_32.cuh and matvec_q8_formats_k.cuh; each derives from its
// traits (kBlockElems, kBlockBytes).
template <TensorType T>
struct Format;

// ---- loads -------------------------------------------------------------------------------------

// 16 weight bytes read once: no L1 allocation, 256-byte L2 prefetch (rows are read in order).
__device__ __forceinline__ uint4 ld_stream(const void* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}
// 16 weight bytes that the next lane's (or this lane's next) load overlaps: kept in L1.
__device__ __forceinline__ uint4 ld_shared_line(const void* p) {
    uint4 v;
    asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// out = the NW little-endian words at p. A16: p is 16-byte aligned (NW a multiple of 4).
// Otherwise p is only 2-byte aligned: the aligned 16-byte lines over [p, p + 4 NW) are loaded
// (2 for 4 words, 3 for 8) and the words funnel-shifted into place; no byte outside those lines
// is read, and a line past the span's end is not loaded.
template <int NW, bool A16>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t (&out)[NW]) {
    if constexpr (A16) {
        static_assert(NW % 4 == 0);
#pragma unroll
        for (int k = 0; k < NW / 4; ++k) {
            const uint4 v = ld_stream(p + 16 * k);
            out[4 * k] = v.x;
            out[4 * k + 1] = v.y;
            out[4 * k + 2] = v.z;
            out[4 * k + 3] = v.w;
        }
    } else {
        constexpr int kLines = (4 * NW + 14) / 16 + 1;
        constexpr int kW = 4 * kLines;
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        const uint8_t* base = reinterpret_cast<const uint8_t*>(a & ~uintptr_t(15));
        const int s = int(a & 15);
        uint32_t w[kW];
#pragma unroll
        for (int k = 0; k < kLines; ++k) {
            uint4 v = make_uint4(0, 0, 0, 0);
            if (k == 0 || 16 * k < s + 4 * NW) v = ld_shared_line(base + 16 * k);
            w[4 * k] = v.x;
            w[4 * k + 1] = v.y;
            w[4 * k + 2] = v.z;
            w[4 * k + 3] = v.w;
        }
        // Shift down by s / 4 words in two select steps (no dynamically indexed registers),
        // then by the remaining 0 or 2 bytes.
        uint32_t t[kW];
#pragma unroll
        for (int i = 0; i < kW; ++i) t[i] = (s & 8) ? (i + 2 < kW ? w[i + 2] : 0u) : w[i];
#pragma unroll
        for (int i = 0; i < kW; ++i) w[i] = (s & 4) ? (i + 1 < kW ? t[i + 1] : 0u) : t[i];
        const unsigned shift = unsigned(s & 3) * 8;
#pragma unroll
        for (int i = 0; i < NW; ++i) out[i] = __funnelshift_r(w[i], w[i + 1], shift);
    }
}

__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) {
    return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ float half_bits(uint32_t bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}

// ---- activations ------------------------------------------------------------------------------

// The quantized activations in the scratch (matvec_q8.h, q8detail::ScratchLayout).
struct Act {
    const int8_t* codes;   // token t: codes + t * cols
    const float2* ds;      // Q8_0 / Q8_1: [t * cols / 32 + block]
    const float* d;        // Q8_K: [t * cols / 256 + block]
    const int16_t* bsums;  // Q8_K: [t * cols / 16 + group]
    int64_t cols;
};

// 16 codes at element e of token t (e a multiple of 16).
__device__ __forceinline__ int4 act16(const Act& a, int t, int64_t e) {
    return __ldg(reinterpret_cast<const int4*>(a.codes + t * a.cols + e));
}

// ---- the kernel ---------------------------------------------------------------------------------

struct Args {
    const uint8_t* w;
    size_t stride;
    int64_t rows;
    int64_t cols;
    Act act;
    const float* bias;
    float* y;
    // The up matrix of a SwiGLU pair (w is the gate): same type and shape, its own stride; its
    // bias (bias is the gate's), and the activation joining the two.
    const uint8_t* w2 = nullptr;
    size_t stride2 = 0;
    const float* bias2 = nullptr;
    Glu glu{};
    // Routed experts (one token): grid row s (blockIdx.y) computes slot s with expert
    // ids[s]'s matrices (w + ids[s] * expert_stride, w2 + ids[s] * expert_stride2) into
    // y + s * y_slot_stride, on the activations of token 0, or of token s with act_per_slot.
    // The biases too: expert e's are bias_expert_stride (bias_expert_stride2) floats further,
    // with e = bias_ids[s] where given, else ids[s].
    const int32_t* ids = nullptr;
    size_t expert_stride = 0, expert_stride2 = 0;
    int64_t bias_expert_stride = 0, bias_expert_stride2 = 0;
    const int32_t* bias_ids = nullptr;
    int64_t y_slot_stride = 0;
    int slots = 1;  // grid rows (with ids)
    bool act_per_slot = false;
    // Several matrices of one type and width on the same activations in one launch (a layer's
    // q, k and v): with n_parts > 0, rows [0, parts[0].rows) are parts[0]'s, written to
    // parts[0].y as [token][parts[0].rows], the next parts[1].rows parts[1]'s, and so on; `rows`
    // is their sum. Not with ids or w2.
    struct Part {
        const uint8_t* w;
        size_t stride;
        float* y;
        const float* bias;
        int64_t rows;
    };
    static constexpr int kMaxParts = 3;
    Part parts[kMaxParts] = {};
    int n_parts = 0;
    MatvecTrigger trigger = MatvecTrigger::AtEnd;  // matvec_trigger(Tuning::pdl)
};

// Row `row` of a launch's rows: where its weights start, its output column (y + its row in its
// matrix), its bias (null when none) and its matrix's row count (the output's token stride).
struct RowAt {
    const uint8_t* w;
    float* y;
    const float* bias;
    int64_t rows;
};
__device__ __forceinline__ RowAt row_at(const Args& a, const uint8_t* wbase, float* y,
                                        const float* bias, int64_t row) {
    if (a.n_parts == 0) {
        return {wbase + size_t(row) * a.stride, y + row, bias ? bias + row : nullptr, a.rows};
    }
    int p = 0;
    while (p + 1 < a.n_parts && row >= a.parts[p].rows) row -= a.parts[p++].rows;
    const Args::Part& part = a.parts[p];
    return {part.w + size_t(row) * part.stride, part.y + row, part.bias ? part.bias + row : nullptr,
            part.rows};
}

// F: the weight format (Format<T>). NT tokens, R rows per warp, A16: rows 16-byte
// aligned (only matters for formats whose blocks are a multiple of 16 bytes). kSwiGlu: the
// warp's two "rows" are row r of the gate (args.w) and row r of the up matrix (args.w2), and it
// writes glu(gate . x + bias, up . x + bias2) to y[t * rows + r] (R == 2; glu.h).
// PRECONDITION: blockDim.x == kThreads; args as launch_matvec_q8 says; the activations of
// the NT tokens quantized into args.act before this kernel (by the kernel just before it on the
// stream, or earlier).
template <class F, int NT, int R, bool A16, bool kSwiGlu = false>
// At 2+ tokens the activations of all tokens would take ~190 registers (2 blocks per SM):
// capping at 128 keeps 4 blocks (16 warps) per SM with the loads in flight.
__global__ void __launch_bounds__(kThreads, 4) matvec_q8_kernel(Args args) {
    static_assert(!kSwiGlu || R == 2);
    constexpr int kRowsPerWarp = kSwiGlu ? 1 : R;  // output rows
    constexpr int kLanes = F::kLanes;
    constexpr int kBlocksPerPass = 32 / kLanes;
    constexpr int kUnroll = F::kUnroll;
    const int lane = int(threadIdx.x) & 31;
    const int sub = lane % kLanes;
    const int64_t nb = args.cols / F::kBlockElems;
    const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) >> 5;
    const int64_t nwarps = (int64_t(gridDim.x) * kThreads) >> 5;
    const uint8_t* wbase = args.w;
    const uint8_t* wbase2 = args.w2;
    const float* bias = args.bias;
    const float* bias2 = args.bias2;
    float* y = args.y;
    Act act = args.act;
    // Launched early (pdl.cuh); the kernel behind may launch now too where asked (it waits for
    // this one), else as this one's blocks end.
    if (args.trigger == MatvecTrigger::AtStart) pdl_trigger();
    bool waited = false;
    if (args.ids) {  // a routed expert's slot: the ids come from an earlier kernel
        pdl_wait();
        waited = true;
        const int slot = int(blockIdx.y);
        const size_t e = size_t(args.ids[slot]);
        wbase += e * args.expert_stride;
        wbase2 += e * args.expert_stride2;
        const int64_t eb = args.bias_ids ? int64_t(args.bias_ids[slot]) : int64_t(e);
        if (bias) bias += eb * args.bias_expert_stride;
        if (bias2) bias2 += eb * args.bias_expert_stride2;
        y += slot * args.y_slot_stride;
        if (args.act_per_slot) {
            act.codes += slot * act.cols;
            act.ds += slot * (act.cols / 32);
            act.d += slot * (act.cols / 256);
            act.bsums += slot * (act.cols / 16);
        }
    }
    for (int64_t row0 = warp * kRowsPerWarp; row0 < args.rows; row0 += nwarps * kRowsPerWarp) {
        const uint8_t* rp[R];
        if constexpr (kSwiGlu) {
            rp[0] = wbase + size_t(row0) * args.stride;
            rp[1] = wbase2 + size_t(row0) * args.stride2;
        } else {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int64_t row = row0 + r < args.rows ? row0 + r : args.rows - 1;
                rp[r] = row_at(args, wbase, y, bias, row).w;
            }
        }
        float acc[R][NT];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

        for (int64_t ib0 = lane / kLanes; ib0 < nb; ib0 += kBlocksPerPass * kUnroll) {
            typename F::W w[kUnroll][R];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t ib = ib0 + u * kBlocksPerPass;
                if (ib < nb) {
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        F::template load<A16>(rp[r] + ib * F::kBlockBytes, sub, w[u][r]);
                }
            }
            if (!waited) {  // the weights are in flight; now the activations
                pdl_wait();
                waited = true;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t ib = ib0 + u * kBlocksPerPass;
                if (ib < nb) {
#pragma unroll
                    for (int t = 0; t < NT; ++t) {
                        typename F::A x;
                        F::load_act(act, t, ib, sub, x);
#pragma unroll
                        for (int r = 0; r < R; ++r) acc[r][t] += F::dot(w[u][r], x, sub);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int t = 0; t < NT; ++t)
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], o);
        if constexpr (kSwiGlu) {
            if (lane == 0) {
                const float bg = bias ? bias[row0] : 0.0f, bu = bias2 ? bias2[row0] : 0.0f;
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    // (a product without a bias keeps its bits: no + 0)
                    const float g = bias ? acc[0][t] + bg : acc[0][t];
                    const float u = bias2 ? acc[1][t] + bu : acc[1][t];
                    y[t * args.rows + row0] = glu_value(args.glu, g, u);
                }
            }
        } else if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (row0 + r >= args.rows) continue;
                const RowAt at = row_at(args, wbase, y, bias, row0 + r);
                const float b = at.bias ? *at.bias : 0.0f;
#pragma unroll
                for (int t = 0; t < NT; ++t) at.y[t * at.rows] = acc[r][t] + b;
            }
        }
    }
    // A thread with no rows still ends after the kernel ahead (pdl.cuh: a kernel behind that
    // waits for this one waits for everything before it).
    if (!waited) pdl_wait();
}

// ---- the launch ---------------------------------------------------------------------------------

// Blocks that fit on the device at once for this kernel (probed once per instantiation, on the
// device current at the first launch: the machines this runs on have one kind of GPU).
template <class F, int NT, int R, bool A16, bool kSwiGlu>
int resident_blocks() {
    static const int blocks = [] {
        int dev = 0, sms = 0, per_sm = 0;
        STRATA_CUDA(cudaGetDevice(&dev));
        STRATA_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        STRATA_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, matvec_q8_kernel<F, NT, R, A16, kSwiGlu>, kThreads, 0));
        return sms * (per_sm > 0 ? per_sm : 1);
    }();
    return blocks;
}

template <class F, int NT, int R, bool A16, bool kSwiGlu = false>
void launch_instance(const Args& args, cudaStream_t stream, Pdl pdl) {
    constexpr int kRowsPerWarp = kSwiGlu ? 1 : R;
    const int64_t warps = (args.rows + kRowsPerWarp - 1) / kRowsPerWarp;
    const int64_t wanted = (warps + kThreads / 32 - 1) / (kThreads / 32);
    const int slots = args.ids ? args.slots : 1;
    const int fit = std::max(1, resident_blocks<F, NT, R, A16, kSwiGlu>() / slots);
    const int grid = int(std::min<int64_t>(wanted, fit));
    Args a = args;
    a.trigger = matvec_trigger(pdl);
    launch_pdl(pdl, matvec_q8_kernel<F, NT, R, A16, kSwiGlu>, dim3(unsigned(grid), unsigned(slots)),
               dim3(kThreads), 0, stream, a);
}

// One format's launch: picks the instance for n tokens (R = 2 rows per warp)
// and the aligned loads when every block of every row is 16-byte aligned.
template <class F>
void launch_format(const Args& args, int n, cudaStream_t stream, const Tuning& tuning) {
    const Pdl pdl = tuning.pdl;
    bool a16 = false;
    if constexpr (F::kBlockBytes % 16 == 0) {
        a16 = reinterpret_cast<uintptr_t>(args.w) % 16 == 0 && args.stride % 16 == 0 &&
              args.expert_stride % 16 == 0;
        for (int p = 0; p < args.n_parts; ++p) {
            a16 = a16 && reinterpret_cast<uintptr_t>(args.parts[p].w) % 16 == 0 &&
                  args.parts[p].stride % 16 == 0;
        }
    }
    if (args.w2) {  // a SwiGLU pair, one token (launch_swiglu_q8's precondition)
        if constexpr (F::kBlockBytes % 16 == 0) {
            if (a16 && reinterpret_cast<uintptr_t>(args.w2) % 16 == 0 && args.stride2 % 16 == 0 &&
                args.expert_stride2 % 16 == 0) {
                return launch_instance<F, 1, 2, true, true>(args, stream, pdl);
            }
        }
        return launch_instance<F, 1, 2, false, true>(args, stream, pdl);
    }
    const auto go = [&]<int NT, int R>() {
        if constexpr (F::kBlockBytes % 16 == 0) {
            if (a16) return launch_instance<F, NT, R, true>(args, stream, pdl);
        }
        launch_instance<F, NT, R, false>(args, stream, pdl);
    };
    // Two rows per warp at one token too: each warp's loads in flight double, which a matrix of
    // 4096 columns (one 2.3 KB row of Q4_K per warp and pass) needs to keep HBM busy (8B
    // Q4_K_M decode on an H200: 334 tok/s against 317 with one row). Tuning::q8_rows_per_warp 1
    // takes one row, for comparisons.
    switch (n) {
        case 1:
            if (tuning.q8_rows_per_warp != 1) {
                go.template operator()<1, 2>();
            } else {
                go.template operator()<1, 1>();
            }
            break;
        case 2:
            go.template operator()<2, 2>();
            break;
        case 3:
            go.template operator()<3, 2>();
            break;
        default:
            go.template operator()<4, 2>();
            break;
    }
}

// The launchers of the two format families (matvec_q8_k.cu, matvec_q8_32.cu): the matvec of
// weights of type t on activations already quantized into args.act.
void launch_k(TensorType t, const Args& args, int n, cudaStream_t stream, const Tuning& tuning);
void launch_32(TensorType t, const Args& args, int n, cudaStream_t stream, const Tuning& tuning);

}  // namespace strata::cuda::q8k
