// Backend::ungroup_columns on the CPU backend against the scalar reference
// (ungroup_columns_reference.h) on fresh random rows: qwen3next's fused delta-net projections,
// ssm_in's q/k/v/z and ssm_ba's beta/alpha per key head, into Mixed, Gate, Beta and Alpha, for a
// prompt's rows and a decode step's one; and parts that leave columns of their destinations as
// they were.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/rope.h"
#include "model/tensor_layout.h"
#include "synth/synth_config.h"
#include "ungroup_columns_reference.h"

namespace strata {
namespace {

TEST(CpuUngroupColumns, MatchesTheScalarReference) {
    ModelHparams hp = with_layout_defaults(*synth_preset("tiny-qwen3next"));
    hp.n_vocab = 256;
    ASSERT_TRUE(hp.ssm_grouped_heads && hp.ssm_fused_qkvz);
    BackendConfig c;
    c.hp = hp;
    auto rope = make_rope_config(hp, nullptr);
    ASSERT_TRUE(rope) << rope.error().message;
    c.rope = *rope;
    c.n_ctx = 64;
    c.max_batch = 16;
    c.threads = 2;
    auto made = make_cpu_backend(c);
    ASSERT_TRUE(made) << made.error().message;
    Backend& cpu = **made;

    const int64_t groups = hp.ssm_n_group;
    for (int64_t n : {13, 1}) {
        SCOPED_TRACE(n);
        test::expect_ungroups_like_the_reference(cpu, groups, test::qkvz_column_parts(hp), n, 1);
        test::expect_ungroups_like_the_reference(cpu, groups, test::beta_alpha_column_parts(hp), n,
                                                 2);
        // Three groups of a part that fills columns 5.. of Mixed's rows, and one of a column
        // each at 1.. of Beta's: the rest keep what they held.
        const ColumnPart sparse[] = {{Act::Mixed, 7, 5, 512}, {Act::Beta, 1, 1, 4}};
        test::expect_ungroups_like_the_reference(cpu, 3, sparse, n, 3);
    }
}

}  // namespace
}  // namespace strata
