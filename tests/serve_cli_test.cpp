// strata serve's command line: the context each model is served with (by default its trained
// length as far as the budget allows; --ctx, the context flag of every other command, sizes it
// like --context, and the two may not disagree).
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

// The line serve prints for the model (with its served context), after running it a moment.
std::string served_line(const std::string& args) {
    const auto r = test::run_command(
        "STRATA_CACHE_DIR=" + test::shell_quote(test::test_cache_dir()) + " timeout 5 " +
        test::shell_quote(test::strata_binary()) + " serve " + args + " --port 0");
    const size_t at = r.err.find("strata: serving ");
    return at == std::string::npos ? r.err : r.err.substr(at, r.err.find('\n', at) - at);
}

TEST(ServeCli, ServesTheTrainedContextUnlessTold) {
    test::TempDir dir;
    const std::string model = dir.file("long.gguf");
    const auto made = test::run_strata("synth --preset tiny --type F16 --ctx 32768 -o " +
                                       test::shell_quote(model));
    ASSERT_EQ(made.exit_code, 0) << made.err;
    const std::string trained = served_line(test::shell_quote(model));
    EXPECT_NE(trained.find("(context 32768,"), std::string::npos) << trained;
    const std::string told = served_line(test::shell_quote(model) + " --context 2048");
    EXPECT_NE(told.find("(context 2048,"), std::string::npos) << told;
}

TEST(ServeCli, PrintsTheChatPageUrl) {
    const std::string model = test::shell_quote(test::synth_test_model("tiny", TensorType::F16));
    const auto r = test::run_command(
        "STRATA_CACHE_DIR=" + test::shell_quote(test::test_cache_dir()) + " timeout 5 " +
        test::shell_quote(test::strata_binary()) + " serve " + model + " --port 0");
    const std::string listening = "strata: listening on http://127.0.0.1:";
    const size_t at = r.err.find(listening);
    ASSERT_NE(at, std::string::npos) << r.err;
    const size_t from = at + listening.size();
    const std::string port = r.err.substr(from, r.err.find('\n', from) - from);
    EXPECT_NE(r.err.find("strata: chat in a browser at http://127.0.0.1:" + port + "/ui/\n"),
              std::string::npos)
        << r.err;
}

}  // namespace
}  // namespace strata
