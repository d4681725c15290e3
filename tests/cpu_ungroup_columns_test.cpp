// Backend::ungroup_columns on the CPU backend against the scalar reference
// (ungroup_columns_reference.h) on fresh random rows: qwen3next's fused delta-net projections,
// ssm_in's q/k/v/z and ssm_ba's beta/alpha per key head, into Mixed, Gate, Beta and Alpha, for a
// prompt's rows and a decode step's one; and parts that leave columns of their destinations as
// they were.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "ungroup_columns_reference.h"

namespace strata {
namespace {

TEST(CpuUngroupColumns, MatchesTheScalarReference) {
    const ModelHparams hp = test::ungroup_test_hparams();
    ASSERT_TRUE(hp.ssm_grouped_heads && hp.ssm_fused_qkvz);
    auto made = make_cpu_backend(test::ungroup_test_config(hp));
    ASSERT_TRUE(made) << made.error().message;
    test::expect_ungroups_every_layout(**made, hp);
}

}  // namespace
}  // namespace strata
