// Picks the next token from a model's logits. The chain and the meaning of every parameter follow
// llama.cpp's default sampler chain, so that settings people know from it behave the same here:
//
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw from the softmax
//
// top-p and min-p therefore look at probabilities at temperature 1 (temperature comes after
// them), and a temperature <= 0 means greedy: the best token after the penalties, which the
// filters in between never remove. The draw itself is not bit-compatible with llama.cpp's (the
// candidates are visited in a different order), only equal in distribution.
//
// Logits must not contain NaN or +inf. -inf is allowed and means the token can never be picked
// (unless every logit is -inf, when the lowest id is returned so that the caller still gets a
// token).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "session/sampler_filters.h"
#include "util/result.h"

namespace strata {

// The seed that asks for a random one (llama.cpp's LLAMA_DEFAULT_SEED, the same value): the
// generator is then seeded from std::random_device, so runs differ.
inline constexpr uint64_t kRandomSeed = 0xFFFFFFFF;

struct SamplerParams {
    float temperature = 0.8f;  // <= 0: greedy (argmax, lowest id on ties)
    int32_t top_k = 40;        // <= 0: off
    float top_p = 0.95f;       // >= 1: off
    float min_p = 0.05f;       // <= 0: off
    // Penalties on the tokens of the last penalty_last_n tokens of the history:
    float repeat_penalty = 1.0f;     // 1: off; positive logits divided by it, negative multiplied
    float presence_penalty = 0.0f;   // subtracted once from a token that occurs in the window
    float frequency_penalty = 0.0f;  // subtracted once per occurrence
    int32_t penalty_last_n = 64;     // window size; 0: penalties off, -1: the whole history
    uint64_t seed = kRandomSeed;     // any other value makes the draws reproducible
};

// Checks the ranges: temperature >= 0, top_p in (0, 1], min_p in [0, 1], repeat_penalty > 0,
// all finite, penalty_last_n >= -1. The error names the field.
Result<void> validate(const SamplerParams& p);

class Sampler {
  public:
    // `p` should pass validate(), which is for checking user input; the sampler does not check
    // again, and follows the field comments for values outside those ranges where they say
    // something (a temperature below 0 is greedy, like 0).
    explicit Sampler(const SamplerParams& p);

    // Picks the next token from raw logits (one per vocabulary entry; used as scratch, so their
    // values afterwards are unspecified). `history` is every token of the context so far, prompt
    // and generated; the penalties use its last penalty_last_n. Ids in it that are outside the
    // vocabulary are ignored.
    int32_t sample(std::span<float> logits, std::span<const int32_t> history);

    const SamplerParams& params() const { return params_; }
    // Restarts the random sequence: a fixed seed repeats the draws of a fresh Sampler with it.
    void reseed(uint64_t seed);
    // The seed the generator got, the random one when params().seed is kRandomSeed: logging it
    // lets a run be repeated.
    uint64_t seed_used() const { return seed_used_; }

  private:
    int32_t draw();
    double uniform01();

    SamplerParams params_;
    // std::mt19937_64 because its output is fixed by the standard for a given seed (distribution
    // classes are not, so uniform01() does its own conversion): a seed gives the same tokens with
    // any compiler and standard library.
    std::mt19937_64 rng_;
    uint64_t seed_used_ = 0;
    // Scratch kept between calls so that sampling does not allocate per token.
    std::vector<Candidate> cands_;
    std::vector<double> weights_;
    std::vector<int32_t> penalty_counts_;
};

}  // namespace strata
