// Reader and writer agree with each other and with the files llama.cpp's tools wrote: every GGUF in
// the golden data is read, written back with GgufWriter, and must come out byte for byte identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "test_support.h"
#include "util/file.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> all_testdata_ggufs() {
    std::vector<fs::path> out;
    if (!test::have_testdata()) return out;
    for (const auto& e : fs::recursive_directory_iterator(test::testdata_dir())) {
        if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Writes `f` (metadata and tensors as read) to `out`, copying tensor bytes from the source file.
void rewrite(const GgufFile& f, const std::string& out) {
    GgufWriter w;
    for (const auto& e : f.metadata) w.set(e.key, e.value);
    for (const auto& t : f.tensors) {
        std::vector<uint64_t> shape(t.shape.begin(), t.shape.begin() + t.n_dims);
        ASSERT_TRUE(w.add_tensor(t.name, t.type, shape).ok());
    }
    ASSERT_TRUE(w.open(out).ok());
    auto src = FileSource::open(f.path);
    ASSERT_TRUE(src.ok());
    std::vector<uint8_t> buf;
    for (const auto& t : f.tensors) {
        buf.resize(t.n_bytes);
        ASSERT_TRUE((*src)->read_at(t.offset, buf.data(), buf.size()).ok());
        ASSERT_TRUE(w.write(buf.data(), buf.size()).ok());
    }
    auto fin = w.finish();
    ASSERT_TRUE(fin.ok()) << fin.error().message;
    EXPECT_EQ(fs::file_size(out), w.file_size());
}

TEST(GgufRoundTrip, EveryGoldenFileRewritesByteIdentical) {
    STRATA_REQUIRE_TESTDATA();
    auto files = all_testdata_ggufs();
    ASSERT_FALSE(files.empty()) << "no GGUF files in " << test::testdata_dir();
    test::TempDir tmp;
    for (const auto& p : files) {
        SCOPED_TRACE(p.string());
        auto f = read_gguf(p.string());
        ASSERT_TRUE(f.ok()) << f.error().message;
        const std::string out = tmp.file("copy.gguf");
        rewrite(*f, out);
        // Tensor order in the file need not be declaration order in general, but files written by
        // gguf-py are in order, so the copy must be identical.
        std::string a = test::read_text_file(p), b = test::read_text_file(out);
        // Older writers ended tensorless (vocabulary-only) files without the final padding.
        if (f->tensors.empty() && a.size() < b.size() &&
            b.find_first_not_of('\0', a.size()) == std::string::npos) {
            b.resize(a.size());
        }
        EXPECT_EQ(a.size(), b.size());
        const auto diff = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
        EXPECT_TRUE(diff.first == a.end() && diff.second == b.end())
            << "first difference at byte " << (diff.first - a.begin());
        fs::remove(out);
    }
}

TEST(GgufRoundTrip, AllValueTypesAndNestedArrays) {
    test::TempDir tmp;
    GgufWriter w;
    w.set("general.architecture", "llama");
    w.set("t.u8", uint8_t{200});
    w.set("t.i8", int8_t{-5});
    w.set("t.u16", uint16_t{60000});
    w.set("t.i16", int16_t{-30000});
    w.set("t.u32", uint32_t{4000000000u});
    w.set("t.i32", int32_t{-2000000000});
    w.set("t.f32", 1.5f);
    w.set("t.bool", true);
    w.set("t.str", std::string("héllo\nworld"));
    w.set("t.u64", uint64_t{1} << 60);
    w.set("t.i64", int64_t{-1} << 60);
    w.set("t.f64", 2.25);
    w.set("t.strs", make_string_array({"a", "", "ccc"}));
    Array outer;
    outer.elem_type = ValueType::ARRAY;
    outer.items.emplace_back(make_i32_array({1, 2, 3}));
    outer.items.emplace_back(make_i32_array({}));
    w.set("t.nested", outer);
    ASSERT_TRUE(w.add_tensor("a", TensorType::F32, {3, 2}).ok());
    ASSERT_TRUE(w.add_tensor("b", TensorType::Q8_0, {64}).ok());
    const std::string path = tmp.file("all.gguf");
    ASSERT_TRUE(w.open(path).ok());
    std::vector<uint8_t> data(24 + 68, 7);
    ASSERT_TRUE(w.write(data.data(), 10).ok());  // chunks of any size
    ASSERT_TRUE(w.write(data.data() + 10, data.size() - 10).ok());
    ASSERT_TRUE(w.finish().ok());

    auto f = read_gguf(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->version, 3u);
    EXPECT_EQ(f->metadata.size(), 15u);
    EXPECT_EQ(f->get_uint("t.u8"), 200u);
    EXPECT_EQ(f->get_int("t.i8"), -5);
    EXPECT_EQ(f->get_uint("t.u16"), 60000u);
    EXPECT_EQ(f->get_int("t.i16"), -30000);
    EXPECT_EQ(f->get_uint("t.u32"), 4000000000u);
    EXPECT_EQ(f->get_int("t.i32"), -2000000000);
    EXPECT_EQ(f->get_float("t.f32"), 1.5);
    EXPECT_EQ(f->get_bool("t.bool"), true);
    EXPECT_EQ(f->get_string("t.str"), "héllo\nworld");
    EXPECT_EQ(f->get_uint("t.u64"), uint64_t{1} << 60);
    EXPECT_EQ(f->get_int("t.i64"), int64_t{-1} << 60);
    EXPECT_EQ(f->get_float("t.f64"), 2.25);
    const Array* strs = f->get_array("t.strs");
    ASSERT_NE(strs, nullptr);
    ASSERT_EQ(strs->items.size(), 3u);
    EXPECT_EQ(*strs->items[2].as_string(), "ccc");
    const Array* nested = f->get_array("t.nested");
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->elem_type, ValueType::ARRAY);
    ASSERT_EQ(nested->items.size(), 2u);
    EXPECT_EQ(nested->items[0].as_array()->items[2].as_int(), 3);
    EXPECT_TRUE(nested->items[1].as_array()->items.empty());
    ASSERT_EQ(f->tensors.size(), 2u);
    EXPECT_EQ(f->tensors[0].n_bytes, 24u);
    EXPECT_EQ(f->tensors[1].n_bytes, 68u);
    EXPECT_EQ(f->tensors[1].offset % 32, 0u);
    EXPECT_EQ(f->tensors[1].offset, f->data_offset + 32);
}

