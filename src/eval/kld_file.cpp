#include "eval/kld_file.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

namespace strata {

static_assert(std::endian::native == std::endian::little,
              ".kld files are little-endian and read by memcpy");

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr uint64_t kHeaderBytes = 8 + 3 * 4;
// Logits further than this below the top are not resolved (llama.cpp's constant).
constexpr float kFloorNats = 16.0f;

std::string str(uint64_t v) {
    return std::to_string(v);
}

float float_at(std::span<const uint16_t> record, size_t word) {
    float f;
    std::memcpy(&f, record.data() + word, sizeof f);
    return f;
}

}  // namespace

size_t kld_record_words(int32_t n_vocab) {
    return 2 * ((static_cast<size_t>(n_vocab) + 1) / 2) + 4;
}

float kld_record_scale(std::span<const uint16_t> record) {
    return float_at(record, 0);
}
float kld_record_min_log_prob(std::span<const uint16_t> record) {
    return float_at(record, 2);
}

// Every operation below is llama.cpp's, in its order and precision (float logits, float expf
// terms summed in double, the log-sum-exp rounded to float), so that the same logits give the
// same bytes. Rounding is to nearest, ties to even, which is what llama.cpp's nearest_int()
// (adding 1.5 * 2^23) does. It cannot exceed 65535 in practice (the largest value is
// (max - min) / scale = 65535 up to a few float ulps); the clamp only makes that explicit.
void encode_kld_record(std::span<const float> logits, std::span<uint16_t> record) {
    const size_t n = logits.size();
    assert(n > 0 && record.size() == kld_record_words(static_cast<int32_t>(n)));
    float max_logit = logits[0];
    float min_logit = logits[0];
    for (size_t i = 1; i < n; ++i) {
        max_logit = std::max(max_logit, logits[i]);
        min_logit = std::min(min_logit, logits[i]);
    }
    min_logit = std::max(min_logit, max_logit - kFloorNats);
    double sum_exp = 0.0;
    for (size_t i = 0; i < n; ++i) sum_exp += std::exp(logits[i] - max_logit);
    const float log_sum_exp = static_cast<float>(std::log(sum_exp));
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.0f;
    std::memcpy(record.data(), &scale, sizeof scale);
    std::memcpy(record.data() + 2, &min_log_prob, sizeof min_log_prob);

    uint16_t* q = record.data() + 4;
    std::fill(q, record.data() + record.size(), uint16_t{0});  // also the padding word
    if (scale == 0.0f) return;                                 // all logits equal
    const float inv_scale = 1.0f / scale;
    for (size_t i = 0; i < n; ++i) {
        if (!(logits[i] > min_logit)) continue;
        const float v = std::nearbyint(inv_scale * (logits[i] - min_logit));
        q[i] = static_cast<uint16_t>(std::min(v, 65535.0f));
    }
}

void decode_kld_record(std::span<const uint16_t> record, int32_t n_vocab,
                       std::vector<float>& logp) {
    const float scale = kld_record_scale(record);
    const float min_log_prob = kld_record_min_log_prob(record);
    logp.resize(static_cast<size_t>(n_vocab));
    for (size_t i = 0; i < logp.size(); ++i) logp[i] = scale * record[4 + i] + min_log_prob;
}

// ---- writer ----

Result<KldWriter> KldWriter::create(const std::string& path, int32_t n_ctx, int32_t n_vocab,
                                    int32_t n_chunk, std::span<const int32_t> tokens) {
    if (n_ctx < 3) {
        return err(path, ": n_ctx ", std::to_string(n_ctx),
                   " scores no position (a chunk needs at least 3 tokens)");
    }
    if (n_vocab < 1) return err(path, ": n_vocab must be positive, not ", std::to_string(n_vocab));
    if (n_chunk < 1) return err(path, ": n_chunk must be positive, not ", std::to_string(n_chunk));
    const uint64_t n_tokens = static_cast<uint64_t>(n_ctx) * static_cast<uint64_t>(n_chunk);
    if (tokens.size() != n_tokens) {
        return err(path, ": ", str(tokens.size()), " tokens given, but ", std::to_string(n_chunk),
                   " chunks of ", std::to_string(n_ctx), " need ", str(n_tokens));
    }

    KldWriter w;
    w.path_ = path;
    w.tmp_path_ = path + ".partial";
    w.n_vocab_ = n_vocab;
    w.expected_ = static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(n_ctx - 1 - n_ctx / 2);
    w.record_.resize(kld_record_words(n_vocab));
    w.file_ = std::fopen(w.tmp_path_.c_str(), "wb");
    if (!w.file_) return err(w.tmp_path_, ": cannot create: ", std::strerror(errno));

    const int32_t dims[3] = {n_ctx, n_vocab, n_chunk};
    bool ok = std::fwrite(kMagic, 1, sizeof kMagic, w.file_) == sizeof kMagic;
    ok = ok && std::fwrite(dims, sizeof dims[0], 3, w.file_) == 3;
    ok = ok && std::fwrite(tokens.data(), sizeof tokens[0], tokens.size(), w.file_) == n_tokens;
    if (!ok) {
        const int e = errno;
        w.discard();
        return err(path + ".partial", ": write failed: ", std::strerror(e));
    }
    return w;
}

