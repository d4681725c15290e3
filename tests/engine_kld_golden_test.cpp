// Teacher-forced comparison with the reference engine: every golden model evaluates the tokens
// of its own .kld file (chunks from an empty cache, first token replaced by BOS) and its
// log-probabilities are compared position by position with the reference's; and perplexity over
// inputs/ppl_text.txt is computed with the same chunking as the golden run.
//
// Bounds, from the testdata README: float files must reach mean KL <= 1e-4 and top-1 >= 98%
// (BF16: 5e-3 and 95%). For quantized files the README measured an engine that keeps activations
// in float at mean KL 0.008-0.09 and top-1 88-100% on the dense files (llama-moe Q8_0 0.07 / 95%,
// Q4_K_M 1.0 / 87%), against 10-50 and <= 31% for a real bug; strata reproduces the reference's
// 8-bit activation rounding, so it must do at least as well as that float engine: mean KL <= 0.1
// and top-1 >= 88% (MoE Q4_K_M: 1.0 and 85%). ln(PPL) must be within 1% of the golden value.
// On a GPU the same bounds, but top-1 >= 82% on the quantized dense files: prompts there multiply
// in fp16 and sum in another order, and the reference's own CUDA backend, measured on an H100
// against these files, reaches 87.1% +- 4.3% (one standard error of 62 positions) on
// llama-dense-Q4_K_M (mean KL 0.236), 93.5% on llama-dense-Q8_0 (KL 0.0115) and 79.0% on
// llama-moe-Q4_K_M (KL 1.69); 82% is that first figure less its error, rounded down.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_support.h"
#include "eval/perplexity.h"
#include "runtime/loaded_model.h"
#include "test_support.h"

namespace strata {
namespace {

class KldGolden : public ::testing::TestWithParam<test::GoldenModel> {};

// On the CPU backend (gpu < 0) or every layer on that GPU.
void check(const test::GoldenModel& gm, int gpu) {
    const auto dir = test::testdata_dir();
    const nlohmann::json golden =
        nlohmann::json::parse(std::ifstream(dir / "golden/perplexity" / (gm.stem + ".json")));
    const int n_ctx = golden["n_ctx"].get<int>();

    ModelLoadOptions opt;
    opt.gpu = gpu;
    opt.engine.threads = 2;
    opt.engine.n_ctx = uint32_t(n_ctx);
    auto loaded = LoadedModel::load((dir / gm.path).string(), opt);
    ASSERT_TRUE(loaded) << loaded.error().message;
    LoadedModel& m = **loaded;

    PerplexityOptions kl_opt;
    kl_opt.compare_base = (dir / "golden/logits" / (gm.stem + ".kld")).string();
    auto kl = compute_perplexity(*m.engine, m.tokenizer, "", kl_opt);
    ASSERT_TRUE(kl) << kl.error().message;
    ASSERT_TRUE(kl->kl.has_value());
    const double max_kl = gm.float_weights                          ? (gm.bf16 ? 5e-3 : 1e-4)
                          : (gm.moe && gm.stem.ends_with("Q4_K_M")) ? 1.0
                                                                    : 0.1;
    const double min_top1 = gm.float_weights                          ? (gm.bf16 ? 0.95 : 0.98)
                            : (gm.moe && gm.stem.ends_with("Q4_K_M")) ? 0.85
                            : gpu >= 0                                ? 0.82
                                                                      : 0.88;
    std::printf("%-24s mean KL %.6f  p99 %.6f  top-1 %.1f%%\n", gm.stem.c_str(), kl->kl->mean,
                kl->kl->p99, 100 * kl->kl->top1);
    EXPECT_LE(kl->kl->mean, max_kl);
    EXPECT_GE(kl->kl->top1, min_top1);

    PerplexityOptions ppl_opt;
    ppl_opt.n_ctx = n_ctx;
    ppl_opt.max_chunks = golden["n_chunks"].get<int>();
    std::ifstream text_in(dir / "inputs/ppl_text.txt", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(text_in)), {});
    auto ppl = compute_perplexity(*m.engine, m.tokenizer, text, ppl_opt);
    ASSERT_TRUE(ppl) << ppl.error().message;
    const double want = std::log(golden["ppl_final"].get<double>());
    EXPECT_NEAR(std::log(ppl->ppl), want, 0.01 * std::abs(want));
    EXPECT_EQ(ppl->n_chunk, golden["n_chunks"].get<int>());
}

TEST_P(KldGolden, MatchesReferenceLogProbabilities) {
    STRATA_REQUIRE_TESTDATA();
    check(GetParam(), -1);
}

TEST_P(KldGolden, MatchesReferenceLogProbabilitiesOnGpu) {
    STRATA_REQUIRE_TESTDATA();
    STRATA_REQUIRE_GPU();
    check(GetParam(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, KldGolden, ::testing::ValuesIn(test::golden_models()),
                         [](const auto& param_info) {
                             return test::test_name(param_info.param.stem);
                         });

}  // namespace
}  // namespace strata
