// The synthetic generator and the model validation were written from the same format rules but
// independently: every preset shape the generator writes must pass validation as a runnable model,
// with the hyper-parameters it was asked for.
#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "model/model_info.h"
#include "test_support.h"

namespace strata {
namespace {

struct PresetCase {
    const char* preset;
    const char* arch;
    bool moe;
};

class SynthPresetValidates : public ::testing::TestWithParam<PresetCase> {};

TEST_P(SynthPresetValidates, WrittenModelIsRunnable) {
    const PresetCase& c = GetParam();
    test::TempDir tmp;
    const std::string path = tmp.file("m.gguf");
    for (const char* type : {"F32", "F16", "BF16"}) {
        SCOPED_TRACE(type);
        auto r = test::run_strata(std::string("synth --force --preset ") + c.preset + " --type " +
                                  type + " -o " + test::shell_quote(path));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        auto file = read_gguf(path);
        ASSERT_TRUE(file.ok()) << file.error().message;
        auto info = load_model_info(std::move(file).value());
        ASSERT_TRUE(info.ok()) << info.error().message;
        ASSERT_TRUE(info->hparams.has_value());
        EXPECT_EQ(info->hparams->arch, c.arch);
        EXPECT_EQ(info->hparams->is_moe(), c.moe);
        EXPECT_GT(info->hparams->n_vocab, 258u);
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthPresetValidates,
                         ::testing::Values(PresetCase{"tiny", "llama", false},
                                           PresetCase{"tiny-moe", "llama", true},
                                           PresetCase{"tiny-qwen2", "qwen2", false},
                                           PresetCase{"tiny-qwen3", "qwen3", false},
                                           PresetCase{"tiny-qwen2moe", "qwen2moe", true},
                                           PresetCase{"tiny-qwen3moe", "qwen3moe", true},
                                           PresetCase{"tiny-glm4moe", "glm4moe", true}),
                         [](const auto& param_info) {
                             std::string n = param_info.param.preset;
                             for (char& ch : n) {
                                 if (ch == '-') ch = '_';
                             }
                             return n;
                         });

}  // namespace
}  // namespace strata