KldWriter::KldWriter(KldWriter&& other) noexcept {
    *this = std::move(other);
}

KldWriter& KldWriter::operator=(KldWriter&& other) noexcept {
    if (this != &other) {
        discard();
        path_ = std::move(other.path_);
        tmp_path_ = std::move(other.tmp_path_);
        file_ = std::exchange(other.file_, nullptr);
        n_vocab_ = other.n_vocab_;
        written_ = other.written_;
        expected_ = other.expected_;
        record_ = std::move(other.record_);
    }
    return *this;
}

KldWriter::~KldWriter() {
    discard();
}

void KldWriter::discard() {
    if (!file_) return;
    std::fclose(file_);
    file_ = nullptr;
    std::remove(tmp_path_.c_str());
}

Result<void> KldWriter::fail(Error e) {
    discard();
    return e;
}

Result<void> KldWriter::append(std::span<const float> logits_row) {
    if (!file_) return err(path_, ": the writer is finished or failed; nothing more can be added");
    if (logits_row.size() != static_cast<size_t>(n_vocab_)) {
        return fail(err(path_, ": a logit row has ", str(logits_row.size()),
                        " values, the file's n_vocab is ", std::to_string(n_vocab_)));
    }
    if (written_ == expected_) {
        return fail(err(path_, ": more records than the header's ", str(expected_)));
    }
    for (size_t i = 0; i < logits_row.size(); ++i) {
        if (!std::isfinite(logits_row[i])) {
            return fail(err(path_, ": record ", str(written_), " has a non-finite logit (",
                            std::to_string(logits_row[i]), ") for token ", str(i)));
        }
    }
    encode_kld_record(logits_row, record_);
    if (std::fwrite(record_.data(), sizeof record_[0], record_.size(), file_) != record_.size()) {
        return fail(err(tmp_path_, ": write failed: ", std::strerror(errno)));
    }
    ++written_;
    return {};
}

Result<void> KldWriter::finish() {
    if (!file_) return err(path_, ": the writer is finished or failed");
    if (written_ != expected_) {
        return fail(err(path_, ": only ", str(written_), " of ", str(expected_),
                        " records were written; the file was discarded"));
    }
    const bool flushed = std::fflush(file_) == 0;
    const int e = errno;
    const bool closed = std::fclose(std::exchange(file_, nullptr)) == 0;
    if (!flushed || !closed) {
        std::remove(tmp_path_.c_str());
        return err(tmp_path_, ": write failed: ", std::strerror(flushed ? errno : e));
    }
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
        const int re = errno;
        std::remove(tmp_path_.c_str());
        return err(path_, ": cannot move ", tmp_path_, " into place: ", std::strerror(re));
    }
    return {};
}

// ---- reader ----

