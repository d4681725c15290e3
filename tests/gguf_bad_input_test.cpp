// The GGUF reader on corrupt, truncated and hostile input: every case must come back as an error
// that names the file and the specific problem, on one line, without crashing, hanging or
// allocating more than the file could justify. Files are built byte by byte in memory.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "test_support.h"
#include "util/file.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kTypeU8 = 0, kTypeU32 = 4, kTypeBool = 7, kTypeString = 8, kTypeArray = 9;
constexpr uint32_t kTypeF32Tensor = 0, kTypeQ4KTensor = 12;

// Little-endian GGUF bytes, appended field by field.
class GgufBytes {
  public:
    GgufBytes& raw(std::string_view s) {
        b_.append(s);
        return *this;
    }
    GgufBytes& u8(uint8_t x) { return pod(x); }
    GgufBytes& u32(uint32_t x) { return pod(x); }
    GgufBytes& u64(uint64_t x) { return pod(x); }
    GgufBytes& str(std::string_view s) { return u64(s.size()).raw(s); }
    GgufBytes& zeros(size_t n) {
        b_.append(n, '\0');
        return *this;
    }
    GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
    }
    GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(kTypeU32).u32(v); }
    GgufBytes& kv_string(std::string_view key, std::string_view v) {
        return str(key).u32(kTypeString).str(v);
    }
    GgufBytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                      uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(dims.size()));
        for (uint64_t d : dims) u64(d);
        return u32(type).u64(offset);
    }
    GgufBytes& pad_to(size_t alignment) {
        return zeros((alignment - b_.size() % alignment) % alignment);
    }

    const std::string& bytes() const { return b_; }
    size_t size() const { return b_.size(); }

  private:
    template <typename T>
    GgufBytes& pod(T x) {
        b_.append(reinterpret_cast<const char*>(&x), sizeof x);
        return *this;
    }
    std::string b_;
};

Result<GgufFile> read_bytes(const std::string& bytes, const GgufReadLimits& limits = {}) {
    MemorySource src(bytes.data(), bytes.size(), "bad.gguf");
    return read_gguf(src, limits);
}

