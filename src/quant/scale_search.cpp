#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/reference.h"

// No fused multiply-add contraction: the K-quant encoders then give the same bytes whatever
// -march the build targets, so synthetic models are reproducible across machines.
#include "quant/strict_fp.h"

namespace strata::quant::search {

namespace {

// Sums over a sub-block that do not depend on the codes.
struct DataSums {
    double n = 0, x = 0, xx = 0;
};
DataSums data_sums(const float* x, int n) {
    DataSums s;
    s.n = n;
    for (int i = 0; i < n; ++i) {
        s.x += x[i];
        s.xx += double(x[i]) * x[i];
    }
    return s;
}

// Sums that depend on the codes q.
struct CodeSums {
    double q = 0, qq = 0, qx = 0;
    void add(int code, float x) {
        q += code;
        qq += double(code) * code;
        qx += double(code) * x;
    }
};

// Least-squares (scale, min) for fixed codes, min >= 0 (offset <= 0), and the squared error of
// that fit with those codes, in closed form. False when the codes fix no positive scale.
bool refit_affine(const DataSums& d, const CodeSums& c, AffineFit* fit, double* err) {
    double scale = 0, offset = 1;
    const double det = d.n * c.qq - c.q * c.q;
    if (det > 0) {
        scale = (d.n * c.qx - c.q * d.x) / det;
        offset = (c.qq * d.x - c.q * c.qx) / det;
    }
    if (offset > 0) {  // the format cannot add a positive offset: fit through the origin
        if (c.qq == 0) return false;
        offset = 0;
        scale = c.qx / c.qq;
    }
    if (!(scale > 0)) return false;
    // sum (scale q + offset - x)^2 expanded over the sums.
    *err = scale * scale * c.qq + 2 * scale * offset * c.q + d.n * offset * offset -
           2 * scale * c.qx - 2 * offset * d.x + d.xx;
    fit->scale = float(scale);
    fit->min = float(-offset);
    return true;
}

// Nearest code of v (already divided by the scale) in [lo, hi].
int clamp_round(float v, int lo, int hi) {
    if (!(v > float(lo))) return lo;
    if (v >= float(hi)) return hi;
    return ref::round_nearest_even(v);
}

}  // namespace

int affine_code(float x, int nmax, float scale, float min) {
    if (!(scale > 0)) return 0;
    return clamp_round((x + min) / scale, 0, nmax);
}

int symmetric_code(float x, int qneg, int qpos, float scale) {
    if (scale == 0) return 0;
    return clamp_round(x / scale, -qneg, qpos);
}

double affine_error(const float* x, int n, int nmax, float scale, float min) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        const float value = scale * float(affine_code(x[i], nmax, scale, min)) - min;
        err += double(value - x[i]) * double(value - x[i]);
    }
    return err;
}

double symmetric_error(const float* x, int n, int qneg, int qpos, float scale) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        const float value = scale * float(symmetric_code(x[i], qneg, qpos, scale));
        err += double(value - x[i]) * double(value - x[i]);
    }
    return err;
}

