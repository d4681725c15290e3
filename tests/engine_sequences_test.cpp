// Several sequences evaluated together (Engine::eval_sequences) give each sequence exactly the
// logits it gets evaluated alone: same bits, whatever else shares the batch, wherever a batch
// boundary cuts a prompt, and in every residency mode (a streamed layer is read once for all).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "runtime/loaded_model.h"
#include "test_support.h"

namespace strata {
namespace {

struct Script {
    std::vector<int32_t> prompt;
    int joins_at = 0;  // the batched step its prompt enters
};

// Greedy continuation of one prompt alone: the logits after the prompt, then after each step.
std::vector<std::vector<float>> alone(engine::Engine& e, const std::vector<int32_t>& prompt,
                                      int steps) {
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    e.truncate(0);
    EXPECT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, logits));
    out.push_back(logits);
    for (int s = 0; s < steps; ++s) {
        const int32_t next =
            int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        EXPECT_TRUE(e.eval({&next, 1}, engine::LogitsWanted::Last, logits));
        out.push_back(logits);
    }
    return out;
}

bool same_bits(const float* a, const std::vector<float>& b) {
    return std::memcmp(a, b.data(), b.size() * sizeof(float)) == 0;
}

// max_batch 8: prompts of 11 and 19 tokens straddle batches. A hybrid model's delta net computes
// a prompt's run in chunks, whose sums a different cut would order differently: it gets batches
// that take every step whole (32), so that each sequence's runs are the same alone and batched.
void check_batched_equals_alone(const std::string& path, const std::string& mode,
                                uint32_t max_batch = 8) {
    SCOPED_TRACE(path + " " + mode);
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 64;
    o.engine.max_batch = max_batch;
    auto single = test::load_in_mode(path, mode, o);
    o.engine.n_seq = 3;
    auto multi = test::load_in_mode(path, mode, o);
    ASSERT_TRUE(single && multi);
    const uint32_t vocab = multi->engine->n_vocab();
    auto ids = [&](int n, int salt) {
        std::vector<int32_t> v;
        for (int i = 0; i < n; ++i) v.push_back(int32_t((i * 7 + salt * 13 + 1) % vocab));
        return v;
    };
    const std::vector<Script> scripts = {{ids(11, 1), 0}, {ids(3, 2), 0}, {ids(19, 3), 2}};
    constexpr int kSteps = 5;
    std::vector<std::vector<std::vector<float>>> want;
    for (const Script& s : scripts) want.push_back(alone(*single->engine, s.prompt, kSteps));

    // Batched: each step holds the next token of every sequence that has begun, and the whole
    // prompt of one that joins then.
    std::vector<int> done(scripts.size(), -1);  // logits rows checked so far, per sequence
    std::vector<int32_t> next(scripts.size());
    std::vector<float> logits;
    for (int step = 0; step < 2 + kSteps + 1; ++step) {
        std::vector<engine::SeqTokens> in;
        std::vector<int> order;
        for (size_t q = 0; q < scripts.size(); ++q) {
            if (scripts[q].joins_at == step) {
                in.push_back({int(q), scripts[q].prompt, true});
            } else if (done[q] >= 0 && done[q] < kSteps) {
                in.push_back({int(q), {&next[q], 1}, true});
            } else {
                continue;
            }
            order.push_back(int(q));
        }
        if (in.empty()) continue;
        ASSERT_TRUE(multi->engine->eval_sequences(in, logits));
        ASSERT_EQ(logits.size(), in.size() * vocab);
        for (size_t i = 0; i < order.size(); ++i) {
            const int q = order[i];
            const int row = ++done[q];
            const float* got = logits.data() + i * vocab;
            EXPECT_TRUE(same_bits(got, want[size_t(q)][size_t(row)]))
                << "sequence " << q << ", logits row " << row << " at batched step " << step;
            next[size_t(q)] = int32_t(std::max_element(got, got + vocab) - got);
        }
    }
    for (size_t q = 0; q < scripts.size(); ++q) {
        EXPECT_EQ(done[q], kSteps) << "sequence " << q;
        EXPECT_EQ(multi->engine->n_past(int(q)), scripts[q].prompt.size() + kSteps);
    }
}

TEST(EngineSequences, BatchedSequencesGetTheLogitsTheyGetAlone) {
    for (const char* preset : {"tiny", "tiny-qwen3", "tiny-qwen2moe"}) {
        for (TensorType t : {TensorType::Q8_0, TensorType::Q4_K}) {
            check_batched_equals_alone(test::synth_test_model(preset, t), "resident");
        }
    }
}

TEST(EngineSequences, StreamedLayersServeTheWholeBatch) {
    check_batched_equals_alone(test::synth_test_model("tiny", TensorType::Q4_K), "ffn-stream");
    check_batched_equals_alone(test::synth_test_model("tiny-qwen2moe", TensorType::Q4_K),
                               "expert-stream");
    check_batched_equals_alone(test::synth_test_model("tiny-glm4moe", TensorType::Q4_K),
                               "expert-stream");
}

// Each sequence keeps its own recurrent state (conv inputs and delta state) beside its KV cache.
TEST(EngineSequences, HybridSequencesKeepTheirOwnRecurrentState) {
    check_batched_equals_alone(test::synth_test_model("tiny-qwen35", TensorType::Q8_0), "resident",
                               32);
    check_batched_equals_alone(test::synth_test_model("tiny-qwen35moe", TensorType::Q8_0),
                               "resident", 32);
    check_batched_equals_alone(test::synth_test_model("tiny-qwen35", TensorType::Q4_K),
                               "ffn-stream", 32);
    check_batched_equals_alone(test::synth_test_model("tiny-qwen35moe", TensorType::Q4_K),
                               "expert-stream", 32);
}

// Latent attention: each sequence's rows attend over its own latent cache.
TEST(EngineSequences, LatentAttentionSequencesKeepTheirOwnCaches) {
    check_batched_equals_alone(test::synth_test_model("tiny-deepseek2", TensorType::Q8_0),
                               "resident");
    check_batched_equals_alone(test::synth_test_model("tiny-deepseek2", TensorType::Q8_0),
                               "expert-stream");
}

TEST(EngineSequences, ErrorsChangeNoContext) {
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 16;
    o.engine.n_seq = 2;
    auto m = LoadedModel::load(test::synth_test_model("tiny", TensorType::Q8_0), o);
    ASSERT_TRUE(m);
    engine::Engine& e = *(*m)->engine;
    std::vector<float> logits;
    const std::vector<int32_t> ten(10, 1), eight(8, 2);
    ASSERT_TRUE(e.eval(ten, engine::LogitsWanted::Last, logits, 0));
    // Sequence 1 fits, sequence 0 does not: neither advances.
    const engine::SeqTokens both[] = {{1, eight, true}, {0, eight, true}};
    auto r = e.eval_sequences(both, logits);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("context is full"), std::string::npos) << r.error().message;
    EXPECT_EQ(e.n_past(0), 10u);
    EXPECT_EQ(e.n_past(1), 0u);
    const engine::SeqTokens twice[] = {{1, eight, false}, {1, eight, false}};
    EXPECT_FALSE(e.eval_sequences(twice, logits));
    const engine::SeqTokens missing[] = {{2, eight, false}};
    r = e.eval_sequences(missing, logits);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("does not exist"), std::string::npos) << r.error().message;
    EXPECT_EQ(e.n_past(1), 0u);
}

}  // namespace
}  // namespace strata
