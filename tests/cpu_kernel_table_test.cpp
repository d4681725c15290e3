// The CPU kernel table (backend/kernel_choice.h, backend/cpu/kernel_table.h): a saved table
// forces its path per weight type and phase, types and phases it lacks take the best path, a
// forced path takes everything, paths the CPU cannot run are left out; products dispatched
// through the installed table give exactly the bits of the path it names (matmul, matvec and
// matmul_segments, whose segments each take their own phase); the table's JSON round trip; and
// the profile's choice of the winner and a small measurement's shape (never its speed).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/matmul.h"
#include "backend/kernel_choice.h"
#include "profile/cpu_kernel_timing.h"
#include "quant/quant.h"

namespace strata::cpu {
namespace {

CpuKernelChoice choice(TensorType t, KernelPhase p, CpuPathChoice path, double figure = 1e9) {
    return {t, p, path, figure, {{path, figure}}};
}

// Restores the process's forced path and table when a test ends.
class KernelStateGuard {
  public:
    KernelStateGuard() : forced_(forced_cpu_path()), table_(installed_kernel_table()) {}
    ~KernelStateGuard() {
        install_kernel_table(table_);
        if (forced_) {
            EXPECT_TRUE(set_cpu_path(*forced_));
        }
    }
    KernelStateGuard(const KernelStateGuard&) = delete;
    KernelStateGuard& operator=(const KernelStateGuard&) = delete;

