// Scale searches for the K-quant encoders (k_quants.cpp): given a sub-block of weights, find the
// scale (and minimum) whose rounded codes reproduce it with the least squared error, then the
// small integer multipliers of the super-block scales that store them best.
//
// The method: try a grid of candidate scales around "largest value on the last code", give every
// element its nearest code, refit the scale (and minimum) to those codes by least squares, and
// keep the candidate with the smallest error; then alternate code assignment and refit until the
// error stops falling. Errors are unweighted: the encoders minimise plain squared error.
#pragma once

#include <cstdint>

namespace strata::quant::search {

// Candidate grid of fit_affine / fit_symmetric: the largest value is put on code
// (last code + kGridStep * k), k = kGridLow..kGridHigh; then up to kRefineRounds rounds of
// "assign nearest codes, refit".
inline constexpr float kGridStep = 0.1f;
inline constexpr int kGridLow = -10, kGridHigh = 10;
inline constexpr int kRefineRounds = 4;

// x ~ scale * q - min with integer q in [0, nmax], scale >= 0 and min >= 0 (the K-quant formats
// store the minimum as an unsigned multiple of a positive dmin, so the offset is never > 0).
struct AffineFit {
    float scale = 0;
    float min = 0;
};
AffineFit fit_affine(const float* x, int n, int nmax);

// x ~ scale * q with integer q in [-qneg, qpos]; the scale may be negative (its sign decides
// which end of the asymmetric range the largest value takes).
float fit_symmetric(const float* x, int n, int qneg, int qpos);

// Nearest codes for a stored scale (and minimum): clamp(round((x + min) / scale), 0, nmax) and
// clamp(round(x / scale), -qneg, qpos); 0 when the scale is 0.
int affine_code(float x, int nmax, float scale, float min);
int symmetric_code(float x, int qneg, int qpos, float scale);

// Squared error of x against its nearest codes of scale * q - min (resp. scale * q), evaluated
// in float the way the dequantizers compute values.
double affine_error(const float* x, int n, int nmax, float scale, float min);
double symmetric_error(const float* x, int n, int qneg, int qpos, float scale);

// The two stored multipliers nearest a scale: floor(target / unit) and the next integer, both
// clamped to [lo, hi]; both the clamped 0 when unit is 0 or the quotient is not finite.
struct Neighbours {
    int down, up;
};
Neighbours multiplier_neighbours(float target, float unit, int lo, int hi);

// The stored form of an affine fit: scale = d * scale_mult, min = dmin * min_mult, multipliers in
// [0, max_mult]. Of the floor/ceil neighbours of fit.scale / d and fit.min / dmin, the pair with
// the smallest sub-block error.
struct AffineMultipliers {
    int scale_mult = 0;
    int min_mult = 0;
};
AffineMultipliers best_affine_multipliers(const float* x, int n, int nmax, AffineFit fit, float d,
                                          float dmin, int max_mult);

// The stored form of a symmetric scale: scale = d * mult, mult in [lo, hi], the floor/ceil
// neighbour of scale / d with the smaller sub-block error.
int best_symmetric_multiplier(const float* x, int n, int qneg, int qpos, float scale, float d,
                              int lo, int hi);

}  // namespace strata::quant::search
