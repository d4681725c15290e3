// Backend::ungroup_columns against a scalar reference, for any backend (the CPU's test and the
// CUDA one's share it): the parts' destinations are filled with a sentinel, fresh random rows are
// ungrouped, and every destination row must be the reference's, value for value (the operation
// only moves values), sentinels included where no part writes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/hparams.h"
#include "model/rope.h"
#include "model/tensor_layout.h"
#include "synth/synth_config.h"

namespace strata::test {

inline constexpr float kUngroupSentinel = -12345.0f;

// The parts of qwen3next's ssm_in (q, k, v, z of each key head) and ssm_ba (beta, alpha), as
// the delta-net block gives them.
inline std::vector<ColumnPart> qkvz_column_parts(const ModelHparams& hp) {
    const int64_t S = hp.ssm_d_state, r = hp.ssm_dt_rank / hp.ssm_n_group;
    const int64_t key = int64_t(hp.ssm_key_dim()), channels = int64_t(hp.conv_channels());
    return {{Act::Mixed, S, 0, channels},
            {Act::Mixed, S, key, channels},
            {Act::Mixed, r * S, 2 * key, channels},
            {Act::Gate, r * S, 0, int64_t(hp.ssm_value_dim())}};
}
inline std::vector<ColumnPart> beta_alpha_column_parts(const ModelHparams& hp) {
    const int64_t heads = hp.ssm_dt_rank, r = heads / hp.ssm_n_group;
    return {{Act::Beta, r, 0, heads}, {Act::Alpha, r, 0, heads}};
}

// Ungroups n random rows of `groups` groups on `b` and compares each destination with the
// reference. Every part's destination must take n rows of its to_cols, as must Act::Fused the
// rows.
inline void expect_ungroups_like_the_reference(Backend& b, int64_t groups,
                                               std::span<const ColumnPart> parts, int64_t n,
                                               uint32_t seed) {
    int64_t group_cols = 0;
    for (const ColumnPart& p : parts) group_cols += p.width;
    const int64_t row = groups * group_cols;
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> from(size_t(n * row));
    for (float& x : from) x = nd(rng);

    // The reference, per destination activation (several parts may share one).
    std::vector<std::vector<float>> want(size_t(Act::Count));
    std::vector<int64_t> cols(size_t(Act::Count), 0);
    for (const ColumnPart& p : parts) {
        want[size_t(p.to)].assign(size_t(n * p.to_cols), kUngroupSentinel);
        cols[size_t(p.to)] = p.to_cols;
    }
    for (int64_t t = 0; t < n; ++t) {
        int64_t c = t * row;
        for (int64_t g = 0; g < groups; ++g) {
            for (const ColumnPart& p : parts) {
                for (int64_t i = 0; i < p.width; ++i) {
                    want[size_t(p.to)][size_t(t * p.to_cols + p.to_col + g * p.width + i)] =
                        from[size_t(c++)];
                }
            }
        }
    }

    for (size_t a = 0; a < want.size(); ++a) {
        if (cols[a] == 0) continue;
        const std::vector<float> sentinel(size_t(n * cols[a]), kUngroupSentinel);
        b.write_act(Act(a), sentinel.data(), n, cols[a]);
    }
    b.write_act(Act::Fused, from.data(), n, row);
    b.ungroup_columns(Act::Fused, groups, parts, n);
    for (size_t a = 0; a < want.size(); ++a) {
        if (cols[a] == 0) continue;
        std::vector<float> got(want[a].size());
        b.read_act(Act(a), got.data(), n, cols[a]);
        int64_t wrong = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            if (got[i] != want[a][i]) ++wrong;
        }
        EXPECT_EQ(wrong, 0) << "values of " << act_name(Act(a)) << " (" << n << " rows of "
                            << cols[a] << ") not where the reference puts them";
    }
}

// tiny-qwen3next's hyper-parameters and a backend configuration small enough for the checks.
inline ModelHparams ungroup_test_hparams() {
    ModelHparams hp = with_layout_defaults(*synth_preset("tiny-qwen3next"));
    hp.n_vocab = 256;
    return hp;
}

inline BackendConfig ungroup_test_config(const ModelHparams& hp) {
    BackendConfig c;
    c.hp = hp;
    auto rope = make_rope_config(hp, nullptr);
    EXPECT_TRUE(rope) << rope.error().message;
    if (rope) c.rope = *rope;
    c.n_ctx = 64;
    c.max_batch = 16;
    c.threads = 2;
    return c;
}

// Every layout on a backend, for a prompt's rows and a decode step's one: ssm_in's q/k/v/z and
// ssm_ba's beta/alpha per key head, and parts that leave columns of their destinations as they
// were (three groups of a part filling columns 5.. of Mixed's rows and one of a column each at
// 1.. of Beta's).
inline void expect_ungroups_every_layout(Backend& b, const ModelHparams& hp) {
    const int64_t groups = hp.ssm_n_group;
    for (int64_t n : {13, 1}) {
        SCOPED_TRACE(n);
        expect_ungroups_like_the_reference(b, groups, qkvz_column_parts(hp), n, 1);
        expect_ungroups_like_the_reference(b, groups, beta_alpha_column_parts(hp), n, 2);
        const ColumnPart sparse[] = {{Act::Mixed, 7, 5, 512}, {Act::Beta, 1, 1, 4}};
        expect_ungroups_like_the_reference(b, 3, sparse, n, 3);
    }
}

}  // namespace strata::test