// The error from reading `bytes`; fails the test if the file was accepted or the message is not
// one line starting with the file name.
std::string read_error(const std::string& bytes, const GgufReadLimits& limits = {}) {
    auto f = read_bytes(bytes, limits);
    if (f.ok()) {
        ADD_FAILURE() << "read_gguf accepted the file";
        return "";
    }
    const std::string& m = f.error().message;
    EXPECT_EQ(m.rfind("bad.gguf: ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
}

::testing::AssertionResult mentions(const std::string& message,
                                    std::initializer_list<std::string_view> parts) {
    for (std::string_view p : parts) {
        if (message.find(p) == std::string::npos) {
            return ::testing::AssertionFailure()
                   << "message does not mention \"" << p << "\": " << message;
        }
    }
    return ::testing::AssertionSuccess();
}

// A file of `size` bytes that begins with `head` and holds zeros after it, without using the
// memory: stands in for a multi-terabyte model whose header was corrupted.
class SparseSource final : public ByteSource {
  public:
    SparseSource(std::string head, uint64_t size) : head_(std::move(head)), size_(size) {}
    uint64_t size() const override { return size_; }
    Result<void> read_at(uint64_t offset, void* dst, size_t n) const override {
        if (offset > size_ || n > size_ - offset) return err(name_, ": read past the end");
        std::memset(dst, 0, n);
        if (offset < head_.size()) {
            std::memcpy(dst, head_.data() + offset, std::min<uint64_t>(n, head_.size() - offset));
        }
        return {};
    }
    const std::string& name() const override { return name_; }

  private:
    std::string head_;
    uint64_t size_;
    std::string name_ = "huge.gguf";
};

constexpr uint64_t kOneTiB = uint64_t{1} << 40;

std::string read_sparse_error(const std::string& head) {
    SparseSource src(head, kOneTiB);
    auto f = read_gguf(src);
    if (f.ok()) {
        ADD_FAILURE() << "read_gguf accepted the file";
        return "";
    }
    return f.error().message;
}

// --- Valid input --------------------------------------------------------------------------------

TEST(GgufBadInput, MinimalFileWithNoTensorsAndNoKeysReads) {
    for (uint32_t version : {2u, 3u}) {
        auto f = read_bytes(GgufBytes().header(0, 0, version).bytes());
        ASSERT_TRUE(f.ok()) << f.error().message;
        EXPECT_EQ(f->version, version);
        EXPECT_TRUE(f->tensors.empty());
        EXPECT_TRUE(f->metadata.empty());
        EXPECT_EQ(f->file_size, 24u);
    }
}

TEST(GgufBadInput, ArrayFillingTheFileExactlyReads) {
    // The count check must accept the largest count that fits, not only reject those that don't.
    GgufBytes b;
    b.header(0, 1).str("a").u32(kTypeArray).u32(kTypeU32).u64(3).u32(7).u32(8).u32(9);
    auto f = read_bytes(b.bytes());
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_NE(f->get_array("a"), nullptr);
    EXPECT_EQ(f->get_array("a")->items.size(), 3u);
}

// --- Not a GGUF file at all ---------------------------------------------------------------------

TEST(GgufBadInput, PathsThatAreNotRegularFiles) {
    test::TempDir tmp;
    const std::string missing = tmp.file("missing.gguf");
    auto f = read_gguf(missing);
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(mentions(f.error().message, {missing + ": cannot open", "No such file"}));

    f = read_gguf(tmp.path().string());
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(mentions(f.error().message, {tmp.path().string() + ": is a directory"}));

    f = read_gguf("/dev/null");  // a character device: size 0, but not an empty model file
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(mentions(f.error().message, {"/dev/null: is not a regular file"}));

    // Opening a FIFO must not wait for a writer.
    const std::string fifo = tmp.file("fifo.gguf");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    f = read_gguf(fifo);
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(mentions(f.error().message, {fifo + ": is not a regular file"}));
}

TEST(GgufBadInput, EmptyFile) {
    EXPECT_TRUE(mentions(read_error(""), {"empty", "0 bytes"}));
}

TEST(GgufBadInput, FileShorterThanHeader) {
    EXPECT_TRUE(mentions(read_error(GgufBytes().raw("GGUF").u32(3).bytes()),
                         {"only 8 bytes", "24-byte GGUF header", "truncated"}));
    EXPECT_TRUE(mentions(read_error("GG"), {"only 2 bytes", "truncated"}));
    const std::string header = GgufBytes().header(0, 0).bytes();
    EXPECT_TRUE(mentions(read_error(header.substr(0, 23)), {"only 23 bytes", "truncated"}));
}

TEST(GgufBadInput, WrongMagic) {
    std::string elf = GgufBytes()
                          .raw(
                              "\x7f"
                              "ELF")
                          .zeros(60)
                          .bytes();
    EXPECT_TRUE(mentions(read_error(elf), {"not a GGUF file", "\\x7fELF"}));
    EXPECT_TRUE(mentions(read_error("hi"), {"not a GGUF file", "\"hi\""}));
    EXPECT_TRUE(mentions(read_error(GgufBytes().raw("gguf").u32(3).zeros(16).bytes()),
                         {"not a GGUF file", "\"gguf\""}));
}

TEST(GgufBadInput, LegacyGgmlMagic) {
    // The legacy formats stored their magic as a little-endian u32.
    for (auto [stored, magic] : {std::pair{"lmgg", "ggml"}, {"fmgg", "ggmf"}, {"tjgg", "ggjt"}}) {
        const std::string m = read_error(GgufBytes().raw(stored).u32(1).zeros(32).bytes());
        EXPECT_TRUE(mentions(m, {"legacy GGML/GGJT", magic, "convert it to GGUF"}));
    }
}

TEST(GgufBadInput, GitLfsPointerAndHtmlPage) {
    EXPECT_TRUE(mentions(read_error("version https://git-lfs.github.com/spec/v1\noid sha256:"
                                    "0123\nsize 4096\n"),
                         {"Git LFS pointer", "not the model itself"}));
    EXPECT_TRUE(mentions(read_error("\n<!DOCTYPE html><html><body>404</body></html>"),
                         {"HTML page", "download"}));
}

// --- Header -------------------------------------------------------------------------------------

TEST(GgufBadInput, Version1) {
    EXPECT_TRUE(
        mentions(read_error(GgufBytes().header(0, 0, 1).bytes()), {"version 1 is obsolete"}));
}

TEST(GgufBadInput, UnknownVersion) {
    EXPECT_TRUE(mentions(read_error(GgufBytes().header(0, 0, 4).bytes()),
                         {"unknown GGUF version 4", "supported: 2 and 3"}));
    EXPECT_TRUE(
        mentions(read_error(GgufBytes().header(0, 0, 0).bytes()), {"unknown GGUF version 0"}));
}

TEST(GgufBadInput, BigEndianFile) {
    // Magic bytes are the same in both byte orders; the version field is not.
    GgufBytes b;
    b.raw("GGUF").raw(std::string("\0\0\0\3", 4)).zeros(16);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"big-endian", "little-endian"}));
}

