// llama.cpp's chunking rule for perplexity (eval/perplexity_chunks.h): counts, BOS replacement,
// scored positions, the too-short error, and the token lists of the golden .kld files, which
// llama.cpp wrote from the same rule applied to ppl_text.txt.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "eval/kld_file.h"
#include "eval/perplexity_chunks.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::vector<int32_t> iota_tokens(size_t n) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), 100);
    return t;
}

TEST(PerplexityChunks, CountsWindowsAndScoredPositions) {
    const std::vector<int32_t> text = iota_tokens(1000);
    auto all = make_perplexity_chunks(text, 128, -1, 1);
    ASSERT_TRUE(all.ok()) << all.error().message;
    EXPECT_EQ(all->n_chunk, 7);  // 1000 / 128, the last 104 tokens unused
    EXPECT_EQ(all->tokens.size(), 7u * 128u);
    EXPECT_EQ(all->first(), 64);
    EXPECT_EQ(all->scored_per_chunk(), 63);  // positions 64..126 predict 65..127
    EXPECT_EQ(all->scored_total(), 7 * 63);

    EXPECT_EQ(make_perplexity_chunks(text, 128, 4, 1)->n_chunk, 4);
    EXPECT_EQ(make_perplexity_chunks(text, 128, 100, 1)->n_chunk, 7);

    // Chunk 2 covers text[256, 384): the model sees BOS first, the rest unchanged.
    const std::vector<int32_t> eval = all->eval_tokens(2);
    ASSERT_EQ(eval.size(), 128u);
    EXPECT_EQ(eval[0], 1);
    EXPECT_EQ(all->original(2)[0], text[256]);
    for (size_t i = 1; i < eval.size(); ++i) EXPECT_EQ(eval[i], text[256 + i]);
    // Position 64 + j of chunk 2 predicts text[256 + 64 + j + 1].
    EXPECT_EQ(all->target(2, 0), text[256 + 65]);
    EXPECT_EQ(all->target(2, 62), text[256 + 127]);

    // Odd context: first = 32, positions 32..63 scored (the last one predicts position 64).
    auto odd = make_perplexity_chunks(text, 65, -1, std::nullopt);
    ASSERT_TRUE(odd.ok());
    EXPECT_EQ(odd->n_chunk, 15);
    EXPECT_EQ(odd->first(), 32);
    EXPECT_EQ(odd->scored_per_chunk(), 32);
    EXPECT_EQ(odd->target(1, 31), text[65 + 64]);
}

TEST(PerplexityChunks, WithoutBosTheTextIsFedUnchanged) {
    const std::vector<int32_t> text = iota_tokens(300);
    auto p = make_perplexity_chunks(text, 100, -1, std::nullopt);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->n_chunk, 3);
    for (int32_t c = 0; c < 3; ++c) {
        const std::vector<int32_t> eval = p->eval_tokens(c);
        EXPECT_TRUE(std::equal(eval.begin(), eval.end(), p->original(c).begin()));
    }
}

TEST(PerplexityChunks, TextMustHoldTwoWindows) {
    // llama.cpp refuses texts shorter than 2 * n_ctx, though one window would be enough.
    auto short_text = make_perplexity_chunks(iota_tokens(255), 128, -1, 1);
    ASSERT_FALSE(short_text.ok());
    const std::string& msg = short_text.error().message;
    EXPECT_NE(msg.find("255 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("at least 256"), std::string::npos) << msg;

    auto just_enough = make_perplexity_chunks(iota_tokens(256), 128, -1, 1);
    ASSERT_TRUE(just_enough.ok());
    EXPECT_EQ(just_enough->n_chunk, 2);
    EXPECT_EQ(make_perplexity_chunks(iota_tokens(256), 128, 1, 1)->n_chunk, 1);
}

TEST(PerplexityChunks, RejectsUselessArguments) {
    EXPECT_FALSE(make_perplexity_chunks(iota_tokens(100), 2, -1, 1).ok());
    EXPECT_FALSE(make_perplexity_chunks(iota_tokens(100), 0, -1, 1).ok());
    EXPECT_FALSE(make_perplexity_chunks(iota_tokens(100), 10, 0, 1).ok());
}

// ppl_text.txt tokenized with the models' vocabulary (BOS added), cut by the rule with each
// golden run's n_ctx and --chunks, must give exactly the ids llama.cpp stored in its .kld.
TEST(PerplexityChunksGolden, MatchesGoldenKldTokens) {
    STRATA_REQUIRE_TESTDATA();
    const fs::path data = test::testdata_dir();
    auto tok = Tokenizer::load((data / "models/real/aidreams260K-F32.gguf").string());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const std::string text = test::read_text_file(data / "inputs/ppl_text.txt");
    const std::vector<TokenId> ids = tok->tokenize(text);
    ASSERT_EQ(ids.size(), 1320u);  // as the README states
    ASSERT_TRUE(tok->vocab().add_bos());
    const TokenId bos = tok->vocab().special().bos;
    EXPECT_EQ(ids[0], bos);

    size_t checked = 0;
    for (const auto& entry : fs::directory_iterator(data / "golden/logits")) {
        if (entry.path().extension() != ".kld") continue;
        const std::string name = entry.path().stem().string();
        const auto ref = nlohmann::json::parse(
            test::read_text_file(data / "golden/perplexity" / (name + ".json")));
        auto kld = KldReader::open(entry.path().string());
        ASSERT_TRUE(kld.ok()) << kld.error().message;
        const KldHeader& h = kld->header();
        auto p = make_perplexity_chunks(ids, ref.at("n_ctx").get<int32_t>(),
                                        ref.at("n_chunks").get<int32_t>(), bos);
        ASSERT_TRUE(p.ok()) << p.error().message;
        EXPECT_EQ(p->n_ctx, h.n_ctx) << name;
        EXPECT_EQ(p->n_chunk, h.n_chunk) << name;
        EXPECT_EQ(p->tokens, h.tokens) << name;
        EXPECT_EQ(p->target(h.n_chunk - 1, h.records_per_chunk() - 1),
                  h.next_token(h.n_chunk - 1, h.records_per_chunk() - 1));
        EXPECT_EQ(p->eval_tokens(1)[0], bos) << name;
        ++checked;
    }
    EXPECT_EQ(checked, 30u);
}

}  // namespace
}  // namespace strata
