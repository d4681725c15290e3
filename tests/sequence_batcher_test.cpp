// The SequenceBatcher on its own: generations on their own threads get, through shared steps,
// the logits each gets alone; a sequence whose input cannot go in fails alone; a sequence that
// leaves stops being waited for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"
#include "runtime/sequence_batcher.h"
#include "test_support.h"

namespace strata {
namespace {

std::unique_ptr<LoadedModel> load(uint32_t n_seq) {
    return test::load_tiny_for_sequences(n_seq);
}

int32_t greedy(const std::vector<float>& l) {
    return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
}

// A prompt and `steps` greedy tokens, every logits vector on the way.
std::vector<std::vector<float>> run(
    const std::function<Result<void>(std::span<const int32_t>, std::vector<float>&)>& eval,
    std::vector<int32_t> prompt, int steps) {
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    EXPECT_TRUE(eval(prompt, logits));
    out.push_back(logits);
    for (int s = 0; s < steps; ++s) {
        const int32_t next = greedy(logits);
        EXPECT_TRUE(eval({&next, 1}, logits));
        out.push_back(logits);
    }
    return out;
}

TEST(SequenceBatcher, ThreadsGetWhatTheyGetAlone) {
    auto alone = load(1);
    auto shared = load(3);
    ASSERT_TRUE(alone && shared);
    const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9, 13, 17}, {2, 4}, {7, 7, 7, 3}};
    constexpr int kSteps = 12;
    std::vector<std::vector<std::vector<float>>> want;
    for (const auto& p : prompts) {
        alone->engine->truncate(0);
        want.push_back(run(
            [&](std::span<const int32_t> t, std::vector<float>& l) {
                return alone->engine->eval(t, engine::LogitsWanted::Last, l);
            },
            p, kSteps));
    }

    SequenceBatcher batcher(*shared->engine);
    std::vector<std::vector<std::vector<float>>> got(prompts.size());
    std::vector<std::thread> threads;
    for (size_t q = 0; q < prompts.size(); ++q) {
        threads.emplace_back([&, q] {
            batcher.join(int(q));
            got[q] = run(
                [&](std::span<const int32_t> t, std::vector<float>& l) {
                    return batcher.eval(int(q), t, engine::LogitsWanted::Last, l, nullptr);
                },
                prompts[q], kSteps);
            batcher.leave(int(q));
        });
    }
    for (std::thread& t : threads) t.join();
    for (size_t q = 0; q < prompts.size(); ++q) {
        ASSERT_EQ(got[q].size(), want[q].size());
        for (size_t r = 0; r < got[q].size(); ++r) {
            EXPECT_EQ(
                std::memcmp(got[q][r].data(), want[q][r].data(), want[q][r].size() * sizeof(float)),
                0)
                << "sequence " << q << " row " << r;
        }
    }
    const BatcherStats st = batcher.stats();
    EXPECT_GE(st.widest_step, 2u);
    EXPECT_LT(st.steps, uint64_t(prompts.size()) * (kSteps + 1));
}

TEST(SequenceBatcher, AnInputThatCannotGoInFailsAloneAndLeavingStopsTheWait) {
    auto shared = load(2);
    ASSERT_TRUE(shared);
    SequenceBatcher batcher(*shared->engine);
    const int32_t bad = int32_t(shared->engine->n_vocab()) + 5;
    batcher.join(0);
    batcher.join(1);
    std::vector<float> logits;
    std::vector<std::vector<float>> good;
    std::thread other([&] {
        good = run(
            [&](std::span<const int32_t> t, std::vector<float>& l) {
                return batcher.eval(0, t, engine::LogitsWanted::Last, l, nullptr);
            },
            {1, 2, 3}, 4);
        batcher.leave(0);
    });
    // Sequence 1 fails at once; sequence 0's steps wait for it until it leaves.
    auto r = batcher.eval(1, {&bad, 1}, engine::LogitsWanted::Last, logits, nullptr);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("outside the vocabulary"), std::string::npos)
        << r.error().message;
    batcher.leave(1);
    other.join();
    EXPECT_EQ(good.size(), 5u);
    EXPECT_EQ(shared->engine->n_past(0), 3u + 4u);
    EXPECT_EQ(shared->engine->n_past(1), 0u);
}

}  // namespace
}  // namespace strata