TEST(GgufBadInput, AbsurdTensorCount) {
    for (uint64_t n : {uint64_t{1} << 62, UINT64_MAX, uint64_t{2}}) {
        const std::string m = read_error(GgufBytes().header(n, 0).zeros(24).bytes());
        EXPECT_TRUE(mentions(m, {"claims " + std::to_string(n) + " tensors", "corrupt"}));
    }
}

TEST(GgufBadInput, AbsurdMetadataCount) {
    for (uint64_t n : {uint64_t{1} << 60, UINT64_MAX, uint64_t{5}}) {
        const std::string m = read_error(GgufBytes().header(0, n).zeros(39).bytes());
        EXPECT_TRUE(mentions(m, {"claims " + std::to_string(n) + " metadata entries", "corrupt"}));
    }
}

// --- Metadata -----------------------------------------------------------------------------------

TEST(GgufBadInput, KeyLengthPastTheEnd) {
    for (uint64_t len : {uint64_t{1000}, UINT64_MAX, UINT64_MAX - 7}) {
        const std::string m = read_error(GgufBytes().header(0, 1).u64(len).zeros(13).bytes());
        EXPECT_TRUE(mentions(m, {"metadata entry 1 of 1", "key at byte 24",
                                 "claims a length of " + std::to_string(len)}));
    }
}

TEST(GgufBadInput, KeyLongerThanAnyRealKey) {
    GgufBytes b;
    b.header(0, 1).str(std::string(70000, 'k')).u32(kTypeU8).u8(0);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"key at byte 24 is 70000 bytes long"}));
}

TEST(GgufBadInput, StringValueLengthPastTheEnd) {
    for (uint64_t len : {uint64_t{100}, UINT64_MAX, UINT64_MAX - 3}) {
        GgufBytes b;
        b.header(0, 1).str("general.name").u32(kTypeString).u64(len).raw("abc");
        EXPECT_TRUE(mentions(read_error(b.bytes()), {"metadata key 'general.name'", "string value",
                                                     "claims a length of " + std::to_string(len)}));
    }
}

TEST(GgufBadInput, ArrayCountThatCannotFit) {
    // 2^40 u8 values claimed in a file of a few dozen bytes: must fail before allocating.
    GgufBytes b;
    b.header(0, 1).str("a").u32(kTypeArray).u32(kTypeU8).u64(uint64_t{1} << 40).zeros(8);
    EXPECT_TRUE(mentions(read_error(b.bytes()),
                         {"metadata key 'a'", "array of 1099511627776 u8 values cannot fit"}));
    // One more u32 than the bytes left can hold.
    GgufBytes c;
    c.header(0, 1).str("a").u32(kTypeArray).u32(kTypeU32).u64(3).u32(1).u32(2).u32(3).u8(0);
    auto last = c.bytes();
    last[last.size() - 21] = 4;  // the count, 3 -> 4 (count and 13 value bytes follow)
    EXPECT_TRUE(mentions(read_error(last), {"array of 4 u32 values cannot fit"}));
    // Strings take at least their 8-byte length each.
    GgufBytes d;
    d.header(0, 1).str("a").u32(kTypeArray).u32(kTypeString).u64(5).zeros(32);
    EXPECT_TRUE(mentions(read_error(d.bytes()), {"array of 5 string values cannot fit"}));
}

