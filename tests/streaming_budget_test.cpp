// Design invariant 2 on the running binary, while `strata bench` streams a model about twice as
// large as its RAM budget in ffn-stream mode:
//  - peak resident memory (VmHWM) stays within the budget, with no allowance: the plan counts
//    code and libraries, the tokenizer, activations and logits, thread stacks and allocator
//    slack beside the weights (budget_ceiling_test.cpp holds the same inside a memory cgroup);
//  - the streamed FFN tensors never enter the page cache (mincore over their pages after the
//    run, the file's cached pages dropped before it);
//  - the storage bytes per generated token the kernel counted for the process (/proc/self/io)
//    match the plan's predicted disk bytes per token and the store's own count.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata {
namespace {

// 10 layers of n_embd 1024 and n_ff 4096 at Q8_0: ~175 MB, of which ~134 MB FFN weights.
std::string write_model(const test::TempDir& dir) {
    SynthConfig c;
    c.hparams = *synth_preset("tiny");
    c.hparams.n_layer = 10;
    c.hparams.n_embd = 1024;
    c.hparams.n_head = 16;
    c.hparams.n_head_kv = 4;
    c.hparams.n_ff = 4096;
    c.weights = TensorType::Q8_0;
    c.threads = 2;
    const std::string path = dir.file("model.gguf");
    auto r = write_synthetic_model(c, path, true);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return path;
}

// Pages of [offset, offset + length) of the file that are in the page cache.
size_t cached_pages(int fd, uint64_t file_size, uint64_t offset, uint64_t length) {
    const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, file_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return SIZE_MAX;
    // Whole pages inside the range only: a page shared with a resident neighbour may be cached.
    const uint64_t first = (offset + page - 1) / page, last = (offset + length) / page;
    size_t n = 0;
    if (last > first) {
        std::vector<unsigned char> vec(last - first);
        if (::mincore(static_cast<char*>(p) + first * page, (last - first) * page, vec.data()) !=
            0) {
            n = SIZE_MAX;
        } else {
            for (unsigned char v : vec) n += v & 1;
        }
    }
    ::munmap(p, file_size);
    return n;
}

TEST(StreamingBudget, PeakRssPageCacheAndDiskBytesFollowThePlan) {
    test::TempDir dir;
    const std::string model = write_model(dir);
    auto file = read_gguf(model);
    ASSERT_TRUE(file) << file.error().message;
    const std::string flags = " --prompt-tokens 8 --gen-tokens 8 --reps 2 -t 2";
    // The smallest budget for the run (the process's baseline is measured by strata) and a
    // layer's worth of FFN weights more.
    const uint64_t smallest = test::smallest_ram("bench " + test::shell_quote(model) + flags);
    const uint64_t budget = (smallest + (13ull << 20)) >> 10 << 10;
    ASSERT_GT(file->file_size, 2 * budget - (8ull << 20));

    const int fd = ::open(model.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    // FFN tensors interleave with attention tensors in the file: each is checked by itself.
    auto ffn_cached = [&] {
        size_t n = 0;
        for (const TensorInfo& t : file->tensors) {
            if (t.name.find(".ffn_") != std::string::npos) {
                n += cached_pages(fd, file->file_size, t.offset, t.n_bytes);
            }
        }
        return n;
    };
    if (ffn_cached() != 0) {
        ::close(fd);
        GTEST_SKIP() << "this system keeps the test file's pages cached after DONTNEED";
    }

    const std::string results = dir.file("bench.jsonl");
    const auto r =
        test::run_strata("bench " + test::shell_quote(model) + flags + " --ram " +
                         std::to_string(budget) + " --json " + test::shell_quote(results));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(test::read_text_file(results));
    const auto& run = j["runs"][0];
    const auto& plan = run["plan"];
    ASSERT_EQ(plan["mode"], "ffn-stream") << plan.dump();
    EXPECT_GE(plan["streamed_layers"].get<int>(), 2);
    EXPECT_LE(plan["memory_planned"].get<uint64_t>(), budget);

    // The budget holds.
    const uint64_t peak = run["peak_rss_bytes"];
    EXPECT_LE(peak, budget) << "peak RSS " << peak;
    EXPECT_EQ(ffn_cached(), 0u) << "streamed tensors went through the page cache";
    ::close(fd);

    // Disk bytes per token: the kernel's count, the store's and the plan's agree.
    const double predicted = plan["tiers"]["disk"]["bytes_per_token"];
    const double store = run["bytes_per_token"]["disk_store"];
    const double kernel = run["bytes_per_token"]["disk_process_io"];
    ASSERT_TRUE(run["io_counted"].get<bool>());
    EXPECT_GT(predicted, 0);
    EXPECT_NEAR(store, predicted, 0.02 * predicted);
    EXPECT_NEAR(kernel, store, 0.02 * store);
}

}  // namespace
}  // namespace strata
