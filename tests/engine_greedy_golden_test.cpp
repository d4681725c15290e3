// Greedy continuations against the reference engine's golden runs (../shared/testdata/golden/
// greedy): the same prompt ids, then 32 argmax steps with the prompt evaluated as one batch.
//
// Tolerances come from the testdata README's "Comparing another engine": float-weight files must
// match every greedy id (on a GPU: up to a step whose margin is within twice the logit
// tolerance) and the top-10 logits within 0.25 (BF16: 1.0). Quantized files are
// compared up to the first step whose golden top-1/top-2 margin is below what activation rounding
// can move (5 logits for dense files, 10 for MoE, where a near-tie in the router swaps an
// expert), with logits within 8% of the top logit there (the README measured the reference
// engine moving its own top logit by up to 2.7 of 30-40 when only its KV cache type changed,
// because small input changes flip 8-bit activation roundings). On a GPU, quantized MoE files
// end a prompt's comparison at the first step after the prompt's own logits where a logit leaves
// that tolerance, as at a divergence: there the GPU's other summation order (fp16 products in
// the prompt) has swapped an expert at a router near-tie, which moves the logits by more than 8%
// (the README's float engine moved the top-1 of llama-moe-Q4_K_M by 9.3 of ~80, and the
// reference's own CUDA backend scores 79% top-1 on that file against its CPU); the prompt's
// logits (step 0) must still match, and the teacher-forced statistics (engine_kld_golden_test)
// bound the rest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"
#include "test_support.h"

namespace strata {
namespace {

using nlohmann::json;

int32_t argmax(const std::vector<float>& v) {
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());  // first = lowest id
}

class GreedyGolden : public ::testing::TestWithParam<test::GoldenModel> {};

// On the CPU backend (gpu < 0) or every layer on that GPU.
void check(const test::GoldenModel& gm, int gpu) {
    const auto dir = test::testdata_dir();
    std::ifstream in(dir / "golden/greedy" / (gm.stem + ".json"));
    ASSERT_TRUE(in) << gm.stem;
    const json golden = json::parse(in);

    ModelLoadOptions opt;
    opt.gpu = gpu;
    opt.engine.threads = 2;
    opt.engine.n_ctx = 128;
    auto loaded = LoadedModel::load((dir / gm.path).string(), opt);
    ASSERT_TRUE(loaded) << loaded.error().message;
    LoadedModel& m = **loaded;

    // Divergence is allowed only at a step whose golden margin is below margin_tol. The CPU
    // backend reproduces the reference's arithmetic, so float files match every step there; a
    // GPU sums in another order, so there two logits within the logit tolerance of each other
    // may swap (a margin below twice the tolerance).
    const double float_tol = gm.bf16 ? 1.0 : 0.25;
    const double margin_tol =
        gm.float_weights ? (gpu >= 0 ? 2 * float_tol : 0.0) : (gm.moe ? 10.0 : 5.0);
    int exact_steps = 0;
    for (const json& p : golden["prompts"]) {
        SCOPED_TRACE(gm.stem + " " + p["prompt_id"].get<std::string>());
        const auto ids = m.tokenizer.tokenize(p["prompt"].get<std::string>());
        ASSERT_EQ(ids, p["prompt_ids"].get<std::vector<int32_t>>());
        m.engine->truncate(0);
        std::vector<float> logits;
        ASSERT_TRUE(m.engine->eval(ids, engine::LogitsWanted::Last, logits));
        const auto want = p["greedy_ids"].get<std::vector<int32_t>>();
        const auto margins = p["top1_top2_margin"].get<std::vector<double>>();
        for (size_t s = 0; s < want.size(); ++s) {
            const json& topk = p["topk_logits"][s];
            const double top = topk[0][1].get<double>();
            const double tol = gm.float_weights ? float_tol : 0.08 * std::abs(top);
            const bool swap_ends = gpu >= 0 && gm.moe && !gm.float_weights && s > 0;
            bool swapped = false;
            for (const json& e : topk) {
                const int id = e[0].get<int>();
                if (swap_ends) {
                    swapped = swapped || std::abs(logits[size_t(id)] - e[1].get<double>()) > tol;
                    continue;
                }
                EXPECT_NEAR(logits[size_t(id)], e[1].get<double>(), tol)
                    << "step " << s << " token " << id;
            }
            if (swapped) {
                std::printf("%s %s: an expert swapped at step %zu (logits beyond %.2f)\n",
                            gm.stem.c_str(), p["prompt_id"].get<std::string>().c_str(), s, tol);
                break;
            }
            const int32_t got = argmax(logits);
            if (got != want[s]) {
                if (margins[s] >= margin_tol) {
                    ADD_FAILURE() << "step " << s << ": got token " << got << ", golden " << want[s]
                                  << " (golden margin " << margins[s] << ")";
                } else {
                    std::printf("%s %s: diverges at step %zu (golden margin %.3f)\n",
                                gm.stem.c_str(), p["prompt_id"].get<std::string>().c_str(), s,
                                margins[s]);
                }
                break;
            }
            ++exact_steps;
            const int32_t next = want[s];
            ASSERT_TRUE(m.engine->eval({&next, 1}, engine::LogitsWanted::Last, logits));
        }
    }
    ::testing::Test::RecordProperty("steps_matched", exact_steps);
}

TEST_P(GreedyGolden, MatchesReferenceContinuations) {
    STRATA_REQUIRE_TESTDATA();
    check(GetParam(), -1);
}

TEST_P(GreedyGolden, MatchesReferenceContinuationsOnGpu) {
    STRATA_REQUIRE_TESTDATA();
    STRATA_REQUIRE_GPU();
    check(GetParam(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, GreedyGolden, ::testing::ValuesIn(test::golden_models()),
                         [](const auto& param_info) {
                             return test::test_name(param_info.param.stem);
                         });

}  // namespace
}  // namespace strata
