// libFuzzer target for the GGUF reader. Whatever the input, read_gguf must return either a
// GgufFile that keeps the reader's promises (every tensor inside the file, aligned, sized from its
// shape and type, indexes consistent) or a one-line error that starts with the file name, and
// never crash, hang, invoke undefined behaviour or allocate out of proportion to the input (the
// sanitizers and libFuzzer's -rss_limit_mb / -malloc_limit_mb catch those).
//
// Each input is read twice: as a file of exactly its bytes, and as the first bytes of a 1 TiB file
// that is zero after them, under a small memory budget. The second reading reaches what a small
// input cannot: tensor data lying inside the file (the inputs are headers cut from real models),
// and counts that pass every "fits in the bytes left" check and are stopped only by the budget.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "util/file.h"

namespace {

using strata::ByteSource;
using strata::GgufFile;
using strata::Result;

#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            std::fprintf(stderr, "gguf_reader_fuzz: check failed at line %d: %s\n", __LINE__, \
                         #cond);                                                              \
            std::abort();                                                                     \
        }                                                                                     \
    } while (0)

// `size` bytes: the input, then zeros.
class ZeroExtendedSource final : public ByteSource {
  public:
    ZeroExtendedSource(const uint8_t* data, size_t n, uint64_t size)
        : data_(data), n_(n), size_(size) {}
    uint64_t size() const override { return size_; }
    Result<void> read_at(uint64_t offset, void* dst, size_t n) const override {
        FUZZ_CHECK(offset <= size_ && n <= size_ - offset);  // the reader checks before reading
        std::memset(dst, 0, n);
        if (offset < n_) {
            const size_t take = static_cast<size_t>(std::min<uint64_t>(n, n_ - offset));
            std::memcpy(dst, data_ + offset, take);
        }
        return {};
    }
    const std::string& name() const override { return name_; }

  private:
    const uint8_t* data_;
    size_t n_;
    uint64_t size_;
    std::string name_ = "huge.gguf";
};

void check_error(const std::string& message, const std::string& file_name) {
    FUZZ_CHECK(message.rfind(file_name + ": ", 0) == 0);
    FUZZ_CHECK(message.find('\n') == std::string::npos);
    FUZZ_CHECK(message.size() < 2048);  // names and values are shortened in messages
}

// `to_json`: also build the JSON form (costly under the sanitizers, so done on one reading only).
void check_file(const GgufFile& f, uint64_t file_size, bool to_json) {
    FUZZ_CHECK(f.version == 2 || f.version == 3);
    FUZZ_CHECK(f.file_size == file_size);
    FUZZ_CHECK(f.alignment > 0 && (f.alignment & (f.alignment - 1)) == 0);
    FUZZ_CHECK(f.data_offset % f.alignment == 0);
    for (const auto& t : f.tensors) {
        FUZZ_CHECK(t.n_dims <= static_cast<uint32_t>(strata::kMaxTensorDims));
        const auto info = strata::tensor_type_info(t.type);
        FUZZ_CHECK(info.has_value());
        FUZZ_CHECK(t.shape[0] % info->block_size == 0);
        FUZZ_CHECK(t.n_bytes == t.n_elements() / info->block_size * info->type_size);
        FUZZ_CHECK(t.offset >= f.data_offset);
        FUZZ_CHECK((t.offset - f.data_offset) % f.alignment == 0);
        FUZZ_CHECK(t.offset <= file_size && t.n_bytes <= file_size - t.offset);
        FUZZ_CHECK(f.find_tensor(t.name) == &t);
        (void)t.shape_string();
    }
    // No two tensors share a byte.
    std::vector<const strata::TensorInfo*> by_offset;
    for (const auto& t : f.tensors) {
        if (t.n_bytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        FUZZ_CHECK(by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes <= by_offset[i]->offset);
    }
    for (const auto& e : f.metadata) {
        FUZZ_CHECK(f.find(e.key) == &e.value);
        // What `inspect` prints: the short form and the full JSON form.
        (void)e.value.to_display();
        if (to_json) {
            nlohmann::json j;
            strata::to_json(j, e.value);
            (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    {
        strata::MemorySource src(data, size, "fuzz.gguf");
        auto f = strata::read_gguf(src);
        if (f.ok()) {
            check_file(*f, size, true);
        } else {
            check_error(f.error().message, src.name());
        }
    }
    {
        constexpr uint64_t kHugeFile = uint64_t{1} << 40;
        ZeroExtendedSource src(data, size, kHugeFile);
        strata::GgufReadLimits limits;
        limits.max_header_memory = 4 << 20;
        auto f = strata::read_gguf(src, limits);
        if (f.ok()) {
            check_file(*f, kHugeFile, false);
        } else {
            check_error(f.error().message, src.name());
        }
    }
    return 0;
}
