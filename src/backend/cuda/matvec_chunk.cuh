// The arithmetic of the decode matvec (matvec_kernels.cuh) on one staged chunk of a weight row,
// written for the GPU and the host alike so that tests can run it lane by lane on the CPU:
//
//   a row is cut into chunks of 2048 elements (64 blocks of 32, 8 super-blocks of 256, 2 KiB of
//   a float format); a warp stages a chunk's bytes in shared memory, then each of its 32 lanes
//   takes units lane, lane + 32, ... of the chunk (and the affine formats' minimum terms the same
//   way), so consecutive lanes read consecutive activations;
//   chunk_dot adds a lane's share of the chunk to its n partial sums; the warp then sums lanes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/formats_all.cuh"

namespace strata::cuda {

// Elements of a chunk: every format's chunk is a whole number of 16-byte words
// (64 * any 32-element block size, 8 * any even super-block size, 2048 bytes of floats).
template <class F>
constexpr int chunk_blocks() {
    return F::kFloat ? 2048 / F::kBlockBytes : 2048 / F::kBlockElems;
}
template <class F>
constexpr int chunk_bytes() {
    return chunk_blocks<F>() * F::kBlockBytes;
}

// ---- activations ------------------------------------------------------------------------------

// The activations of n tokens of `cols` elements as the CPU rounds them for the weight format
// (formats_activations.cuh), in device memory; matvec_kernels.cuh writes them once per call.
// Block formats:
//   q          n rows of q_stride int8 codes in the layout of formats.cuh (groups of 512
//              elements; q_stride = cols rounded up to 512);
//   step       n x (cols / F::kBlockElems): the block's d, x taken as step * q;
//   sums       (Q8_K) n x (cols / 16): the sum of q over each 16 consecutive elements;
//   q8_1_sums  (Q8_1) n x (cols / 32): the block's s = fp16(d * sum of q), as the CPU keeps it.
// F16 / BF16 weights: x, n rows of cols floats, each rounded to fp16 / bf16 (F32 weights read
// the activations as they are).
struct QuantizedActivations {
    int8_t* q = nullptr;
    float* step = nullptr;
    int* sums = nullptr;
    float* q8_1_sums = nullptr;
    float* x = nullptr;
    int q_stride = 0;
};

// The 16 activation codes of a unit at p (16-byte aligned) as four words.
STRATA_HD void load_unit_activations(const int8_t* p, uint32_t* q) {
#if defined(__CUDA_ARCH__)
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
    q[0] = a.x, q[1] = a.y, q[2] = a.z, q[3] = a.w;
#else
    std::memcpy(q, p, 4 * sizeof(uint32_t));
#endif
}

// Eight floats at p (16-byte aligned).
STRATA_HD void load_floats8(const float* p, float* out) {
#if defined(__CUDA_ARCH__)
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
#else
    std::memcpy(out, p, 8 * sizeof(float));
#endif
}

// ---- one chunk, one lane --------------------------------------------------------------------

// Block formats: blocks b0 .. b0 + nb - 1 of a row staged at `chunk` (16-byte aligned); a the
// activations of n <= N tokens of `cols` elements; acc[t] += lane's share of token t's dot.
// A chunk's units are whole activation groups (128 units: 2048 elements), so lane l takes unit
// l of each group, i.e. the same unit k of every (32 / units per block)-th block: its offsets
// in the block and in the group do not change from one step to the next.
template <class F, int N>
STRATA_HD void chunk_dot(const uint8_t* chunk, int b0, int nb, int lane,
                         const QuantizedActivations& a, int cols, int n, float (&acc)[N]) {
    constexpr int kUnitsPerBlock = F::kBlockElems / kUnitElems;  // 2 or 16
    constexpr int kBlocksPerStep = kGroupUnits / kUnitsPerBlock;
    constexpr int kAlign = alignment_at(16, F::kBlockBytes);  // of every block in the chunk
    static_assert(chunk_blocks<F>() % kBlocksPerStep == 0);
    const int k = lane % kUnitsPerBlock;
    const int blocks_per_row = cols / F::kBlockElems;
    // Group g of the chunk holds blocks g * kBlocksPerStep.. of it; the lane's 16 activation
    // codes in a group start at lane * 16.
    const int8_t* q0 = a.q + (size_t(b0) * F::kBlockElems + size_t(lane) * kUnitElems);
    for (int blk = lane / kUnitsPerBlock, g = 0; blk < nb; blk += kBlocksPerStep, ++g) {
        const typename F::Codes c = F::template unit<kAlign>(chunk + blk * F::kBlockBytes, k);
        STRATA_UNROLL
        for (int t = 0; t < N; ++t) {
            if (N == 1 || t < n) {
                uint32_t q[4];
                load_unit_activations(q0 + size_t(t) * a.q_stride + g * kGroupElems, q);
                const float step = load_ro(a.step + size_t(t) * blocks_per_row + b0 + blk);
                acc[t] += c.scale * step * float(unit_dot(c, q));
            }
        }
    }
    if constexpr (F::kExtraItems > 0) {
        const int items = nb * F::kExtraItems;
        for (int it = lane; it < items; it += 32) {
            const int blk = it / F::kExtraItems;
            const ExtraTerm e =
                F::template extra<kAlign>(chunk + blk * F::kBlockBytes, it % F::kExtraItems);
            STRATA_UNROLL
            for (int t = 0; t < N; ++t) {
                if (N == 1 || t < n) {
                    const size_t b = size_t(t) * blocks_per_row + b0 + blk;
                    if constexpr (activation_type(F::kType) == TensorType::Q8_1) {
                        acc[t] += e.scale * load_ro(a.q8_1_sums + b);  // m * s, as the CPU does
                    } else {
                        const int first = (b0 + blk) * F::kBlockElems;  // the block's first
                        const int* s = a.sums + size_t(t) * (cols / 16) + first / 16 + e.group;
                        const int sum = e.groups == 2 ? load_ro(s) + load_ro(s + 1) : load_ro(s);
                        acc[t] += e.scale * load_ro(a.step + b) * float(e.mult * sum);
                    }
                }
            }
        }
    }
}

// Float formats: elements e0 .. e0 + count - 1 of a row staged at `chunk` (16-byte aligned);
// x n tokens of `cols` floats as the CPU rounds them for F (QuantizedActivations::x for F16 /
// BF16), 16-byte aligned rows when x_aligned.
template <class F, int N>
STRATA_HD void chunk_dot_float(const uint8_t* chunk, int e0, int count, int lane, const float* x,
                               int cols, int n, bool x_aligned, float (&acc)[N]) {
    const int units = (count + 7) / 8;
    for (int u = lane; u < units; u += 32) {
        float w[8];
        F::unit8(chunk + 8 * u * F::kBlockBytes, w);  // past `count`: stale bytes, never used
        const int pos = e0 + 8 * u;
        const int valid = count - 8 * u < 8 ? count - 8 * u : 8;
        STRATA_UNROLL
        for (int t = 0; t < N; ++t) {
            if (N == 1 || t < n) {
                const float* xt = x + size_t(t) * cols + pos;
                float s = 0;
                if (valid == 8 && x_aligned) {
                    float v[8];
                    load_floats8(xt, v);
                    STRATA_UNROLL
                    for (int i = 0; i < 8; ++i) s += w[i] * v[i];
                } else {
                    for (int i = 0; i < valid; ++i) s += w[i] * load_ro(xt + i);
                }
                acc[t] += s;
            }
        }
    }
}

}  // namespace strata::cuda
