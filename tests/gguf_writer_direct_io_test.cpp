// GgufWriter with direct I/O writes exactly the bytes of the buffered path: whole-buffer flushes,
// a padded last block cut back to the real size, and a fallback where O_DIRECT is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// A file whose header and data sizes are not multiples of any block size, with one tensor larger
// than the writer's 8 MiB buffer.
void write_model(const std::string& path, bool direct) {
    GgufWriter w;
    w.set_direct_io(direct);
    w.set("general.architecture", "llama");
    w.set("test.text", "odd length text");
    ASSERT_TRUE(w.add_tensor("big", TensorType::F32, {1000, 2621}).ok());  // 10.5 MB
    ASSERT_TRUE(w.add_tensor("small", TensorType::F16, {7}).ok());
    ASSERT_TRUE(w.open(path).ok());
    std::vector<uint8_t> data(1000 * 2621 * 4 + 14);
    std::iota(data.begin(), data.end(), uint8_t{1});
    for (size_t off = 0; off < data.size(); off += 3000001) {
        const size_t n = std::min<size_t>(3000001, data.size() - off);
        ASSERT_TRUE(w.write(data.data() + off, n).ok());
    }
    auto fin = w.finish();
    ASSERT_TRUE(fin.ok()) << fin.error().message;
    EXPECT_EQ(fs::file_size(path), w.file_size());
}

void expect_same_bytes_as_buffered(const fs::path& dir) {
    const std::string a = (dir / "buffered.gguf").string(), b = (dir / "direct.gguf").string();
    write_model(a, false);
    write_model(b, true);
    EXPECT_TRUE(test::read_text_file(a) == test::read_text_file(b));
    EXPECT_FALSE(fs::exists(b + ".partial"));
    auto f = read_gguf(b);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->tensors.size(), 2u);
}

TEST(GgufWriterDirectIo, WritesTheSameBytesAsBufferedWrites) {
    test::TempDir tmp;
    expect_same_bytes_as_buffered(tmp.path());
}

// tmpfs refuses O_DIRECT on older kernels (and accepts it on newer ones): either way the file
// must come out the same.
TEST(GgufWriterDirectIo, AlsoWorksOnTmpfs) {
    const fs::path shm = "/dev/shm";
    if (!fs::is_directory(shm)) GTEST_SKIP() << "no /dev/shm";
    const fs::path dir = shm / ("strata-direct-io-" + std::to_string(::getpid()));
    fs::create_directory(dir);
    expect_same_bytes_as_buffered(dir);
    fs::remove_all(dir);
}

}  // namespace
}  // namespace strata