TEST(GgufBadInput, UnknownMetadataValueType) {
    for (uint32_t type : {13u, 1000u, UINT32_MAX}) {
        GgufBytes b;
        b.header(0, 1).str("a").u32(type).u64(0);
        EXPECT_TRUE(mentions(read_error(b.bytes()),
                             {"metadata key 'a'", "unknown value type " + std::to_string(type)}));
    }
}

TEST(GgufBadInput, UnknownArrayElementType) {
    GgufBytes b;
    b.header(0, 1).str("a").u32(kTypeArray).u32(13).u64(1).u64(0);
    EXPECT_TRUE(
        mentions(read_error(b.bytes()), {"metadata key 'a'", "unknown array element type 13"}));
}

TEST(GgufBadInput, ArraysNestedTooDeep) {
    // `levels` arrays, each holding the next; the innermost holds one u8.
    auto nested = [](int levels) {
        GgufBytes b;
        b.header(0, 1).str("deep").u32(kTypeArray);
        for (int i = 1; i < levels; ++i) b.u32(kTypeArray).u64(1);
        return b.u32(kTypeU8).u64(1).u8(42).bytes();
    };
    auto ok = read_bytes(nested(4));
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_TRUE(mentions(read_error(nested(5)), {"metadata key 'deep'", "nested more than 4"}));
    // Deep enough to overflow the stack if the depth were not limited.
    EXPECT_TRUE(mentions(read_error(nested(100000)), {"nested more than 4"}));
}

TEST(GgufBadInput, BoolNotZeroOrOne) {
    GgufBytes b;
    b.header(0, 1).str("flag").u32(kTypeBool).u8(2);
    EXPECT_TRUE(mentions(read_error(b.bytes()),
                         {"metadata key 'flag'", "bool value 2", "neither 0 nor 1"}));
    GgufBytes arr;
    arr.header(0, 1).str("flags").u32(kTypeArray).u32(kTypeBool).u64(3).u8(1).u8(0).u8(255);
    EXPECT_TRUE(mentions(read_error(arr.bytes()), {"metadata key 'flags'", "bool value 255"}));
}

TEST(GgufBadInput, DuplicateKey) {
    GgufBytes b;
    b.header(0, 3).kv_u32("a.x", 1).kv_string("b", "y").kv_u32("a.x", 2);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"metadata key 'a.x' appears twice"}));
}

TEST(GgufBadInput, AlignmentNotAPowerOfTwo) {
    for (uint32_t a : {0u, 48u, 3u, 0x80000000u}) {
        const std::string m =
            read_error(GgufBytes().header(0, 1).kv_u32("general.alignment", a).bytes());
        EXPECT_TRUE(mentions(m, {"general.alignment is " + std::to_string(a), "power of two"}));
    }
    const std::string m =
        read_error(GgufBytes().header(0, 1).kv_string("general.alignment", "32").bytes());
    EXPECT_TRUE(mentions(m, {"general.alignment is \"32\" (string)", "power of two"}));
}

TEST(GgufBadInput, NamesInMessagesAreEscapedAndShortened) {
    // A hostile key must not reach the terminal raw (escape sequences, newlines) or at full length.
    const std::string evil = "\x1b[2J\nkey";
    GgufBytes b;
    b.header(0, 2).kv_u32(evil, 1).kv_u32(evil, 2);
    const std::string m = read_error(b.bytes());
    EXPECT_TRUE(mentions(m, {"'\\x1b[2J\\x0akey' appears twice"}));
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;

    const std::string long_key(5000, 'k');
    GgufBytes c;
    c.header(0, 2).kv_u32(long_key, 1).kv_u32(long_key, 2);
    const std::string m2 = read_error(c.bytes());
    EXPECT_TRUE(mentions(m2, {"(5000 bytes)", "appears twice"}));
    EXPECT_LT(m2.size(), 300u) << m2;
}

// --- Memory limits ------------------------------------------------------------------------------

