#include "store/coactivation.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "util/file.h"

namespace strata {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'E', 'X'};
constexpr uint32_t kVersion = 1;

struct Fnv {
    uint64_t h = 1469598103934665603ull;
    void add(const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) {
            h ^= b[i];
            h *= 1099511628211ull;
        }
    }
    template <typename T>
    void add(const T& v) {
        add(&v, sizeof v);
    }
};

struct Header {
    char magic[8];
    uint32_t version;
    uint32_t n_layer;
    uint64_t identity;
    uint32_t n_expert;
    uint32_t reserved;
    uint64_t tokens;
    uint64_t checksum;  // of the counts that follow
};

}  // namespace

uint64_t model_identity(const ModelInfo& info) {
    Fnv f;
    f.add(info.file.file_size);
    // Samples of the weights, so that files of the same shape with other weights differ.
    if (auto src = FileSource::open(info.file.path)) {
        const uint64_t size = info.file.file_size, data = info.file.data_offset;
        std::vector<char> sample(4096);
        for (uint64_t at : {data, data + (size - data) / 2, size > 4096 ? size - 4096 : 0}) {
            const size_t n = size_t(std::min<uint64_t>(sample.size(), size - std::min(at, size)));
            if (n > 0 && (*src)->read_at(at, sample.data(), n)) f.add(sample.data(), n);
        }
    }
    for (const TensorInfo& t : info.file.tensors) {
        f.add(t.name.data(), t.name.size());
        f.add(t.type);
        f.add(t.offset);
        f.add(t.n_bytes);
        for (uint64_t d : t.shape) f.add(d);
    }
    return f.h;
}

std::string expert_statistics_path(const std::string& cache_dir, const ModelInfo& info) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(model_identity(info)));
    return cache_dir + "/experts-" + hex + ".stats";
}

void CoactivationStats::reset(int n_layer, int n_expert) {
    n_layer_ = n_layer;
    n_expert_ = n_expert;
    tokens_ = 0;
    freq_.assign(size_t(n_layer) * size_t(n_expert), 0);
    pairs_.assign(n_layer > 1 ? size_t(n_layer - 1) * size_t(n_expert) * size_t(n_expert) : 0, 0);
    last_.clear();
    last_layer_ = -1;
}

void CoactivationStats::bump_pair(int layer, int a, int b) {
    uint16_t& c = pair(layer, a, b);
    if (c == UINT16_MAX) {  // halve the row so the counts keep their proportions
        for (int j = 0; j < n_expert_; ++j) pair(layer, a, j) /= 2;
    }
    ++c;
}

void CoactivationStats::record(int layer, std::span<const int32_t> choices, int k) {
    if (layer < 0 || layer >= n_layer_ || k <= 0) return;
    const size_t n = choices.size() / size_t(k);
    for (int32_t e : choices) {
        if (e >= 0 && e < n_expert_) ++freq_[size_t(layer) * size_t(n_expert_) + size_t(e)];
    }
    if (layer == 0) tokens_ += n;
    if (layer > 0 && last_layer_ == layer - 1 && last_k_ == k && last_.size() == choices.size()) {
        for (size_t t = 0; t < n; ++t) {
            for (int i = 0; i < k; ++i) {
                const int32_t a = last_[t * size_t(k) + size_t(i)];
                if (a < 0 || a >= n_expert_) continue;
                for (int j = 0; j < k; ++j) {
                    const int32_t b = choices[t * size_t(k) + size_t(j)];
                    if (b >= 0 && b < n_expert_) bump_pair(layer, a, b);
                }
            }
        }
    }
    last_.assign(choices.begin(), choices.end());
    last_layer_ = layer;
    last_k_ = k;
}

std::vector<int32_t> CoactivationStats::predict(int layer, std::span<const int32_t> previous,
                                                size_t count) const {
    Prediction p;
    predict(layer, previous, count, p);
    return std::move(p.experts);
}

