// What the K-quant encoders share between the scalar reference (k_quants.cpp) and the
// lane-parallel fast path (fast_quantize.h): a super-block's chosen scales and codes, the fp16
// super-block scale, and how each block layout stores them. Only the search that fills a
// super-block differs between the two, so the stored bytes cannot drift apart in the packing.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace strata::quant::kq {

// fp16 bits of the super-block scale d = largest / end, where `end` is the multiplier the
// largest sub-block scale should get (k_quants.cpp says how it rounds).
uint16_t super_block_scale(float largest, float end);

// An affine super-block (Q2_K: 16 x 16, 4-bit multipliers; Q4_K / Q5_K: 8 x 32, 6-bit) as it is
// stored: fp16 d and dmin, each sub-block's multipliers, and codes[e] in [0, nmax] in element
// order.
struct AffineSuperBlock {
    uint16_t d = 0, dmin = 0;
    uint8_t scale_mult[16] = {};
    uint8_t min_mult[16] = {};
    uint8_t codes[kQK_K] = {};
};

// A symmetric super-block of 16 sub-blocks of 16 (Q3_K, Q6_K): fp16 d, each sub-block's signed
// multiplier, and codes[e] + qneg in [0, qneg + qpos] in element order.
struct SymmetricSuperBlock {
    uint16_t d = 0;
    int mult[16] = {};
    uint8_t codes[kQK_K] = {};
};

void store_q2_k(const AffineSuperBlock& b, BlockQ2_K& y);
void store_q3_k(const SymmetricSuperBlock& b, BlockQ3_K& y);
void store_q4_k(const AffineSuperBlock& b, BlockQ4_K& y);
void store_q5_k(const AffineSuperBlock& b, BlockQ5_K& y);
void store_q6_k(const SymmetricSuperBlock& b, BlockQ6_K& y);

}  // namespace strata::quant::kq