TEST(GgufBadInput, HugeCountsInAHugeFileFailBeforeAllocating) {
    // In a 1 TiB file every count below passes the "fits in the bytes left" check; only the
    // memory budget stops the reader from trying to allocate terabytes.
    EXPECT_TRUE(mentions(read_sparse_error(GgufBytes().header(0, uint64_t{1} << 36).bytes()),
                         {"huge.gguf: ", "68719476736 metadata entries would need", "of memory"}));
    EXPECT_TRUE(mentions(read_sparse_error(GgufBytes().header(uint64_t{1} << 35, 0).bytes()),
                         {"34359738368 tensors would need", "of memory"}));
    GgufBytes str;
    str.header(0, 1).str("s").u32(kTypeString).u64(uint64_t{1} << 36);
    EXPECT_TRUE(mentions(read_sparse_error(str.bytes()),
                         {"metadata key 's'", "string value of 68719476736 bytes would need"}));
    GgufBytes arr;
    arr.header(0, 1).str("a").u32(kTypeArray).u32(kTypeU8).u64(uint64_t{1} << 38);
    EXPECT_TRUE(mentions(read_sparse_error(arr.bytes()),
                         {"metadata key 'a'", "array of 274877906944 u8 values would need"}));
    GgufBytes name;
    name.header(1, 0).u64(uint64_t{1} << 36);
    EXPECT_TRUE(mentions(read_sparse_error(name.bytes()),
                         {"tensor 1 of 1", "name at byte 24 is 68719476736 bytes long"}));
}

TEST(GgufBadInput, MemoryLimitIsApplied) {
    GgufBytes b;
    b.header(0, 1).str("big").u32(kTypeArray).u32(kTypeU8).u64(100000).zeros(100000);
    auto f = read_bytes(b.bytes());
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->get_array("big")->items.size(), 100000u);
    GgufReadLimits small;
    small.max_header_memory = 1 << 20;
    EXPECT_TRUE(mentions(read_error(b.bytes(), small),
                         {"metadata key 'big'", "array of 100000 u8 values would need",
                          "past the 1.00 MiB allowed"}));
}

// --- Tensor table -------------------------------------------------------------------------------

// One tensor 'w' followed by the padding to the 32-byte data section and `data_bytes` of data.
std::string one_tensor_file(std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                            size_t data_bytes) {
    GgufBytes b;
    b.header(1, 0).tensor("w", std::move(dims), type, offset).pad_to(32).zeros(data_bytes);
    return b.bytes();
}

TEST(GgufBadInput, TensorWithMoreThanFourDims) {
    EXPECT_TRUE(mentions(read_error(one_tensor_file({1, 1, 1, 1, 1}, kTypeF32Tensor, 0, 32)),
                         {"tensor 'w': 5 dimensions", "at most 4"}));
    GgufBytes b;
    b.header(1, 0).str("w").u32(UINT32_MAX).zeros(64);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"tensor 'w': 4294967295 dimensions"}));
}

TEST(GgufBadInput, TensorDimensionProductOverflow) {
    const uint64_t big = uint64_t{1} << 32;
    EXPECT_TRUE(mentions(read_error(one_tensor_file({big, big}, kTypeF32Tensor, 0, 64)),
                         {"tensor 'w'", "[4294967296, 4294967296]", "more than 2^63 elements"}));
    EXPECT_TRUE(
        mentions(read_error(one_tensor_file({256, uint64_t{1} << 62}, kTypeF32Tensor, 0, 64)),
                 {"more than 2^63 elements"}));
    // Fewer than 2^63 elements, but 8 bytes each.
    constexpr uint32_t kTypeF64Tensor = 28;
    const uint64_t half = uint64_t{1} << 31;
    EXPECT_TRUE(mentions(read_error(one_tensor_file({half, half}, kTypeF64Tensor, 0, 64)),
                         {"tensor 'w': F64 [2147483648, 2147483648] takes more than 2^64 bytes"}));
    // A zero dimension must not hide an impossible one.
    EXPECT_TRUE(mentions(read_error(one_tensor_file({0, UINT64_MAX}, kTypeF32Tensor, 0, 64)),
                         {"tensor 'w': impossible dimension 18446744073709551615"}));
}

TEST(GgufBadInput, RowLengthNotAMultipleOfTheBlockSize) {
    EXPECT_TRUE(mentions(
        read_error(one_tensor_file({100, 2}, kTypeQ4KTensor, 0, 1024)),
        {"tensor 'w': rows of 100 elements", "are not a multiple of the Q4_K block size 256"}));
}

