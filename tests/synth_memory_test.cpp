// Writing a model holds only a few chunks in memory, however big the model and its tensors are.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <filesystem>

#include "synth_test_support.h"
#include "test_support.h"

namespace strata {
namespace {

long peak_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;  // KiB on Linux
}

TEST(SynthMemory, PeakMemoryStaysFarBelowTheModelAndTensorSizes) {
    test::TempDir tmp;
    SynthConfig c = test::preset_config("tiny", TensorType::F32);
    c.hparams.n_embd = 1024;
    c.hparams.n_ff = 16384;  // each FFN matrix is 64 MiB
    c.hparams.n_layer = 2;
    c.threads = 2;
    c.chunk_bytes = 1 << 20;  // 4 chunks in flight: 4 MiB
    const long before = peak_rss_kib();
    auto r = write_synthetic_model(c, tmp.file("m.gguf"), false);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const long growth_mib = (peak_rss_kib() - before) / 1024;
    EXPECT_GT(std::filesystem::file_size(tmp.file("m.gguf")), 400u << 20);
    // Chunks (4 MiB), the writer's buffer (8 MiB), per-thread scratch and the vocabulary; a
    // whole tensor (64 MiB) or the whole model (over 400 MiB) must never be held.
    EXPECT_LT(growth_mib, 48) << "peak RSS grew by " << growth_mib << " MiB";
}

}  // namespace
}  // namespace strata