AffineFit fit_affine(const float* x, int n, int nmax) {
    float lo = 0, hi = -std::numeric_limits<float>::max();
    for (int i = 0; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (!(hi > lo)) return {0, -lo};  // every value equals lo <= 0 (all zero included)

    const DataSums data = data_sums(x, n);
    AffineFit best{(hi - lo) / float(nmax), -lo};
    double best_err = affine_error(x, n, nmax, best.scale, best.min);
    for (int k = kGridLow; k <= kGridHigh; ++k) {
        const float iscale = (float(nmax) + kGridStep * float(k)) / (hi - lo);
        if (!(iscale > 0)) continue;
        CodeSums codes;
        for (int i = 0; i < n; ++i) codes.add(clamp_round((x[i] - lo) * iscale, 0, nmax), x[i]);
        AffineFit f;
        double err;
        if (refit_affine(data, codes, &f, &err) && err < best_err) {
            best = f;
            best_err = err;
        }
    }
    for (int round = 0; round < kRefineRounds; ++round) {
        CodeSums codes;
        for (int i = 0; i < n; ++i) codes.add(affine_code(x[i], nmax, best.scale, best.min), x[i]);
        AffineFit f;
        double err;
        if (!refit_affine(data, codes, &f, &err) || !(err < best_err)) break;
        best = f;
        best_err = err;
    }
    return best;
}

float fit_symmetric(const float* x, int n, int qneg, int qpos) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            max = x[i];
        }
    }
    if (amax == 0) return 0;
    const double sum_xx = data_sums(x, n).xx;

    // Least-squares scale for the codes that inverse scale `iscale` assigns, and its squared
    // error with those codes (sum x^2 - (sum q x)^2 / sum q^2). False if every code is 0.
    auto refit = [&](float iscale, float* scale, double* err) {
        CodeSums c;
        for (int i = 0; i < n; ++i) c.add(clamp_round(x[i] * iscale, -qneg, qpos), x[i]);
        if (c.qq == 0 || c.qx == 0) return false;
        *scale = float(c.qx / c.qq);
        *err = sum_xx - c.qx * c.qx / c.qq;
        return true;
    };

    float best = max / float(-qneg);
    double best_err = symmetric_error(x, n, qneg, qpos, best);
    for (int end : {-qneg, qpos}) {  // the largest value on the negative or the positive end
        for (int k = kGridLow; k <= kGridHigh; ++k) {
            const float target =
                end < 0 ? float(end) - kGridStep * float(k) : float(end) + kGridStep * float(k);
            if (std::fabs(target) < 0.5f) continue;
            float s;
            double err;
            if (refit(target / max, &s, &err) && err < best_err) {
                best = s;
                best_err = err;
            }
        }
    }
    for (int round = 0; round < kRefineRounds; ++round) {
        float s;
        double err;
        if (!refit(1.0f / best, &s, &err) || !(err < best_err)) break;
        best = s;
        best_err = err;
    }
    return best;
}

Neighbours multiplier_neighbours(float target, float unit, int lo, int hi) {
    if (unit == 0 || !std::isfinite(target / unit)) {
        const int z = std::clamp(0, lo, hi);
        return {z, z};
    }
    const float f = std::floor(target / unit);
    const int down = f <= float(lo) ? lo : (f >= float(hi) ? hi : int(f));
    return {down, std::min(down + 1, hi)};
}

AffineMultipliers best_affine_multipliers(const float* x, int n, int nmax, AffineFit fit, float d,
                                          float dmin, int max_mult) {
    const Neighbours s = multiplier_neighbours(fit.scale, d, 0, max_mult);
    const Neighbours m = multiplier_neighbours(fit.min, dmin, 0, max_mult);
    const int scale_mults[2] = {s.down, s.up};
    const int min_mults[2] = {m.down, m.up};
    AffineMultipliers best{s.down, m.down};
    double best_err = std::numeric_limits<double>::infinity();
    for (int a = 0; a < (s.up != s.down ? 2 : 1); ++a) {
        for (int b = 0; b < (m.up != m.down ? 2 : 1); ++b) {
            const double err =
                affine_error(x, n, nmax, d * float(scale_mults[a]), dmin * float(min_mults[b]));
            if (err < best_err) {
                best = {scale_mults[a], min_mults[b]};
                best_err = err;
            }
        }
    }
    return best;
}

int best_symmetric_multiplier(const float* x, int n, int qneg, int qpos, float scale, float d,
                              int lo, int hi) {
    const Neighbours c = multiplier_neighbours(scale, d, lo, hi);
    if (c.down == c.up) return c.down;
    const double err_down = symmetric_error(x, n, qneg, qpos, d * float(c.down));
    const double err_up = symmetric_error(x, n, qneg, qpos, d * float(c.up));
    return err_up < err_down ? c.up : c.down;
}

}  // namespace strata::quant::search
