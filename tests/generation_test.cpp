// GenerationSession on a synthetic model: greedy decoding is the argmax of the engine's logits
// and repeats itself; each stop condition ends generation with the right done_reason and text
// (max_tokens, a full context, stop strings, a sink that hangs up); a prompt that extends the
// cached one evaluates only its new tokens and generates what a fresh session would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"
#include "session/generation.h"
#include "session/prompt.h"
#include "test_support.h"

namespace strata {
namespace {

// The tiny llama preset with its built-in vocabulary (Q8_0), shared by the tests of this file.
const std::string& model_path() {
    return test::synth_test_model("tiny", TensorType::Q8_0, 11);
}

std::unique_ptr<LoadedModel> load(uint32_t n_ctx = 128) {
    ModelLoadOptions opt;
    opt.engine.threads = 2;
    opt.engine.n_ctx = n_ctx;
    auto m = LoadedModel::load(model_path(), opt);
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
}

GenerateOptions greedy(int32_t max_tokens) {
    GenerateOptions g;
    g.max_tokens = max_tokens;
    g.sampling.temperature = 0.0f;
    g.stop_at_eog = false;  // a random model may pick </s> anywhere; keep runs long
    return g;
}

std::vector<TokenId> prompt(const LoadedModel& m, const std::string& text) {
    return tokenize_prompt(m.tokenizer, text);
}

TEST(Generation, GreedyIsDeterministicArgmax) {
    auto m = load();
    ASSERT_TRUE(m);
    const auto ids = prompt(*m, "Once upon a time there was");
    GenerationSession s(*m->engine, m->tokenizer);
    auto a = s.generate(ids, greedy(12), {});
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->generated_ids.size(), 12u);
    EXPECT_EQ(a->done_reason, "length");
    EXPECT_EQ(a->prompt_ids, ids);

    GenerationSession s2(*m->engine, m->tokenizer);
    auto b = s2.generate(ids, greedy(12), {});
    ASSERT_TRUE(b);
    EXPECT_EQ(b->generated_ids, a->generated_ids);
    EXPECT_EQ(b->text, a->text);

    // The same by hand: prompt as one batch, then one argmax token at a time.
    engine::Engine& e = *m->engine;
    e.truncate(0);
    std::vector<float> logits;
    ASSERT_TRUE(e.eval(ids, engine::LogitsWanted::Last, logits));
    std::vector<TokenId> want;
    for (int i = 0; i < 12; ++i) {
        const TokenId next =
            TokenId(std::max_element(logits.begin(), logits.end()) - logits.begin());
        want.push_back(next);
        ASSERT_TRUE(e.eval({&next, 1}, engine::LogitsWanted::Last, logits));
    }
    EXPECT_EQ(a->generated_ids, want);
}

TEST(Generation, MaxTokensEndsWithLength) {
    auto m = load();
    ASSERT_TRUE(m);
    GenerationSession s(*m->engine, m->tokenizer);
    for (int32_t n : {0, 1, 5}) {
        auto r = s.generate(prompt(*m, "The story"), greedy(n), {});
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->generated_ids.size(), size_t(n));
        EXPECT_EQ(r->timings.generated_tokens, uint32_t(n));
        EXPECT_EQ(r->done_reason, "length");
    }
}

TEST(Generation, FullContextStopsWithLengthNotAnError) {
    const uint32_t n_ctx = 24;
    auto m = load(n_ctx);
    ASSERT_TRUE(m);
    const auto ids = prompt(*m, "Once upon a time");
    ASSERT_LT(ids.size(), n_ctx);
    GenerationSession s(*m->engine, m->tokenizer);
    for (int32_t max_tokens : {-1, 1000}) {
        s.reset();
        auto r = s.generate(ids, greedy(max_tokens), {});
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->done_reason, "length");
        // Every position gets evaluated; the token sampled from the last one is still returned.
        EXPECT_EQ(r->generated_ids.size(), n_ctx - ids.size() + 1);
        EXPECT_EQ(m->engine->n_past(), n_ctx);
        EXPECT_EQ(s.context().size(), n_ctx);
    }
    // The session goes on with a new prompt after filling up.
    auto again = s.generate(prompt(*m, "The end"), greedy(3), {});
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->generated_ids.size(), 3u);
    // A prompt that alone fills the context is an error, not a truncation.
    std::vector<TokenId> too_long(n_ctx, ids.back());
    EXPECT_FALSE(s.generate(too_long, greedy(3), {}));
}

// A run of 4 printable ASCII characters from the middle of `text` (empty if there is none).
std::string middle_ascii(const std::string& text) {
    auto printable = [&](size_t i) {
        return i < text.size() && std::isgraph(static_cast<unsigned char>(text[i]));
    };
    for (size_t start = text.size() / 2; start + 4 <= text.size(); ++start) {
        if (printable(start) && printable(start + 1) && printable(start + 2) &&
            printable(start + 3)) {
            return text.substr(start, 4);
        }
    }
    return {};
}

TEST(Generation, StopStringEndsTheTextRightBeforeIt) {
    auto m = load();
    ASSERT_TRUE(m);
    const auto ids = prompt(*m, "Once upon a time");
    GenerationSession s(*m->engine, m->tokenizer);
    auto full = s.generate(ids, greedy(48), {});
    ASSERT_TRUE(full);
    const std::string stop = middle_ascii(full->text);
    ASSERT_FALSE(stop.empty()) << "no ASCII run in the greedy text: " << full->text;
    const size_t at = full->text.find(stop);

    GenerateOptions g = greedy(48);
    g.stop = {"never-in-this-text", stop};
    std::string streamed;
    auto r = s.generate(ids, g, [&](std::string_view piece) {
        streamed += piece;
        return true;
    });
    ASSERT_TRUE(r) << r.error().message;
    SCOPED_TRACE("greedy text: [" + full->text + "], stop string [" + stop + "]");
    EXPECT_EQ(r->done_reason, "stop");
    EXPECT_EQ(r->text, full->text.substr(0, at));
    EXPECT_EQ(streamed, r->text);
    EXPECT_EQ(r->text.find(stop), std::string::npos);
    EXPECT_LT(r->generated_ids.size(), full->generated_ids.size());
    // The tokens up to the stop are the greedy tokens.
    EXPECT_TRUE(
        std::equal(r->generated_ids.begin(), r->generated_ids.end(), full->generated_ids.begin()));
}

TEST(Generation, ExtendedPromptReusesTheCachedPrefix) {
    auto m = load();
    ASSERT_TRUE(m);
    const auto first = prompt(*m, "Once upon a time");
    auto second = first;
    for (TokenId t : prompt(*m, "there was a king"))
        if (t != 1) second.push_back(t);  // without the second BOS

    GenerationSession s(*m->engine, m->tokenizer);
    auto r1 = s.generate(first, greedy(6), {});
    ASSERT_TRUE(r1);
    EXPECT_EQ(r1->timings.cached_tokens, 0u);
    EXPECT_EQ(r1->timings.prompt_tokens, first.size());

    // The cache now holds the first prompt and its answer; the second prompt shares the first
    // prompt with it (and more, should the answer begin the way the extension does).
    auto cached = first;
    cached.insert(cached.end(), r1->generated_ids.begin(), r1->generated_ids.end());
    EXPECT_EQ(s.context(), cached);
    const size_t common =
        size_t(std::mismatch(cached.begin(), cached.end(), second.begin(), second.end()).first -
               cached.begin());
    ASSERT_GE(common, first.size());

    const uint64_t evaluated_before = m->engine->stats().tokens;
    auto r2 = s.generate(second, greedy(8), {});
    ASSERT_TRUE(r2) << r2.error().message;
    EXPECT_EQ(r2->timings.cached_tokens, common);
    EXPECT_EQ(r2->timings.prompt_tokens, second.size() - common);
    // Only the new prompt tokens, then one evaluation per generated token.
    EXPECT_EQ(m->engine->stats().tokens - evaluated_before,
              second.size() - common + r2->generated_ids.size());

    auto fresh_model = load();
    ASSERT_TRUE(fresh_model);
    GenerationSession fresh(*fresh_model->engine, fresh_model->tokenizer);
    auto r3 = fresh.generate(second, greedy(8), {});
    ASSERT_TRUE(r3);
    EXPECT_EQ(r3->timings.cached_tokens, 0u);
    EXPECT_EQ(r2->generated_ids, r3->generated_ids);
    EXPECT_EQ(r2->text, r3->text);

    // The next turn of a chat: prompt + answer + more. Everything cached is reused.
    auto third = second;
    third.insert(third.end(), r2->generated_ids.begin(), r2->generated_ids.end());
    third.push_back(second.back());
    auto r4 = s.generate(third, greedy(2), {});
    ASSERT_TRUE(r4);
    EXPECT_EQ(r4->timings.cached_tokens, second.size() + r2->generated_ids.size());
    EXPECT_EQ(r4->timings.prompt_tokens, 1u);

    // The same prompt again: all but its last token come from the cache (its logits are needed).
    auto r5 = s.generate(third, greedy(2), {});
    ASSERT_TRUE(r5);
    EXPECT_EQ(r5->timings.cached_tokens, third.size() - 1);
    EXPECT_EQ(r5->timings.prompt_tokens, 1u);
    EXPECT_EQ(r5->generated_ids, r4->generated_ids);
}

TEST(Generation, SinkReturningFalseStops) {
    auto m = load();
    ASSERT_TRUE(m);
    GenerationSession s(*m->engine, m->tokenizer);
    int calls = 0;
    std::string received;
    auto r = s.generate(prompt(*m, "Once upon a time"), greedy(40), [&](std::string_view piece) {
        received += piece;
        return ++calls < 3;
    });
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(r->done_reason, "stop");
    EXPECT_LT(r->generated_ids.size(), 40u);
    EXPECT_EQ(r->text, received);  // nothing is added after the client left
}

}  // namespace
}  // namespace strata
