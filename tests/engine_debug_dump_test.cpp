// The debug dump (STRATA_DUMP / --dump): every forward pass writes its named activations with an
// index, so a layer can be diffed against a reference run. Checked on the real golden model: the
// index lists every expected name for every layer, each file holds rows x cols floats, and the
// dumped logits of the last generation step are the logits the engine returned.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "runtime/loaded_model.h"
#include "test_support.h"

namespace strata {
namespace {

TEST(EngineDebugDump, WritesNamedActivationsOfEveryLayer) {
    STRATA_REQUIRE_TESTDATA();
    test::TempDir tmp;
    const std::string dump = tmp.file("dump");
    ModelLoadOptions opt;
    opt.engine.threads = 2;
    opt.engine.n_ctx = 64;
    opt.engine.dump_dir = dump;
    auto m = LoadedModel::load(
        (test::testdata_dir() / "models/real/aidreams260K-F32.gguf").string(), opt);
    ASSERT_TRUE(m) << m.error().message;
    engine::Engine& e = *(*m)->engine;
    const std::vector<int32_t> prompt{1, 429, 491, 433, 295};
    std::vector<float> logits;
    ASSERT_TRUE(e.eval(prompt, engine::LogitsWanted::Last, logits));
    const int32_t next = 42;
    ASSERT_TRUE(e.eval({&next, 1}, engine::LogitsWanted::Last, logits));

    std::ifstream index(dump + "/index.tsv");
    ASSERT_TRUE(index);
    std::string line;
    std::getline(index, line);
    EXPECT_EQ(line, "seq\tname\trows\tcols\tpos0\tfile");
    std::map<std::string, int> seen;  // "seq name" -> rows
    std::string last_logits_file;
    while (std::getline(index, line)) {
        std::istringstream f(line);
        std::string seq, name, file;
        int64_t rows = 0, cols = 0, pos0 = 0;
        f >> seq >> name >> rows >> cols >> pos0 >> file;
        EXPECT_EQ(pos0, seq == "0" ? 0 : 5) << line;
        EXPECT_EQ(rows, seq == "0" && name != "result_norm" && name != "result_output" ? 5 : 1)
            << line;
        EXPECT_EQ(std::filesystem::file_size(dump + "/" + file), uint64_t(rows * cols * 4)) << line;
        seen[seq + " " + name] = int(rows);
        if (seq == "1" && name == "result_output") last_logits_file = dump + "/" + file;
    }
    for (const char* seq : {"0", "1"}) {
        for (int l = 0; l < 4; ++l) {
            for (const char* n : {"attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "ffn_inp",
                                  "ffn_norm", "ffn_out", "l_out"}) {
                EXPECT_TRUE(seen.count(std::string(seq) + " " + n + "-" + std::to_string(l)))
                    << seq << " " << n << "-" << l;
            }
        }
        EXPECT_TRUE(seen.count(std::string(seq) + " result_output"));
    }
    std::ifstream lf(last_logits_file, std::ios::binary);
    std::vector<float> dumped(logits.size());
    lf.read(reinterpret_cast<char*>(dumped.data()), std::streamsize(dumped.size() * 4));
    ASSERT_TRUE(lf);
    EXPECT_EQ(0, std::memcmp(dumped.data(), logits.data(), logits.size() * 4));
}

}  // namespace
}  // namespace strata