  private:
    std::optional<CpuPath> forced_;
    KernelTable table_;
};

TEST(KernelPhase, ColumnsMapToPhases) {
    EXPECT_EQ(kernel_phase(1), KernelPhase::Decode);
    EXPECT_EQ(kernel_phase(2), KernelPhase::Batch);
    EXPECT_EQ(kernel_phase(kPromptColumns - 1), KernelPhase::Batch);
    EXPECT_EQ(kernel_phase(kPromptColumns), KernelPhase::Prompt);
    EXPECT_EQ(kernel_phase(512), KernelPhase::Prompt);
    for (const KernelPhase p : kAllKernelPhases) {
        EXPECT_EQ(kernel_phase(kernel_phase_timed_columns(p)), p) << kernel_phase_name(p);
        EXPECT_EQ(parse_kernel_phase(kernel_phase_name(p)), p);
    }
    EXPECT_FALSE(parse_kernel_phase("prefill"));
}

TEST(KernelTable, ASavedTableForcesItsPathsAndOthersFallBack) {
    CpuKernelTable saved;
    saved.widest = CpuPathChoice::Avx512;
    saved.choices = {choice(TensorType::Q4_K, KernelPhase::Decode, CpuPathChoice::Avx2),
                     choice(TensorType::Q4_K, KernelPhase::Prompt, CpuPathChoice::Avx512),
                     choice(TensorType::Q8_0, KernelPhase::Batch, CpuPathChoice::Scalar)};
    CpuFeatures all;
    all.avx2_fma_f16c = all.avx512_vnni = true;
    const KernelTable t = KernelTable::from(saved, all);
    EXPECT_FALSE(t.empty());
    EXPECT_EQ(t.path(TensorType::Q4_K, KernelPhase::Decode), CpuPath::avx2);
    EXPECT_EQ(t.path(TensorType::Q4_K, KernelPhase::Prompt), CpuPath::avx512);
    EXPECT_EQ(t.path(TensorType::Q8_0, KernelPhase::Batch), CpuPath::scalar);
    EXPECT_FALSE(t.path(TensorType::Q4_K, KernelPhase::Batch));
    EXPECT_FALSE(t.path(TensorType::Q6_K, KernelPhase::Decode));

    const CpuPath best = CpuPath::avx512;
    const auto pick = [&](TensorType type, int64_t columns) {
        return choose_kernel_path(std::nullopt, t, best, type, columns);
    };
    EXPECT_EQ(pick(TensorType::Q4_K, 1), CpuPath::avx2);
    EXPECT_EQ(pick(TensorType::Q4_K, 4), best) << "a phase the table lacks takes the best path";
    EXPECT_EQ(pick(TensorType::Q4_K, 128), CpuPath::avx512);
    EXPECT_EQ(pick(TensorType::Q8_0, 8), CpuPath::scalar);
    EXPECT_EQ(pick(TensorType::Q6_K, 1), best) << "a type the table lacks takes the best path";
    EXPECT_EQ(pick(TensorType::MXFP4, 64), best);
    // A forced path takes everything.
    EXPECT_EQ(choose_kernel_path(CpuPath::scalar, t, best, TensorType::Q4_K, 1), CpuPath::scalar);
    EXPECT_EQ(choose_kernel_path(CpuPath::avx2, t, best, TensorType::Q8_0, 8), CpuPath::avx2);

    // A CPU without AVX-512 keeps only the entries it runs.
    CpuFeatures avx2_only;
    avx2_only.avx2_fma_f16c = true;
    const KernelTable narrow = KernelTable::from(saved, avx2_only);
    EXPECT_EQ(narrow.path(TensorType::Q4_K, KernelPhase::Decode), CpuPath::avx2);
    EXPECT_FALSE(narrow.path(TensorType::Q4_K, KernelPhase::Prompt));
    EXPECT_TRUE(KernelTable::from(CpuKernelTable{}, all).empty());
    EXPECT_TRUE(KernelTable{}.empty());
}

TEST(KernelTable, JsonRoundTripAndErrors) {
    CpuKernelTable t;
    t.widest = CpuPathChoice::Avx512;
    t.choices = {{TensorType::Q4_K,
                  KernelPhase::Decode,
                  CpuPathChoice::Avx2,
                  27.1e9,
                  {{CpuPathChoice::Avx2, 27.1e9}, {CpuPathChoice::Avx512, 18.0e9}}},
                 choice(TensorType::IQ4_XS, KernelPhase::Prompt, CpuPathChoice::Avx512, 4.1e11)};
    const nlohmann::json j = kernel_table_json(t);
    EXPECT_EQ(j["choices"][0]["timings"]["avx512"].get<double>(), 18.0e9);
    auto back = kernel_table_from_json(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, t);
    EXPECT_EQ(kernel_choice_text(t.choices[0]), "avx2 27.1 GB/s (avx512 18.0)");
    EXPECT_EQ(kernel_choice_text(t.choices[1]), "avx512 410 GFLOP/s");
    const std::string text = kernel_table_text(t, "  ");
    EXPECT_NE(text.find("Q4_K"), std::string::npos) << text;
    EXPECT_NE(text.find("IQ4_XS"), std::string::npos) << text;
    EXPECT_EQ(kernel_table_text(CpuKernelTable{}, ""), "");

    const CpuKernelTable only_q4 = t.for_types({TensorType::Q4_K, TensorType::Q6_K});
    ASSERT_EQ(only_q4.choices.size(), 1u);
    EXPECT_EQ(only_q4.choices[0].type, TensorType::Q4_K);
    EXPECT_EQ(only_q4.widest, CpuPathChoice::Avx512);

    for (const auto& [key, bad] :
         {std::pair{"type", "Q9_K"}, {"phase", "prefill"}, {"path", "neon"}}) {
        nlohmann::json broken = j;
        broken["choices"][0][key] = bad;
        auto r = kernel_table_from_json(broken);
        ASSERT_FALSE(r) << key;
        EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
    }
    nlohmann::json missing = j;
    missing["choices"][0].erase("figure");
    EXPECT_FALSE(kernel_table_from_json(missing));
}

struct Owned {
    std::vector<uint8_t> bytes;
    QuantMatrix m;
};

Owned random_matrix(TensorType t, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::normal_distribution<float> nd(0, 1);
    const size_t rb = size_t(quant::quant_row_bytes(t, cols).value());
    Owned o;
    o.bytes.resize(rb * size_t(rows) + 64);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = nd(rng);
        quant::quantize_row(t, row.data(), o.bytes.data() + size_t(r) * rb, cols);
    }
    o.m = make_quant_matrix(t, o.bytes.data(), rows, cols).value();
    return o;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The paths with fast kernels this CPU runs.
std::vector<CpuPath> fast_paths() {
    std::vector<CpuPath> out;
    for (const CpuPath p : {CpuPath::avx2, CpuPath::avx512}) {
        if (cpu_path_runs_on(p, detect_cpu_features())) out.push_back(p);
    }
    return out;
}

// For every phase, a table naming one path (each fast path in turn, the scalar one too) for the
// type: matmul and matvec through the installed table give that path's bits.
TEST(KernelTable, DispatchThroughTheTableGivesTheBitsOfThePathItNames) {
    KernelStateGuard guard;
    std::mt19937 rng(11);
    const int64_t rows = 96, cols = 512;
    std::vector<CpuPath> paths = fast_paths();
    paths.push_back(CpuPath::scalar);
    ThreadPool pool(2);
    for (const TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0,
                                  TensorType::F16, TensorType::IQ4_NL}) {
        const Owned w = random_matrix(type, rows, cols, rng);
        for (const KernelPhase phase : kAllKernelPhases) {
            const int64_t n = phase == KernelPhase::Decode  ? 1
                              : phase == KernelPhase::Batch ? 3
                                                            : kPromptColumns + 4;
            ASSERT_EQ(kernel_phase(n), phase);
            const std::vector<float> x = random_floats(size_t(n * cols), rng);
            for (const CpuPath path : paths) {
                SCOPED_TRACE(std::string(tensor_type_name(type)) + " " +
                             std::string(kernel_phase_name(phase)) + " " +
                             std::string(cpu_path_name(path)));
                KernelTable table;
                table.set(type, phase, path);
                install_kernel_table(table);
                EXPECT_FALSE(forced_cpu_path());
                EXPECT_EQ(kernel_path(type, n), path);
                std::vector<float> via_table(size_t(n * rows)), forced(size_t(n * rows));
                if (phase == KernelPhase::Decode) {
                    matvec(w.m, x.data(), via_table.data(), pool);
                } else {
                    matmul(w.m, x.data(), via_table.data(), n, pool);
                }
                matmul_on_path(path, w.m, x.data(), forced.data(), n, pool);
                EXPECT_TRUE(same_bits(via_table, forced));
            }
        }
    }
}

// matmul_segments: each segment takes the path of its own phase (a decode-sized segment one
// path, a prompt-sized one another), and gives that path's bits.
TEST(KernelTable, SegmentsTakeThePathOfTheirOwnPhase) {
    const std::vector<CpuPath> paths = fast_paths();
    if (paths.empty()) GTEST_SKIP() << "this CPU runs no fast path";
    KernelStateGuard guard;
    std::mt19937 rng(12);
    const int64_t cols = 256, rows = 40;
    const CpuPath decode_path = paths.front(), prompt_path = paths.back();
    const Owned a = random_matrix(TensorType::Q4_K, 64, cols, rng);
    const Owned b = random_matrix(TensorType::Q8_0, 48, cols, rng);
    KernelTable table;
    table.set(TensorType::Q4_K, KernelPhase::Decode, decode_path);
    table.set(TensorType::Q8_0, KernelPhase::Decode, decode_path);
    table.set(TensorType::Q4_K, KernelPhase::Prompt, prompt_path);
    table.set(TensorType::Q8_0, KernelPhase::Prompt, prompt_path);
    table.set(TensorType::Q4_K, KernelPhase::Batch, CpuPath::scalar);
    install_kernel_table(table);
    ThreadPool pool(2);
    const std::vector<float> x = random_floats(size_t(rows * cols), rng);
    // (matrix, first row, rows): decode, prompt, batch and prompt segments.
    struct Case {
        const Owned* w;
        int64_t first, count;
    };
    const Case cases[] = {{&a, 0, 1}, {&b, 1, 20}, {&a, 21, 3}, {&a, 24, 16}};
    std::vector<std::vector<float>> ys;
    std::vector<MatmulSegment> segs;
    for (const Case& c : cases) ys.emplace_back(size_t(rows * c.w->m.rows), -1.0f);
    for (size_t i = 0; i < std::size(cases); ++i) {
        segs.push_back({cases[i].w->m, cases[i].first, cases[i].count, ys[i].data()});
    }
    matmul_segments(segs, x.data(), rows, pool);
    for (size_t i = 0; i < std::size(cases); ++i) {
        const Case& c = cases[i];
        const CpuPath path = choose_kernel_path(
            std::nullopt, table, best_cpu_path(detect_cpu_features()), c.w->m.type, c.count);
        SCOPED_TRACE(std::to_string(c.count) + " rows on " + std::string(cpu_path_name(path)));
        std::vector<float> forced(size_t(c.count * c.w->m.rows));
        matmul_on_path(path, c.w->m, x.data() + c.first * cols, forced.data(), c.count, pool);
        const std::vector<float> got(ys[i].begin() + c.first * c.w->m.rows,
                                     ys[i].begin() + (c.first + c.count) * c.w->m.rows);
        EXPECT_TRUE(same_bits(got, forced));
    }
}

TEST(KernelTable, AForcedPathOverridesTheInstalledTableUntilOneIsInstalled) {
    KernelStateGuard guard;
    KernelTable table;
    table.set(TensorType::Q4_K, KernelPhase::Decode, CpuPath::scalar);
    install_kernel_table(table);
    EXPECT_EQ(kernel_path(TensorType::Q4_K, 1), CpuPath::scalar);
    EXPECT_EQ(kernel_path(TensorType::Q6_K, 1), best_cpu_path(detect_cpu_features()));
    const CpuPath best = best_cpu_path(detect_cpu_features());
    ASSERT_TRUE(set_cpu_path(best));
    EXPECT_EQ(kernel_path(TensorType::Q4_K, 1), best);
    install_kernel_table(table);  // clears the forced path
    EXPECT_FALSE(forced_cpu_path());
    EXPECT_EQ(kernel_path(TensorType::Q4_K, 1), CpuPath::scalar);
    EXPECT_EQ(installed_kernel_table().path(TensorType::Q4_K, KernelPhase::Decode),
              CpuPath::scalar);
}

}  // namespace
}  // namespace strata::cpu