TEST(GgufBadInput, UnknownTensorTypeId) {
    EXPECT_TRUE(mentions(read_error(one_tensor_file({32}, 4, 0, 64)),
                         {"tensor 'w'", "type 4 (Q4_2) was removed"}));
    EXPECT_TRUE(mentions(read_error(one_tensor_file({32}, 31, 0, 64)),
                         {"tensor 'w'", "type 31 (Q4_0_4_4) was removed"}));
    for (uint32_t id : {40u, 1000u, UINT32_MAX}) {
        EXPECT_TRUE(mentions(read_error(one_tensor_file({32}, id, 0, 64)),
                             {"tensor 'w'", "unknown tensor type id " + std::to_string(id)}));
    }
}

TEST(GgufBadInput, TensorOffsetNotAligned) {
    EXPECT_TRUE(mentions(read_error(one_tensor_file({4}, kTypeF32Tensor, 4, 64)),
                         {"tensor 'w'",
                          "data offset 4 is not a multiple of the file's alignment "
                          "(32)"}));
    GgufBytes b;
    b.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, kTypeF32Tensor, 32);
    b.pad_to(64).zeros(128);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"data offset 32", "alignment (64)"}));
}

TEST(GgufBadInput, TensorDataPastTheEndOfTheFile) {
    // Table ends at byte 57, data starts at 64: 256 bytes of F32 end at 320, the file has 164.
    const std::string m = read_error(one_tensor_file({64}, kTypeF32Tensor, 0, 100));
    EXPECT_TRUE(mentions(m, {"tensor 'w' (F32 [64]", "ends at byte 320", "the file has 164 bytes",
                             "download is truncated"}));
    // With padding but no data at all.
    EXPECT_TRUE(mentions(read_error(one_tensor_file({64}, kTypeF32Tensor, 0, 0)),
                         {"ends at byte 320", "the file has 64 bytes"}));
}

TEST(GgufBadInput, TensorOffsetPlusSizeOverflows) {
    // Aligned offsets whose sum with the data offset (64) or the size (256) passes 2^64.
    for (uint64_t offset : {UINT64_MAX - 31, UINT64_MAX - 95, UINT64_MAX - 127, UINT64_MAX - 255}) {
        ASSERT_EQ(offset % 32, 0u);
        EXPECT_TRUE(mentions(read_error(one_tensor_file({64}, kTypeF32Tensor, offset, 256)),
                             {"tensor 'w'", "ends beyond byte 2^64"}));
    }
    EXPECT_TRUE(mentions(read_error(one_tensor_file({64}, kTypeF32Tensor, uint64_t{1} << 40, 256)),
                         {"ends at byte " + std::to_string((uint64_t{1} << 40) + 64 + 256)}));
}

TEST(GgufBadInput, OverlappingTensors) {
    GgufBytes b;
    b.header(2, 0).tensor("a", {16}, kTypeF32Tensor, 0).tensor("b", {16}, kTypeF32Tensor, 32);
    b.pad_to(32).zeros(128);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"tensors 'a' and 'b' overlap", "bytes 128..160"}));
    // Stored out of order without overlapping is fine.
    GgufBytes ok;
    ok.header(2, 0).tensor("a", {16}, kTypeF32Tensor, 64).tensor("b", {16}, kTypeF32Tensor, 0);
    ok.pad_to(32).zeros(128);
    auto f = read_bytes(ok.bytes());
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->find_tensor("a")->offset, f->data_offset + 64);
}

TEST(GgufBadInput, DuplicateTensorNames) {
    GgufBytes b;
    b.header(2, 0).tensor("w", {8}, kTypeF32Tensor, 0).tensor("w", {8}, kTypeF32Tensor, 32);
    b.pad_to(32).zeros(64);
    EXPECT_TRUE(mentions(read_error(b.bytes()), {"tensor 'w' appears twice"}));
}

