// Refactoring guard: the logits every golden model gives in every residency mode must stay
// bit-identical to the ones recorded in tests/data/engine_logit_digests.json, which were computed
// by the engine before its backend seam existed. A change to the engine's structure (where a
// kernel lives, which object owns a buffer, how the store hands out views) must not move a single
// bit; a change that means to alter numerics re-records the file and says why in its commit.
//
// Each case evaluates the first 48 tokens of the perplexity text as one batch (every position's
// logits: the matmul kernels, batched attention) and then 8 more tokens one at a time (the matvec
// kernels, decode attention), and hashes the float bytes of all of it (FNV-1a, 64 bits). The
// kernels' floating-point order depends on the instruction-set path, so digests are recorded per
// path; a path with no recorded digests is skipped with a message saying how to record them.
//
// Recording: STRATA_RECORD_LOGIT_DIGESTS=FILE writes the digests this machine computes to FILE
// instead of comparing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_path.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "runtime/loaded_model.h"
#include "test_support.h"

namespace strata {
namespace {

constexpr size_t kBatchTokens = 48;
constexpr size_t kDecodeTokens = 8;

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

std::string digest_hex(uint64_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

// The modes a model can run in: every model resident; a dense model with every FFN layer
// streamed; a MoE model with its experts streamed through a cache smaller than the experts.
std::vector<std::string> modes_for(const test::GoldenModel& m) {
    return {"resident", m.moe ? "expert-stream" : "ffn-stream"};
}

std::string compute_digest(const test::GoldenModel& m, const std::string& mode) {
    const std::string path = (test::testdata_dir() / m.path).string();
    ModelLoadOptions options;
    options.engine.threads = 2;
    options.engine.n_ctx = 128;
    options.expert_statistics = false;
    auto loaded = test::load_in_mode(path, mode, options);
    if (!loaded) return "";
    if (mode == "ffn-stream" && loaded->store->report().slots == 0) {
        // The golden models have two layers, and the smallest ffn-stream plan caches both (its
        // two slots would take as much): stream every layer through one slot instead, so that
        // every layer's FFN is read from the file again at every step.
        ModelInfo info = loaded->info;
        const std::vector<bool> every_layer(info.hparams->n_layer, true);
        options.layout = layer_stream_layout(info, every_layer, {.lookahead = 0, .slots = 1});
        loaded.reset();
        auto streamed = LoadedModel::load(std::move(info), std::nullopt, options);
        EXPECT_TRUE(streamed) << (streamed ? "" : streamed.error().message);
        if (!streamed) return "";
        loaded = std::move(*streamed);
        EXPECT_EQ(loaded->store->report().slots, 1);
    }
    LoadedModel& lm = *loaded;

    const std::string text = test::read_text_file(test::testdata_dir() / "inputs/ppl_text.txt");
    std::vector<int32_t> ids = lm.tokenizer.tokenize(text);
    EXPECT_GE(ids.size(), kBatchTokens + kDecodeTokens);
    ids.resize(kBatchTokens + kDecodeTokens);

    uint64_t h = 1469598103934665603ull;
    std::vector<float> logits;
    auto r = lm.engine->eval(std::span(ids).first(kBatchTokens), engine::LogitsWanted::All, logits);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    h = fnv1a(logits.data(), logits.size() * sizeof(float), h);
    for (size_t i = kBatchTokens; i < ids.size(); ++i) {
        r = lm.engine->eval(std::span(ids).subspan(i, 1), engine::LogitsWanted::Last, logits);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        h = fnv1a(logits.data(), logits.size() * sizeof(float), h);
    }
    if (mode != "resident") {
        EXPECT_GT(lm.store->stats().bytes_from_disk, 0u) << "nothing was streamed";
    }
    return digest_hex(h);
}

std::filesystem::path digest_file() {
    return std::filesystem::path(STRATA_SOURCE_DIR) / "tests/data/engine_logit_digests.json";
}

// Computes (or records) the digests of every model and mode on the kernel path active now.
void check_active_path(const nlohmann::json& recorded, nlohmann::json& record_into) {
    const std::string path_name(cpu::cpu_path_name(cpu::active_cpu_path()));
    const bool recording = recorded.is_null();
    if (!recording && !recorded.contains(path_name)) {
        GTEST_SKIP() << "no digests recorded for the " << path_name
                     << " kernel path; STRATA_RECORD_LOGIT_DIGESTS=FILE records them "
                        "(with the engine before the change under test)";
    }
    size_t compared = 0;
    for (const auto& m : test::golden_models()) {
        for (const std::string& mode : modes_for(m)) {
            SCOPED_TRACE(path_name + " " + m.stem + " " + mode);
            const std::string d = compute_digest(m, mode);
            if (recording) {
                record_into[path_name][m.stem][mode] = d;
                continue;
            }
            ASSERT_TRUE(recorded[path_name].contains(m.stem)) << m.stem << " was not recorded";
            EXPECT_EQ(d, recorded[path_name][m.stem][mode].get<std::string>())
                << m.stem << " in " << mode << " mode on the " << path_name
                << " path: the logits changed";
            ++compared;
        }
    }
    if (!recording) {
        EXPECT_GT(compared, 40u);
    }
}

class EngineLogitDigest : public ::testing::TestWithParam<cpu::CpuPath> {};

TEST_P(EngineLogitDigest, EveryGoldenModelInEveryModeIsBitIdenticalToTheRecording) {
    STRATA_REQUIRE_TESTDATA();
    const cpu::CpuPath path = GetParam();
    if (!cpu::cpu_path_runs_on(path, cpu::detect_cpu_features())) {
        GTEST_SKIP() << "this CPU cannot run the " << cpu::cpu_path_name(path) << " path";
    }
    const cpu::CpuPath before = cpu::active_cpu_path();
    ASSERT_TRUE(cpu::set_cpu_path(path));
    const char* record = std::getenv("STRATA_RECORD_LOGIT_DIGESTS");
    nlohmann::json recorded, out;
    if (record) {
        if (std::ifstream in(record); in) out = nlohmann::json::parse(in);
    } else {
        std::ifstream in(digest_file());
        ASSERT_TRUE(in) << "cannot read " << digest_file();
        recorded = nlohmann::json::parse(in);
    }
    check_active_path(recorded, out);
    ASSERT_TRUE(cpu::set_cpu_path(before));
    if (record) {
        std::ofstream(record) << out.dump(2) << "\n";
        std::printf("recorded the %s path in %s\n", std::string(cpu::cpu_path_name(path)).c_str(),
                    record);
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, EngineLogitDigest, ::testing::ValuesIn(cpu::kAllCpuPaths),
                         [](const auto& p) { return std::string(cpu::cpu_path_name(p.param)); });

}  // namespace
}  // namespace strata
