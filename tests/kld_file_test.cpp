// The .kld logit-dump format (eval/kld_file.h): writing and reading back, the encoder on
// hand-checked rows, the reader's errors on damaged files, and every golden file written by
// llama.cpp re-encoded by strata's encoder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "eval/kld_file.h"
#include "eval/logit_stats.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
void poke(std::vector<char>& bytes, size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// A small, complete file: n_ctx 8 (3 records per chunk), odd n_vocab 5, 2 chunks, random logits.
struct SmallFile {
    static constexpr int32_t n_ctx = 8, n_vocab = 5, n_chunk = 2;
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> rows;  // 6 rows

    SmallFile() {
        std::mt19937 rng(7);
        std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
        std::normal_distribution<float> logit(0.0f, 6.0f);
        for (int i = 0; i < n_ctx * n_chunk; ++i) tokens.push_back(tok(rng));
        for (int r = 0; r < n_chunk * 3; ++r) {
            std::vector<float> row(n_vocab);
            for (float& x : row) x = logit(rng) + 40.0f;
            rows.push_back(row);
        }
    }
    Result<void> write(const std::string& path) const {
        STRATA_ASSIGN(KldWriter w, KldWriter::create(path, n_ctx, n_vocab, n_chunk, tokens));
        for (const auto& row : rows) STRATA_TRY(w.append(row));
        return w.finish();
    }
};

TEST(KldFile, RecordWords) {
    EXPECT_EQ(kld_record_words(512), 516u);
    EXPECT_EQ(kld_record_words(5), 10u);  // padded to an even count
    EXPECT_EQ(kld_record_words(1), 6u);
}

TEST(KldFile, EncodesHandCheckedRow) {
    // max 1, min -20 clamped to 1 - 16 = -15: -16 and -20 are at the floor (q = 0), 1 is the top
    // (q = 65535), 0 sits 15/16 of the way up.
    const std::vector<float> logits = {0.0f, -16.0f, -20.0f, 1.0f};
    std::vector<uint16_t> rec(kld_record_words(4));
    encode_kld_record(logits, rec);
    EXPECT_FLOAT_EQ(kld_record_scale(rec), 16.0f / 65535.0f);
    const double lse = 1.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-17.0) + std::exp(-21.0));
    EXPECT_NEAR(kld_record_min_log_prob(rec), -15.0 - lse, 1e-5);
    EXPECT_EQ(rec[4 + 3], 65535);
    EXPECT_NEAR(rec[4 + 0], 65535.0 * 15.0 / 16.0, 1.0);
    EXPECT_EQ(rec[4 + 1], 0);
    EXPECT_EQ(rec[4 + 2], 0);

    std::vector<float> logp;
    decode_kld_record(rec, 4, logp);
    EXPECT_NEAR(logp[3], 1.0 - lse, 1e-4);
    EXPECT_NEAR(logp[0], 0.0 - lse, 2.5e-4);
    EXPECT_FLOAT_EQ(logp[1], kld_record_min_log_prob(rec));  // floor, not the true -16 - lse
}

TEST(KldFile, EncodesFlatRowAsZeroScale) {
    const std::vector<float> logits(6, 3.5f);
    std::vector<uint16_t> rec(kld_record_words(6), 0xffff);
    encode_kld_record(logits, rec);
    EXPECT_EQ(kld_record_scale(rec), 0.0f);
    EXPECT_NEAR(kld_record_min_log_prob(rec), -std::log(6.0), 1e-6);
    for (size_t i = 4; i < rec.size(); ++i) EXPECT_EQ(rec[i], 0) << i;
}

TEST(KldFile, WritesAndReadsBack) {
    test::TempDir dir;
    const std::string path = dir.file("small.kld");
    const SmallFile f;
    auto written = f.write(path);
    ASSERT_TRUE(written.ok()) << written.error().message;
    EXPECT_FALSE(fs::exists(path + ".partial"));
    const uint64_t words = kld_record_words(SmallFile::n_vocab);
    EXPECT_EQ(fs::file_size(path), 20u + 4u * 16u + 6u * 2u * words);

    auto r = KldReader::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const KldHeader& h = r->header();
    EXPECT_EQ(h.n_ctx, 8);
    EXPECT_EQ(h.n_vocab, 5);
    EXPECT_EQ(h.n_chunk, 2);
    EXPECT_EQ(h.records_per_chunk(), 3);
    EXPECT_EQ(h.tokens, f.tokens);
    EXPECT_EQ(h.next_token(1, 2), f.tokens[8 + 4 + 2 + 1]);

    std::vector<float> logp, expect;
    for (int32_t c = 0; c < 2; ++c) {
        for (int32_t j = 0; j < 3; ++j) {
            ASSERT_TRUE(r->read_record(c, j, logp).ok());
            const auto& row = f.rows[static_cast<size_t>(c * 3 + j)];
            log_softmax(row, expect);
            const float top = *std::max_element(row.begin(), row.end());
            for (size_t i = 0; i < logp.size(); ++i) {
                if (row[i] > top - 16.0f) {
                    EXPECT_NEAR(logp[i], expect[i], 1.3e-4) << c << "/" << j << "/" << i;
                } else {
                    EXPECT_GE(logp[i], expect[i]);  // floor entries are raised to the floor
                }
            }
        }
    }
    auto bad = r->read_record(2, 0, logp);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("no record 0 in chunk 2"), std::string::npos);
}

