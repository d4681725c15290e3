// llama.cpp's logit-dump format (".kld"): what `llama-perplexity --kl-divergence-base FILE`
// writes and `llama-perplexity --kl-divergence` reads back as the base model's distribution.
// strata reads these files to compare itself with llama.cpp, and writes them so that llama.cpp
// (or strata) can compare another run against strata.
//
// Layout, all little-endian:
//   char[8] "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk,
//   int32 tokens[n_chunk * n_ctx]          the text's ids, chunk after chunk, unreplaced by BOS
//   then per chunk n_ctx - 1 - n_ctx/2 records of kld_record_words(n_vocab) uint16 words:
//   float32 scale, float32 min_log_prob, uint16 q[n_vocab] (+1 padding word if n_vocab is odd).
// Record j of chunk c is the model's output at position n_ctx/2 + j, the prediction of token
// tokens[c*n_ctx + n_ctx/2 + j + 1]; log p[i] = scale * q[i] + min_log_prob.
//
// The encoding keeps 16 nats below the top logit: everything at or below that floor is q = 0,
// the rest is quantized linearly to 65535 steps (about 2.4e-4 nats each).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/file.h"
#include "util/result.h"

namespace strata {

struct KldHeader {
    int32_t n_ctx = 0;
    int32_t n_vocab = 0;
    int32_t n_chunk = 0;
    std::vector<int32_t> tokens;  // n_chunk * n_ctx original ids

    // Position of a chunk's first scored output (record 0).
    int32_t first() const { return n_ctx / 2; }
    int32_t records_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
    // The token record j of chunk c predicts.
    int32_t next_token(int32_t chunk, int32_t j) const {
        return tokens[static_cast<size_t>(chunk) * n_ctx + first() + j + 1];
    }
};

// uint16 words per record: 4 for the two floats, n_vocab rounded up to even.
size_t kld_record_words(int32_t n_vocab);

// Encodes one row of raw logits (any offset: only differences matter) into a record of
// kld_record_words(logits.size()) words, with llama.cpp's float arithmetic and rounding.
void encode_kld_record(std::span<const float> logits, std::span<uint16_t> record);
// Log-probabilities of a record: logp[i] = scale * q[i] + min_log_prob (float math, as llama.cpp).
void decode_kld_record(std::span<const uint16_t> record, int32_t n_vocab, std::vector<float>& logp);
// The two floats at the start of a record.
float kld_record_scale(std::span<const uint16_t> record);
float kld_record_min_log_prob(std::span<const uint16_t> record);

// Streams a .kld file: create() writes the header, append() one record per scored position in
// order (chunk by chunk, n_ctx - 1 - n_ctx/2 each), finish() checks the count and moves the file
// into place. Until then it lives at "<path>.partial", which is removed if the writer is
// destroyed unfinished or any step fails: a truncated file is never left under the final name.
class KldWriter {
  public:
    static Result<KldWriter> create(const std::string& path, int32_t n_ctx, int32_t n_vocab,
                                    int32_t n_chunk, std::span<const int32_t> tokens);

    KldWriter(KldWriter&& other) noexcept;
    KldWriter& operator=(KldWriter&& other) noexcept;
    KldWriter(const KldWriter&) = delete;
    KldWriter& operator=(const KldWriter&) = delete;
    ~KldWriter();

    // One row of n_vocab logits; non-finite values are refused.
    Result<void> append(std::span<const float> logits_row);
    Result<void> finish();

    uint64_t records_written() const { return written_; }
    uint64_t records_expected() const { return expected_; }

  private:
    KldWriter() = default;
    Result<void> fail(Error e);  // discards the partial file, returns e
    void discard();

    std::string path_, tmp_path_;
    std::FILE* file_ = nullptr;
    int32_t n_vocab_ = 0;
    uint64_t written_ = 0, expected_ = 0;
    std::vector<uint16_t> record_;
};

// Reads a .kld file. open() validates the magic, the header's sizes against the file size and
// every token id, so a record read afterwards can only fail on I/O or a corrupt record header.
class KldReader {
  public:
    static Result<KldReader> open(const std::string& path);

    const KldHeader& header() const { return header_; }
    const std::string& path() const { return source_->name(); }

    // The raw record words (kld_record_words(n_vocab)) of record j of chunk c.
    Result<void> read_raw(int32_t chunk, int32_t j, std::vector<uint16_t>& words) const;
    // The decoded log-probabilities (n_vocab values) of record j of chunk c.
    Result<void> read_record(int32_t chunk, int32_t j, std::vector<float>& logp) const;

  private:
    KldReader() = default;
    std::unique_ptr<FileSource> source_;
    KldHeader header_;
    uint64_t records_offset_ = 0;
};

}  // namespace strata
