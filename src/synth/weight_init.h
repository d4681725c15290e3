// Seeded synthetic weights: what distribution each tensor is drawn from, and a counter-based
// generator that makes every value a pure function of (seed, tensor name, element index). Any
// split of the work into chunks and threads therefore gives the same bytes, and a tensor's
// values do not depend on which other tensors the model has.
//
// Scales follow the recipe of the golden synthetic models (testdata README, "Weights"): the
// model stays numerically tame and its logits peaked, without training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/hparams.h"
#include "model/tensor_layout.h"

namespace strata {

enum class InitKind : uint8_t {
    Normal,           // N(0, sigma^2)
    Uniform,          // U(lo, hi)
    RowScaledNormal,  // row r ~ N(0, (sigma * exp(row_log_sigma * z_r))^2), z_r ~ N(0, 1)
};

struct WeightInit {
    InitKind kind = InitKind::Normal;
    float sigma = 0.0f;
    float lo = 0.0f, hi = 0.0f;
    float row_log_sigma = 0.0f;
};

// The distribution of one tensor of a model (hp with with_layout_defaults() applied):
//   norms U(0.6, 1.4); output_norm the same times 4.5 * d * sqrt(256 / n_embd);
//   token_embd / output rows N(0.1 / d) times exp(0.5 z) per row (d = 6 when tied, else 1:
//   a tied embedding is shrunk so a token's own embedding does not dominate its logits);
//   projections N(gain / sqrt(row_length)) with gains q, k 1.28; v 0.96; attn_output 0.80;
//   gate, up 0.96; down 1.39; router 3.0; shared-expert gate 1.0; biases N(0.1).
WeightInit weight_init(const TensorSpec& spec, const ModelHparams& hp);

// splitmix64's output function: a bijective 64-bit mix with good avalanche.
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// The key of a tensor's value stream: a hash of the seed and the tensor name.
uint64_t tensor_stream_key(uint64_t seed, std::string_view tensor_name);

// Writes elements [first, first + n) of a tensor (row-major, rows of row_length) into out.
void generate_values(const WeightInit& init, uint64_t key, uint64_t first, size_t n,
                     uint64_t row_length, float* out);

}  // namespace strata