TEST(KldFile, WriterRefusesWrongInput) {
    test::TempDir dir;
    const std::string path = dir.file("w.kld");
    const SmallFile f;
    EXPECT_FALSE(KldWriter::create(path, 8, 5, 2, std::vector<int32_t>(15)).ok());
    EXPECT_FALSE(KldWriter::create(path, 2, 5, 1, std::vector<int32_t>(2)).ok());
    {
        auto w = KldWriter::create(path, 8, 5, 2, f.tokens);
        ASSERT_TRUE(w.ok());
        EXPECT_TRUE(fs::exists(path + ".partial"));
        EXPECT_FALSE(w->append(std::vector<float>(4, 0.0f)).ok());  // wrong row length
        EXPECT_FALSE(fs::exists(path + ".partial"));  // a failed writer discards its file
        EXPECT_FALSE(w->append(f.rows[0]).ok());
    }
    {
        auto w = KldWriter::create(path, 8, 5, 2, f.tokens);
        ASSERT_TRUE(w.ok());
        std::vector<float> row = f.rows[0];
        row[2] = std::numeric_limits<float>::quiet_NaN();
        auto r = w->append(row);
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("non-finite"), std::string::npos);
    }
    {
        auto w = KldWriter::create(path, 8, 5, 2, f.tokens);
        ASSERT_TRUE(w.ok());
        for (int i = 0; i < 5; ++i) ASSERT_TRUE(w->append(f.rows[static_cast<size_t>(i)]).ok());
        auto r = w->finish();
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("only 5 of 6 records"), std::string::npos);
    }
    {
        auto w = KldWriter::create(path, 8, 5, 2, f.tokens);
        ASSERT_TRUE(w.ok());
        for (const auto& row : f.rows) ASSERT_TRUE(w->append(row).ok());
        EXPECT_FALSE(w->append(f.rows[0]).ok());  // one too many
    }
    {
        auto w = KldWriter::create(path, 8, 5, 2, f.tokens);
        ASSERT_TRUE(w.ok());
        ASSERT_TRUE(w->append(f.rows[0]).ok());
    }  // destroyed unfinished
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(fs::exists(path + ".partial"));
}

// Damages a good file in one way and expects open() to fail naming the file and the problem.
void expect_open_error(const std::string& path, const std::vector<char>& bytes,
                       const std::string& what) {
    write_bytes(path, bytes);
    auto r = KldReader::open(path);
    ASSERT_FALSE(r.ok()) << "no error for: " << what;
    EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
}

TEST(KldFile, ReaderRejectsDamagedFiles) {
    test::TempDir dir;
    const std::string good = dir.file("good.kld");
    ASSERT_TRUE(SmallFile().write(good).ok());
    const std::vector<char> bytes = read_bytes(good);
    const std::string bad = dir.file("bad.kld");

    EXPECT_FALSE(KldReader::open(dir.file("missing.kld")).ok());
    expect_open_error(bad, {bytes.begin(), bytes.begin() + 12}, "too short");
    std::vector<char> b = bytes;
    b[0] = 'X';
    expect_open_error(bad, b, "_logits_");
    expect_open_error(bad, {bytes.begin(), bytes.end() - 1}, "truncated");
    expect_open_error(bad, {bytes.begin(), bytes.end() - 20}, "5 of 6 records complete");
    expect_open_error(bad, {bytes.begin(), bytes.begin() + 40}, "not even all the tokens");
    b = bytes;
    b.push_back(0);
    expect_open_error(bad, b, "1 unexpected bytes");
    b = bytes;
    poke<int32_t>(b, 12, std::numeric_limits<int32_t>::max());  // absurd n_vocab
    expect_open_error(bad, b, "truncated");
    b = bytes;
    poke<int32_t>(b, 8, std::numeric_limits<int32_t>::max());  // absurd n_ctx and n_chunk
    poke<int32_t>(b, 16, std::numeric_limits<int32_t>::max());
    expect_open_error(bad, b, "truncated");
    b = bytes;
    poke<int32_t>(b, 8, -5);
    expect_open_error(bad, b, "corrupt header");
    b = bytes;
    poke<int32_t>(b, 20 + 4 * 3, 5);  // token id 5 in a 5-token vocabulary
    expect_open_error(bad, b, "outside the vocabulary");

    b = bytes;  // a record whose scale is NaN opens, but that record does not decode
    const size_t rec1 = 20 + 4 * 16 + 2 * kld_record_words(5);
    poke<float>(b, rec1, std::numeric_limits<float>::quiet_NaN());
    write_bytes(bad, b);
    auto r = KldReader::open(bad);
    ASSERT_TRUE(r.ok());
    std::vector<float> logp;
    EXPECT_TRUE(r->read_record(0, 0, logp).ok());
    auto rr = r->read_record(0, 1, logp);
    ASSERT_FALSE(rr.ok());
    EXPECT_NE(rr.error().message.find("record 1 of chunk 0 is corrupt"), std::string::npos);
}

// Decoding a llama.cpp record and encoding the log-probs again must give back its q values:
// log-softmax only shifts a row, and the encoder depends only on differences to the row's top
// and floor. Decoded values are |y| < 32 (at most 16 + ln n_vocab below 0), so each sits on its
// grid point up to float rounding of 1.9e-6 nats = 0.008 steps of 2.4e-4; the re-derived floor
// and scale can differ from the originals by a few ulps (relative 1e-7, < 0.01 steps at
// q = 65535). Each value lands within ~0.02 of its original integer, far from the 0.5 where
// rounding would flip: identity is expected (measured: every q and every scale identical).
TEST(KldFileGolden, ReencodingReproducesLlamaCppRecords) {
    STRATA_REQUIRE_TESTDATA();
    const fs::path dir = test::testdata_dir() / "golden" / "logits";
    size_t files = 0, records = 0, values = 0, differing = 0;
    int max_diff = 0;
    double max_scale_rel = 0.0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".kld") continue;
        auto r = KldReader::open(entry.path().string());
        ASSERT_TRUE(r.ok()) << r.error().message;
        const KldHeader& h = r->header();
        ++files;
        std::vector<uint16_t> raw, again(kld_record_words(h.n_vocab));
        std::vector<float> logp;
        for (int32_t c = 0; c < h.n_chunk; ++c) {
            for (int32_t j = 0; j < h.records_per_chunk(); ++j) {
                ASSERT_TRUE(r->read_raw(c, j, raw).ok());
                ASSERT_TRUE(r->read_record(c, j, logp).ok());
                encode_kld_record(logp, again);
                ++records;
                const double s0 = kld_record_scale(raw), s1 = kld_record_scale(again);
                max_scale_rel = std::max(max_scale_rel, std::abs(s1 - s0) / s0);
                for (int32_t i = 0; i < h.n_vocab; ++i) {
                    const int d = std::abs(int{raw[4 + i]} - int{again[4 + i]});
                    ++values;
                    if (d) ++differing;
                    max_diff = std::max(max_diff, d);
                }
            }
        }
    }
    std::printf(
        "re-encoded %zu files, %zu records, %zu values: %zu differ, max |dq| %d, "
        "max relative scale change %.3g\n",
        files, records, values, differing, max_diff, max_scale_rel);
    EXPECT_EQ(files, 30u);
    EXPECT_LE(max_diff, 1);
    EXPECT_EQ(differing, 0u);
}

// The writer end to end: a file streamed from a golden file's decoded rows has the same header,
// tokens, scales and q values byte for byte. Only min_log_prob may move, since the floor
// entries now carry the floor's mass in the log-sum-exp: by < n_vocab * e^-16 nats.
TEST(KldFileGolden, WriterRebuildsAGoldenFile) {
    STRATA_REQUIRE_TESTDATA();
    const std::string src =
        (test::testdata_dir() / "golden/logits/aidreams260K-Q4_K_M.kld").string();
    auto r = KldReader::open(src);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const KldHeader& h = r->header();
    test::TempDir dir;
    const std::string out = dir.file("again.kld");
    {
        auto w = KldWriter::create(out, h.n_ctx, h.n_vocab, h.n_chunk, h.tokens);
        ASSERT_TRUE(w.ok()) << w.error().message;
        std::vector<float> logp;
        for (int32_t c = 0; c < h.n_chunk; ++c) {
            for (int32_t j = 0; j < h.records_per_chunk(); ++j) {
                ASSERT_TRUE(r->read_record(c, j, logp).ok());
                ASSERT_TRUE(w->append(logp).ok());
            }
        }
        auto done = w->finish();
        ASSERT_TRUE(done.ok()) << done.error().message;
    }
    const std::vector<char> a = read_bytes(src), b = read_bytes(out);
    ASSERT_EQ(a.size(), b.size());
    const size_t records = 20 + 4 * h.tokens.size();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), records), 0) << "header or tokens differ";
    const size_t rec_bytes = 2 * kld_record_words(h.n_vocab);
    float max_shift = 0.0f;
    for (size_t off = records; off < a.size(); off += rec_bytes) {
        EXPECT_EQ(std::memcmp(a.data() + off, b.data() + off, 4), 0) << "scale at " << off;
        EXPECT_EQ(std::memcmp(a.data() + off + 8, b.data() + off + 8, rec_bytes - 8), 0)
            << "q values at " << off;
        float m0, m1;
        std::memcpy(&m0, a.data() + off + 4, 4);
        std::memcpy(&m1, b.data() + off + 4, 4);
        max_shift = std::max(max_shift, std::abs(m1 - m0));
    }
    std::printf("rewritten file: max min_log_prob shift %.3g nats\n", max_shift);
    EXPECT_LT(max_shift, 512 * std::exp(-16.0f) + 1e-5f);
}

}  // namespace
}  // namespace strata