namespace strata {
namespace {

TEST(CpuKernelTiming, TheFastestPathWinsUnlessTheWidestIsWithinTheMargin) {
    const CpuPathChoice wide = CpuPathChoice::Avx512, narrow = CpuPathChoice::Avx2;
    const std::vector<KernelTiming> clear = {{narrow, 27e9}, {wide, 18e9}};
    EXPECT_EQ(pick_kernel_path(clear, wide), narrow);
    const std::vector<KernelTiming> close = {{narrow, 20e9 * (1 + kKernelTieMargin / 2)},
                                             {wide, 20e9}};
    EXPECT_EQ(pick_kernel_path(close, wide), wide) << "within the margin the widest keeps it";
    const std::vector<KernelTiming> wider_wins = {{narrow, 10e9}, {wide, 30e9}};
    EXPECT_EQ(pick_kernel_path(wider_wins, wide), wide);
    const std::vector<KernelTiming> one = {{narrow, 5e9}};
    EXPECT_EQ(pick_kernel_path(one, wide), narrow);
    EXPECT_EQ(pick_kernel_path({}, wide), wide);
}

// A small measurement (one pass, the smallest matrix it takes): one choice per timed type and
// phase, naming a timed path and carrying its figure. Only the shape is checked, never speed.
TEST(CpuKernelTiming, ASmallMeasurementHasAChoicePerTypeAndPhase) {
    const std::vector<TensorType> types = timed_kernel_types();
    CpuKernelTimingOptions o;
    o.threads = 2;
    o.decode_bytes = 16ull << 20;  // a 1024-row F32 prompt matrix at the least
    o.passes = 1;
    o.quick = true;
    std::vector<TensorType> announced;
    auto k = measure_cpu_kernels(o, [&](TensorType t, int i, int n) {
        EXPECT_EQ(i, int(announced.size()));
        EXPECT_EQ(n, int(types.size()));
        announced.push_back(t);
    });
    ASSERT_TRUE(k) << k.error().message;
    EXPECT_EQ(announced, types);
    EXPECT_FALSE(k->cpu_model.empty());
    EXPECT_TRUE(k->quick);
    EXPECT_EQ(k->threads, 2);
    EXPECT_NE(k->table.widest, CpuPathChoice::Best);
    if (types.empty()) {
        EXPECT_TRUE(k->table.empty()) << "fewer than two fast paths: nothing to choose";
        return;
    }
    ASSERT_EQ(k->table.choices.size(), types.size() * std::size(kAllKernelPhases));
    EXPECT_LE(size_t(k->busy_choices), k->table.choices.size());
    for (const TensorType t : types) {
        for (const KernelPhase p : kAllKernelPhases) {
            const CpuKernelChoice* c = k->table.find(t, p);
            ASSERT_NE(c, nullptr) << tensor_type_name(t) << " " << kernel_phase_name(p);
            ASSERT_GE(c->timings.size(), 2u);
            bool named = false;
            for (const KernelTiming& timing : c->timings) {
                EXPECT_NE(timing.path, CpuPathChoice::Scalar) << "the reference is not timed";
                EXPECT_GT(timing.figure, 0);
                if (timing.path == c->path) {
                    named = true;
                    EXPECT_EQ(timing.figure, c->figure);
                }
            }
            EXPECT_TRUE(named) << "the choice is one of the timed paths";
            // Timed while other work had the cores, a choice stays on the widest path.
            const CpuPathChoice picked = pick_kernel_path(c->timings, k->table.widest);
            if (k->busy_choices == 0) {
                EXPECT_EQ(c->path, picked);
            } else {
                EXPECT_TRUE(c->path == picked || c->path == k->table.widest);
            }
        }
    }
}

TEST(CpuKernelTiming, ATableOfAnotherCpuIsMeasuredElsewhere) {
    const CpuProfile now{"Sentinel CPU", 2, 2, {"avx2", "fma", "f16c"}};
    CpuKernelProfile k;
    k.cpu_model = now.model;
    k.simd = now.simd;
    EXPECT_FALSE(cpu_kernels_measured_elsewhere(k, now));
    k.simd.push_back("avx512f");
    EXPECT_TRUE(cpu_kernels_measured_elsewhere(k, now)) << "other features";
    k.simd = now.simd;
    k.cpu_model = "Another CPU";
    EXPECT_TRUE(cpu_kernels_measured_elsewhere(k, now)) << "another model";
}

}  // namespace
}  // namespace strata
