// `strata inspect` on input that is not a readable GGUF model: the command must exit non-zero
// and say on stderr, on one line, which file is wrong and what is wrong with it. No hangs either:
// every command runs under `timeout`.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/writer.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// Exit status of `timeout` when the command ran out of time.
constexpr int kTimedOut = 124;

test::CommandResult inspect(const std::string& path) {
    return test::run_command("timeout 60 " + test::shell_quote(test::strata_binary()) +
                             " inspect " + test::shell_quote(path));
}

// True when one line of `text` mentions both `path` and `problem`.
bool has_line_with(const std::string& text, const std::string& path, const std::string& problem) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.find(path) != std::string::npos && line.find(problem) != std::string::npos) {
            return true;
        }
    }
    return false;
}

void expect_clear_failure(const std::string& path, const std::string& problem) {
    const auto r = inspect(path);
    EXPECT_NE(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.exit_code, kTimedOut) << "strata inspect hung on " << path;
    EXPECT_LT(r.exit_code, 128) << "strata inspect was killed by a signal: " << r.err;
    EXPECT_TRUE(has_line_with(r.err, path, problem))
        << "stderr should name " << path << " and say \"" << problem << "\":\n"
        << r.err;
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// A small valid GGUF written by GgufWriter: one F32 tensor of 64 values (256 bytes).
std::string write_small_model(const test::TempDir& tmp) {
    const std::string path = tmp.file("small.gguf");
    GgufWriter w;
    w.set("general.architecture", "llama");
    EXPECT_TRUE(w.add_tensor("token_embd.weight", TensorType::F32, {64}).ok());
    EXPECT_TRUE(w.open(path).ok());
    const std::string data(256, '\0');
    EXPECT_TRUE(w.write(data.data(), data.size()).ok());
    EXPECT_TRUE(w.finish().ok());
    return path;
}

TEST(InspectBadInput, RealModelSucceeds) {
    // The baseline for the failures below: the same command on a good model exits 0.
    STRATA_REQUIRE_TESTDATA();
    const fs::path model = test::testdata_dir() / "models" / "real" / "aidreams260K-F32.gguf";
    const auto r = inspect(model.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(InspectBadInput, NotAGgufFile) {
    test::TempDir tmp;
    const std::string path = tmp.file("notes.gguf");
    write_file(path, "these are not the weights you are looking for\n");
    expect_clear_failure(path, "not a GGUF file");
}

TEST(InspectBadInput, EmptyFile) {
    test::TempDir tmp;
    const std::string path = tmp.file("empty.gguf");
    write_file(path, "");
    expect_clear_failure(path, "empty");
}

TEST(InspectBadInput, TruncatedDownload) {
    test::TempDir tmp;
    const std::string path = write_small_model(tmp);
    fs::resize_file(path, fs::file_size(path) - 100);
    expect_clear_failure(path, "truncated");
    fs::resize_file(path, 30);
    expect_clear_failure(path, "truncated");
}

TEST(InspectBadInput, CorruptTensorType) {
    test::TempDir tmp;
    const std::string path = write_small_model(tmp);
    std::string bytes = test::read_text_file(path);
    // The type id follows the tensor's name, dimension count and one dimension.
    const size_t name_at = bytes.find("token_embd.weight");
    ASSERT_NE(name_at, std::string::npos);
    bytes[name_at + 17 + 4 + 8] = 100;
    write_file(path, bytes);
    expect_clear_failure(path, "unknown tensor type id 100");
}

TEST(InspectBadInput, NonexistentPath) {
    test::TempDir tmp;
    expect_clear_failure(tmp.file("no-such-model.gguf"), "No such file");
}

TEST(InspectBadInput, Directory) {
    test::TempDir tmp;
    expect_clear_failure(tmp.path().string(), "directory");
}

TEST(InspectBadInput, NamedPipeDoesNotHang) {
    // Opening a FIFO for reading waits for a writer unless the reader takes care.
    test::TempDir tmp;
    const std::string path = tmp.file("model.gguf");
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    expect_clear_failure(path, "not a regular file");
}

}  // namespace
}  // namespace strata
