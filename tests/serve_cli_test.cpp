// strata serve's command line: --ctx (the context flag of every other command) sizes the served
// context like --context, and the two may not disagree.
#include <gtest/gtest.h>

#include <string>

#include "engine_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

TEST(ServeCli, CtxAndContextMustAgree) {
    const std::string model = test::shell_quote(test::synth_test_model("tiny", TensorType::F16));
    const auto r = test::run_strata("serve " + model + " --ctx 64 --context 128 --port 1");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--ctx 64 and --context 128 disagree"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata
