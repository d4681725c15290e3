// Embeddings on a synthetic model: one made through the SequenceBatcher, in the steps of a
// generation running on another sequence, is bit for bit the one made alone (its long input cut
// into chunks beside the decode steps), and the generation is the one it makes alone too; an
// input longer than the context is told apart from a failure by its kind.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"
#include "runtime/sequence_batcher.h"
#include "session/embedding.h"
#include "session/generation.h"
#include "test_support.h"

namespace strata {
namespace {

// A small batch, so that a 40-token input needs several steps.
std::unique_ptr<LoadedModel> load(uint32_t n_seq) {
    return test::load_tiny_for_sequences(n_seq, 8);
}

std::vector<TokenId> some_tokens(size_t n, const engine::Engine& engine) {
    std::vector<TokenId> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = TokenId((i * 7 + 3) % engine.n_vocab());
    return t;
}

GenerateOptions greedy(int32_t max_tokens) {
    GenerateOptions g;
    g.max_tokens = max_tokens;
    g.sampling.temperature = 0.0f;
    g.stop_at_eog = false;  // a random model may pick an end token anywhere; keep runs long
    return g;
}

// The batcher, telling when a sequence joins it.
class JoinWatch final : public SequenceEvaluator {
  public:
    explicit JoinWatch(SequenceBatcher& batcher) : batcher_(batcher) {}
    void join(int seq) override {
        batcher_.join(seq);
        joined_.set_value();
    }
    void leave(int seq) override { batcher_.leave(seq); }
    Result<void> eval(int seq, std::span<const int32_t> tokens, engine::LogitsWanted wanted,
                      std::vector<float>& out, SequenceReads* reads) override {
        return batcher_.eval(seq, tokens, wanted, out, reads);
    }
    std::future<void> joined() { return joined_.get_future(); }

  private:
    SequenceBatcher& batcher_;
    std::promise<void> joined_;
};

TEST(Embedding, ThroughTheBatcherBesideAGenerationItIsTheEmbeddingAlone) {
    auto alone = load(1);
    auto shared = load(2);
    ASSERT_TRUE(alone && shared);
    const std::vector<TokenId> input = some_tokens(40, *alone->engine);
    const std::vector<TokenId> prompt = {1, 5, 9, 13};
    constexpr int kTokens = 40;

    EmbedResult want = embed_tokens(*alone->engine, input, false);
    ASSERT_TRUE(std::holds_alternative<Embedding>(want));
    GenerationSession alone_session(*alone->engine, alone->tokenizer);
    auto want_generation = alone_session.generate(prompt, greedy(kTokens), {});
    ASSERT_TRUE(want_generation) << want_generation.error().message;

    // The embedding on sequence 1 starts once the generation on sequence 0 has its first token,
    // and the generation waits there until the embedding has joined: every step after that holds
    // both until the embedding is done (6 of the generation's 40, 7 of its tokens a step).
    SequenceBatcher batcher(*shared->engine);
    JoinWatch watch(batcher);
    std::future<void> embedding_joined = watch.joined();
    std::promise<void> first_token;
    GenerationSession session(*shared->engine, shared->tokenizer, 0, &batcher);
    Result<GenerateResult> generation = err("not run");
    bool first = true;
    std::thread generating([&] {
        generation = session.generate(prompt, greedy(kTokens), [&](std::string_view) {
            if (first) {
                first = false;
                first_token.set_value();
                embedding_joined.wait();
            }
            return true;
        });
        if (first) first_token.set_value();  // no text came: the test fails, but does not hang
    });
    first_token.get_future().wait();
    EmbedResult got = embed_tokens(*shared->engine, input, false, 1, &watch);
    generating.join();

    ASSERT_TRUE(std::holds_alternative<Embedding>(got)) << std::get<EmbedFailure>(got).message;
    const Embedding& g = std::get<Embedding>(got);
    const Embedding& w = std::get<Embedding>(want);
    EXPECT_EQ(g.tokens, 40u);
    EXPECT_EQ(g.vector, w.vector);  // bit for bit
    ASSERT_TRUE(generation) << generation.error().message;
    EXPECT_EQ(generation->generated_ids, want_generation->generated_ids);
    EXPECT_EQ(generation->text, want_generation->text);
    EXPECT_EQ(batcher.stats().widest_step, 2u);
    EXPECT_EQ(shared->engine->n_past(1), 40u);  // the sequence holds the input
}

TEST(Embedding, AnInputLongerThanTheContextIsAContextOverflowUnlessItMayBeCut) {
    auto m = load(1);
    ASSERT_TRUE(m);
    const std::vector<TokenId> input = some_tokens(65, *m->engine);
    EmbedResult refused = embed_tokens(*m->engine, input, false);
    ASSERT_TRUE(std::holds_alternative<EmbedFailure>(refused));
    const EmbedFailure& f = std::get<EmbedFailure>(refused);
    EXPECT_EQ(f.kind, EmbedError::ContextOverflow);
    EXPECT_NE(f.message.find("65 tokens"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("holds 64"), std::string::npos) << f.message;

    EmbedResult cut = embed_tokens(*m->engine, input, true);
    ASSERT_TRUE(std::holds_alternative<Embedding>(cut));
    EXPECT_EQ(std::get<Embedding>(cut).tokens, 64u);

    EmbedResult none = embed_tokens(*m->engine, {}, false);
    ASSERT_TRUE(std::holds_alternative<EmbedFailure>(none));
    EXPECT_EQ(std::get<EmbedFailure>(none).kind, EmbedError::Evaluation);
}

}  // namespace
}  // namespace strata