void CoactivationStats::predict(int layer, std::span<const int32_t> previous, size_t count,
                                Prediction& out) const {
    out.experts.clear();
    if (layer <= 0 || layer >= n_layer_ || count == 0) return;
    std::vector<uint64_t>& score = out.score;
    score.assign(static_cast<size_t>(n_expert_), 0);
    for (int32_t a : previous) {
        if (a < 0 || a >= n_expert_) continue;
        for (int b = 0; b < n_expert_; ++b) score[size_t(b)] += pair(layer, a, b);
    }
    std::vector<int32_t>& order = out.order;
    order.resize(static_cast<size_t>(n_expert_));
    std::iota(order.begin(), order.end(), 0);
    const size_t m = std::min(count, order.size());
    std::partial_sort(
        order.begin(), order.begin() + long(m), order.end(), [&](int32_t x, int32_t y) {
            return score[size_t(x)] != score[size_t(y)] ? score[size_t(x)] > score[size_t(y)]
                                                        : x < y;
        });
    for (size_t i = 0; i < m && score[size_t(order[i])] > 0; ++i) out.experts.push_back(order[i]);
}

uint32_t CoactivationStats::frequency(int layer, int expert) const {
    if (layer < 0 || layer >= n_layer_ || expert < 0 || expert >= n_expert_) return 0;
    return freq_[size_t(layer) * size_t(n_expert_) + size_t(expert)];
}

std::vector<std::pair<int, int>> CoactivationStats::most_frequent(size_t count) const {
    std::vector<size_t> order(freq_.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t m = std::min(count, order.size());
    std::partial_sort(order.begin(), order.begin() + long(m), order.end(), [&](size_t x, size_t y) {
        return freq_[x] != freq_[y] ? freq_[x] > freq_[y] : x < y;
    });
    std::vector<std::pair<int, int>> out;
    for (size_t i = 0; i < m && freq_[order[i]] > 0; ++i) {
        out.push_back({int(order[i] / size_t(n_expert_)), int(order[i] % size_t(n_expert_))});
    }
    return out;
}

Result<void> CoactivationStats::save(const std::string& path, uint64_t identity) const {
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.version = kVersion;
    h.n_layer = uint32_t(n_layer_);
    h.identity = identity;
    h.n_expert = uint32_t(n_expert_);
    h.tokens = tokens_;
    Fnv f;
    f.add(freq_.data(), freq_.size() * sizeof(uint32_t));
    f.add(pairs_.data(), pairs_.size() * sizeof(uint16_t));
    h.checksum = f.h;
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(&h), sizeof h);
        out.write(reinterpret_cast<const char*>(freq_.data()),
                  std::streamsize(freq_.size() * sizeof(uint32_t)));
        out.write(reinterpret_cast<const char*>(pairs_.data()),
                  std::streamsize(pairs_.size() * sizeof(uint16_t)));
        out.flush();
        if (!out) {
            fs::remove(tmp, ec);
            return err("cannot write " + tmp + ": " + std::strerror(errno));
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) return err("cannot replace " + path + ": " + ec.message());
    return {};
}

Result<void> CoactivationStats::load(const std::string& path, uint64_t identity) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return err("cannot open " + path);
    Header h{};
    in.read(reinterpret_cast<char*>(&h), sizeof h);
    if (!in || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
        return err(path + " is not an expert statistics file");
    }
    if (h.version != kVersion) return err(path + " has version " + std::to_string(h.version));
    if (h.identity != identity) return err(path + " belongs to another model");
    if (int(h.n_layer) != n_layer_ || int(h.n_expert) != n_expert_) {
        return err(path + " has another shape (" + std::to_string(h.n_layer) + " layers x " +
                   std::to_string(h.n_expert) + " experts)");
    }
    std::vector<uint32_t> freq(freq_.size());
    std::vector<uint16_t> pairs(pairs_.size());
    in.read(reinterpret_cast<char*>(freq.data()), std::streamsize(freq.size() * sizeof(uint32_t)));
    in.read(reinterpret_cast<char*>(pairs.data()),
            std::streamsize(pairs.size() * sizeof(uint16_t)));
    if (!in || in.peek() != std::char_traits<char>::eof()) {
        return err(path + " is truncated or has trailing bytes");
    }
    Fnv f;
    f.add(freq.data(), freq.size() * sizeof(uint32_t));
    f.add(pairs.data(), pairs.size() * sizeof(uint16_t));
    if (f.h != h.checksum) return err(path + " is damaged (checksum mismatch)");
    freq_ = std::move(freq);
    pairs_ = std::move(pairs);
    tokens_ = h.tokens;
    return {};
}

}  // namespace strata