TEST(GgufWriter, RefusesToOverwriteAndLeavesNoPartialFile) {
    test::TempDir tmp;
    const std::string path = tmp.file("m.gguf");
    {
        std::FILE* fp = std::fopen(path.c_str(), "w");
        std::fputs("precious", fp);
        std::fclose(fp);
    }
    GgufWriter w;
    ASSERT_TRUE(w.add_tensor("x", TensorType::F32, {4}).ok());
    auto r = w.open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("refusing to overwrite"), std::string::npos);
    EXPECT_EQ(test::read_text_file(path), "precious");
    {
        GgufWriter w2;
        ASSERT_TRUE(w2.add_tensor("x", TensorType::F32, {4}).ok());
        ASSERT_TRUE(w2.open(tmp.file("unfinished.gguf")).ok());
        // destroyed without finish(): nothing is left behind under either name
    }
    EXPECT_FALSE(fs::exists(tmp.file("unfinished.gguf")));
    EXPECT_FALSE(fs::exists(tmp.file("unfinished.gguf.partial")));
}

TEST(GgufWriter, IncompleteTensorDataIsAnError) {
    test::TempDir tmp;
    GgufWriter w;
    ASSERT_TRUE(w.add_tensor("x", TensorType::F32, {4}).ok());
    ASSERT_TRUE(w.open(tmp.file("m.gguf")).ok());
    float v[2] = {1, 2};
    ASSERT_TRUE(w.write(v, sizeof v).ok());
    auto r = w.finish();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("not written completely"), std::string::npos);
}

}  // namespace
}  // namespace strata
