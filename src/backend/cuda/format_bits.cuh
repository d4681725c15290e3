// Bit fields of the weight formats that several kernel families decode the same way (the exact
// decoders of formats_*.cuh, the int8 matvec of matvec_q8_formats_*.cuh, the int8 GEMM of
// mmq_formats.cuh), written once, for the GPU and the host.
#pragma once

#include <cstdint>

#include "backend/cuda/device_common.cuh"

namespace strata::cuda {

// Q5_0 / Q5_1: the fifth bits of the four codes from element `first` on (bits first ..
// first + 3 of qh: bit e is element e's), as bit 4 of each code byte.
STRATA_HD uint32_t q5_fifth(uint32_t qh, int first) {
    return spread_bits4((qh >> first) & 0x0f) << 4;
}

// Q4_K / Q5_K: sub-block j's 6-bit scale and minimum from the 12 packed scale bytes as three
// little-endian words s0..s2 (quant::k4_scale_min).
STRATA_HD void k4_scale_min(uint32_t s0, uint32_t s1, uint32_t s2, int j, int& sc, int& m) {
    const int sh = 8 * (j & 3);
    if (j < 4) {
        sc = int((s0 >> sh) & 63);
        m = int((s1 >> sh) & 63);
    } else {
        const uint32_t b = (s2 >> sh) & 0xff;
        sc = int((b & 0x0f) | (((s0 >> sh) >> 6 & 3) << 4));
        m = int((b >> 4) | (((s1 >> sh) >> 6 & 3) << 4));
    }
}

}  // namespace strata::cuda