TEST(GgufBadInput, MissingDataSection) {
    // The file stops right after the tensor table, before the padding and the data.
    GgufBytes b;
    b.header(1, 0).tensor("w", {8}, kTypeF32Tensor, 0);
    EXPECT_TRUE(
        mentions(read_error(b.bytes()), {"ends at byte 57", "before its tensor data section",
                                         "would start at byte 64", "truncated"}));
}

// --- Real files cut short or corrupted ----------------------------------------------------------

fs::path real_model() {
    return test::testdata_dir() / "models" / "real" / "aidreams260K-Q4_K_M.gguf";
}

TEST(GgufBadInput, TruncatedRealModelFileAtManyPoints) {
    STRATA_REQUIRE_TESTDATA();
    auto full = read_gguf(real_model().string());
    ASSERT_TRUE(full.ok()) << full.error().message;
    test::TempDir tmp;
    const std::string copy = tmp.file("model.gguf");
    fs::copy_file(real_model(), copy);

    // Inside the header, the metadata, the tensor table, the padding and the tensor data.
    std::vector<uint64_t> cuts = {0, 1, 3, 4, 8, 16, 23, 24, 25, 100, 1000, 5000, 11000};
    for (uint64_t d : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{0}}) {
        cuts.push_back(full->data_offset - d);
    }
    for (const auto& t : full->tensors) {
        cuts.push_back(t.offset + 1);
        cuts.push_back(t.offset + t.n_bytes / 2);
    }
    uint64_t data_end = 0;  // the file may end with padding after this
    for (const auto& t : full->tensors) data_end = std::max(data_end, t.offset + t.n_bytes);
    cuts.push_back(data_end - 1);
    std::sort(cuts.rbegin(), cuts.rend());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (uint64_t cut : cuts) {  // longest first: each cut shortens the same copy
        SCOPED_TRACE("cut at byte " + std::to_string(cut));
        fs::resize_file(copy, cut);
        auto f = read_gguf(copy);
        ASSERT_FALSE(f.ok());
        const std::string& m = f.error().message;
        EXPECT_TRUE(mentions(m, {copy + ": ", cut == 0 ? "empty" : "truncated"}));
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
}

TEST(GgufBadInput, EveryPrefixOfARealHeaderIsAnError) {
    STRATA_REQUIRE_TESTDATA();
    const std::string bytes = test::read_text_file(real_model());
    auto full = read_bytes(bytes);
    ASSERT_TRUE(full.ok()) << full.error().message;
    uint64_t data_end = 0;
    for (const auto& t : full->tensors) data_end = std::max(data_end, t.offset + t.n_bytes);
    for (uint64_t len = 0; len < data_end; len += len < full->data_offset + 64 ? 1 : 4093) {
        auto f = read_bytes(bytes.substr(0, len));
        ASSERT_FALSE(f.ok()) << "prefix of " << len << " bytes was accepted";
        ASSERT_TRUE(mentions(f.error().message, {"bad.gguf: ", len == 0 ? "empty" : "truncated"}))
            << "prefix of " << len << " bytes";
    }
}

TEST(GgufBadInput, EveryByteOfARealHeaderCorrupted) {
    // Not every corrupted byte is detectable (a flipped letter in a string is still a string), but
    // each one must give either a file or a one-line error, never a crash.
    STRATA_REQUIRE_TESTDATA();
    std::string bytes = test::read_text_file(real_model());
    auto full = read_bytes(bytes);
    ASSERT_TRUE(full.ok()) << full.error().message;
    size_t rejected = 0;
    for (uint64_t i = 0; i < full->data_offset; ++i) {
        for (char flip : {'\xff', '\x80'}) {
            bytes[i] = static_cast<char>(bytes[i] ^ flip);
            auto f = read_bytes(bytes);
            bytes[i] = static_cast<char>(bytes[i] ^ flip);
            if (f.ok()) continue;
            ++rejected;
            const std::string& m = f.error().message;
            ASSERT_EQ(m.rfind("bad.gguf: ", 0), 0u) << "byte " << i << ": " << m;
            ASSERT_EQ(m.find('\n'), std::string::npos) << "byte " << i << ": " << m;
        }
    }
    // Every length, count, type and offset field is covered by a check, so most flips are caught.
    EXPECT_GT(rejected, full->data_offset / 4);
}

}  // namespace
}  // namespace strata