Result<KldReader> KldReader::open(const std::string& path) {
    KldReader r;
    STRATA_ASSIGN(r.source_, FileSource::open(path));
    const uint64_t size = r.source_->size();
    if (size < kHeaderBytes) {
        return err(path, ": too short for a .kld header (", str(size), " bytes, the header is ",
                   str(kHeaderBytes), ")");
    }
    char magic[8];
    int32_t dims[3];
    STRATA_TRY(r.source_->read_at(0, magic, sizeof magic));
    if (std::memcmp(magic, kMagic, sizeof magic) != 0) {
        return err(path,
                   ": not a llama.cpp logits file (.kld): it does not start with "
                   "\"_logits_\"");
    }
    STRATA_TRY(r.source_->read_at(8, dims, sizeof dims));
    KldHeader& h = r.header_;
    h.n_ctx = dims[0];
    h.n_vocab = dims[1];
    h.n_chunk = dims[2];
    const std::string shape = "n_ctx " + std::to_string(h.n_ctx) + ", n_vocab " +
                              std::to_string(h.n_vocab) + ", n_chunk " + std::to_string(h.n_chunk);
    if (h.n_ctx < 3 || h.n_vocab < 1 || h.n_chunk < 1) {
        return err(path, ": corrupt header (", shape,
                   "): n_ctx must be at least 3, n_vocab and "
                   "n_chunk at least 1");
    }

    // Sizes in 64 bits with overflow checks: absurd headers must fail here, not in an allocation.
    const uint64_t n_tokens = static_cast<uint64_t>(h.n_ctx) * static_cast<uint64_t>(h.n_chunk);
    const uint64_t n_records = static_cast<uint64_t>(h.n_chunk) * h.records_per_chunk();
    const uint64_t record_bytes = 2 * kld_record_words(h.n_vocab);
    uint64_t records_bytes = 0, expected = 0;
    const bool overflow =
        __builtin_mul_overflow(n_records, record_bytes, &records_bytes) ||
        __builtin_add_overflow(kHeaderBytes + 4 * n_tokens, records_bytes, &expected);
    if (overflow || expected > size) {
        const uint64_t available = size - std::min(size, kHeaderBytes + 4 * n_tokens);
        return err(path, ": truncated or corrupt: the header (", shape, ") needs ",
                   overflow ? std::string("more than 2^64") : str(expected),
                   " bytes, the file has ", str(size),
                   size < kHeaderBytes + 4 * n_tokens
                       ? " (not even all the tokens)"
                       : " (" + str(available / record_bytes) + " of " + str(n_records) +
                             " records complete)");
    }
    if (expected < size) {
        return err(path, ": ", str(size - expected), " unexpected bytes after the last record (",
                   shape, " needs ", str(expected), " bytes)");
    }

    h.tokens.resize(n_tokens);
    STRATA_TRY(r.source_->read_at(kHeaderBytes, h.tokens.data(), 4 * n_tokens));
    for (size_t i = 0; i < h.tokens.size(); ++i) {
        if (h.tokens[i] < 0 || h.tokens[i] >= h.n_vocab) {
            return err(path, ": token ", str(i), " (chunk ", str(i / h.n_ctx), ") is id ",
                       std::to_string(h.tokens[i]), ", outside the vocabulary of ",
                       std::to_string(h.n_vocab));
        }
    }
    r.records_offset_ = kHeaderBytes + 4 * n_tokens;
    return r;
}

Result<void> KldReader::read_raw(int32_t chunk, int32_t j, std::vector<uint16_t>& words) const {
    const KldHeader& h = header_;
    if (chunk < 0 || chunk >= h.n_chunk || j < 0 || j >= h.records_per_chunk()) {
        return err(path(), ": no record ", std::to_string(j), " in chunk ", std::to_string(chunk),
                   " (", std::to_string(h.n_chunk), " chunks of ",
                   std::to_string(h.records_per_chunk()), " records)");
    }
    words.resize(kld_record_words(h.n_vocab));
    const uint64_t index = static_cast<uint64_t>(chunk) * h.records_per_chunk() + j;
    return source_->read_at(records_offset_ + index * 2 * words.size(), words.data(),
                            2 * words.size());
}

Result<void> KldReader::read_record(int32_t chunk, int32_t j, std::vector<float>& logp) const {
    std::vector<uint16_t> words;
    STRATA_TRY(read_raw(chunk, j, words));
    const float scale = kld_record_scale(words);
    const float min_log_prob = kld_record_min_log_prob(words);
    // A valid record has a finite scale >= 0 and min_log_prob <= 0 (a log-probability).
    if (!(scale >= 0.0f && std::isfinite(scale)) ||
        !(min_log_prob <= 0.0f && std::isfinite(min_log_prob))) {
        return err(path(), ": record ", std::to_string(j), " of chunk ", std::to_string(chunk),
                   " is corrupt (scale ", std::to_string(scale), ", min_log_prob ",
                   std::to_string(min_log_prob), ")");
    }
    decode_kld_record(words, header_.n_vocab, logp);
    return {};
}

}  // namespace strata
