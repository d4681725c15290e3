// strata_bench_quantize: how fast `strata synth` turns weights into each tensor type.
//
// For every type it times, on the same seeded Gaussian rows (the distribution synth gives a
// projection matrix), each quantize path this CPU runs (quant/fast_quantize.h: the scalar
// reference quantize_row, AVX2, AVX-512) on one thread, and synth's row encoder (the path
// `strata synth` writes through) on all threads, plus synth's random-weight generator. Figures
// are million weights per second, of the fastest of repeated passes over the same rows; one
// thread is timed on that thread's CPU clock (stable on a machine busy with other work), all
// threads on the wall clock. Every path's bytes are compared
// with the reference's and the run fails when they differ.
//
//   strata_bench_quantize [--types Q4_K,Q6_K] [--paths scalar,avx512] [--threads N] [--mib M]
//                         [--seconds S] [--json]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "quant/fast_quantize.h"
#include "quant/quant.h"
#include "synth/row_encoder.h"
#include "synth/weight_init.h"
#include "util/table.h"
#include "util/thread_pool.h"

namespace {

using namespace strata;

double clock_seconds(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Runs `pass` (which processes `weights` weights) over and over until min_seconds have passed
// on `clock`, timing each run; returns the weights per second of the fastest run. On a machine
// shared with other work the fastest run is the one least disturbed by it.
template <typename Pass>
double rate(clockid_t clock, double min_seconds, uint64_t weights, Pass&& pass) {
    pass();  // warm up: page in buffers, settle the dispatch
    double best = 0, total = 0;
    do {
        const double start = clock_seconds(clock);
        pass();
        const double elapsed = clock_seconds(clock) - start;
        total += elapsed;
        best = std::max(best, double(weights) / elapsed);
    } while (total < min_seconds);
    return best;
}

std::string fmt(double v, int decimals = 1) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Speed of synth's weight encoders per tensor type"};
    std::string types_arg = "Q4_K,Q5_K,Q6_K,Q8_0,Q2_K,Q3_K,IQ4_XS,F16";
    int threads = 0;
    double mib = 16;
    double seconds = 1.0;
    std::string paths_arg = "scalar,avx2,avx512";
    bool json = false;
    app.add_option("--types", types_arg, "comma-separated tensor types");
    app.add_option("--paths", paths_arg,
                   "comma-separated quantize paths to time on one thread (those this CPU runs); "
                   "the bytes of each are compared with the scalar reference's");
    app.add_option("--threads", threads, "threads for the all-threads figures (0: every core)");
    app.add_option("--mib", mib, "MiB of float weights per pass");
    app.add_option("--seconds", seconds, "minimum seconds per figure");
    app.add_flag("--json", json, "print JSON instead of a table");
    CLI11_PARSE(app, argc, argv);

    std::vector<TensorType> types;
    std::stringstream ss(types_arg);
    for (std::string name; std::getline(ss, name, ',');) {
        const auto t = tensor_type_from_name(name);
        if (!t || !row_encoder_for(*t)) {
            std::fprintf(stderr, "strata_bench_quantize: synth cannot write type %s\n",
                         name.c_str());
            return 2;
        }
        types.push_back(*t);
    }
    std::vector<quant::QuantizePath> paths;
    for (quant::QuantizePath p : quant::kAllQuantizePaths) {
        const std::string name(quant::quantize_path_name(p));
        if (quant::quantize_path_runs_here(p) &&
            ("," + paths_arg + ",").find("," + name + ",") != std::string::npos) {
            paths.push_back(p);
        }
    }

    ThreadPool pool(threads);
    constexpr uint64_t kRow = 4096;
    const uint64_t n_rows = std::max<uint64_t>(1, uint64_t(mib * 1024 * 1024 / 4) / kRow);
    const uint64_t n = n_rows * kRow;
    const WeightInit init{InitKind::Normal, 1.0f / 64, 0, 0, 0};  // a 4096-wide projection
    const uint64_t key = tensor_stream_key(1, "bench.weight");
    std::vector<float> x(n);

    // Generation: the first stage of every synth chunk.
    const double gen1 = rate(CLOCK_THREAD_CPUTIME_ID, seconds, n,
                             [&] { generate_values(init, key, 0, n, kRow, x.data()); });
    const double genn = rate(CLOCK_MONOTONIC, seconds, n, [&] {
        pool.parallel_for(int64_t(n_rows), 64, [&](int64_t b, int64_t e, int) {
            generate_values(init, key, uint64_t(b) * kRow, uint64_t(e - b) * kRow, kRow,
                            x.data() + b * int64_t(kRow));
        });
    });

    std::vector<TableColumn> columns = {{"type"}};
    for (quant::QuantizePath p : paths) {
        columns.push_back({std::string(quant::quantize_path_name(p)) + " 1T", Align::Right});
    }
    columns.push_back({"speed-up", Align::Right});
    columns.push_back({"synth " + std::to_string(pool.size()) + "T", Align::Right});
    columns.push_back({"bytes"});
    TextTable table(columns);
    std::vector<std::string> gen_row = {"generate"};
    gen_row.resize(paths.size() + 1);
    gen_row.back() = fmt(gen1 / 1e6);
    gen_row.push_back("");
    gen_row.push_back(fmt(genn / 1e6));
    table.add_row(gen_row);
    nlohmann::json out = {{"threads", pool.size()},
                          {"best_path", quant::quantize_path_name(quant::best_quantize_path())},
                          {"weights_per_pass", n},
                          {"generate", {{"one_thread", gen1}, {"all_threads", genn}}},
                          {"types", nlohmann::json::array()}};
    bool all_identical = true;
    for (TensorType t : types) {
        const uint64_t row_bytes = quant::quant_row_bytes(t, int64_t(kRow)).value();
        std::vector<uint64_t> ref_words(n_rows * row_bytes / 8 + 1), got_words(ref_words.size());
        auto* ref = reinterpret_cast<uint8_t*>(ref_words.data());
        auto* got = reinterpret_cast<uint8_t*>(got_words.data());
        const std::string name(tensor_type_name(t));
        std::vector<std::string> row = {name};
        nlohmann::json j = {{"type", name}};
        pool.parallel_for(int64_t(n_rows), 16, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) {
                quant::quantize_row(t, x.data() + i * int64_t(kRow), ref + uint64_t(i) * row_bytes,
                                    int64_t(kRow));
            }
        });
        bool identical = true;
        double scalar1 = 0, best1 = 0;
        for (quant::QuantizePath p : paths) {
            const double r = rate(CLOCK_THREAD_CPUTIME_ID, seconds, n, [&] {
                for (uint64_t i = 0; i < n_rows; ++i) {
                    quant::quantize_row_on(p, t, x.data() + i * kRow, got + i * row_bytes,
                                           int64_t(kRow));
                }
            });
            identical = identical && std::memcmp(ref, got, n_rows * row_bytes) == 0;
            if (p == quant::QuantizePath::scalar) scalar1 = r;
            if (p == quant::best_quantize_path()) best1 = r;
            row.push_back(fmt(r / 1e6));
            j[std::string(quant::quantize_path_name(p)) + "_one_thread"] = r;
        }
        // synth's encoder on every thread, as the generator's workers call it.
        const RowEncoder encoder = *row_encoder_for(t);
        const double encn = rate(CLOCK_MONOTONIC, seconds, n, [&] {
            pool.parallel_for(int64_t(n_rows), 16, [&](int64_t b, int64_t e, int) {
                encoder.encode(x.data() + b * int64_t(kRow), got + uint64_t(b) * row_bytes,
                               size_t(e - b), kRow);
            });
        });
        identical = identical && std::memcmp(ref, got, n_rows * row_bytes) == 0;
        all_identical = all_identical && identical;
        row.push_back(scalar1 > 0 && best1 > 0 ? fmt(best1 / scalar1, 1) + "x" : "");
        row.push_back(fmt(encn / 1e6));
        row.push_back(identical ? "identical" : "DIFFERENT");
        table.add_row(row);
        j["synth_all_threads"] = encn;
        j["identical"] = identical;
        out["types"].push_back(j);
    }
    if (json) {
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf(
            "synth weight encoders, million weights/s: %llu weights per pass (rows of "
            "%llu), fastest pass, one thread on its CPU clock, %d threads on the wall clock; synth "
            "uses "
            "the %s path; bytes: every path against the scalar reference\n",
            static_cast<unsigned long long>(n), static_cast<unsigned long long>(kRow), pool.size(),
            std::string(quant::quantize_path_name(quant::best_quantize_path())).c_str());
        std::fputs(table.render("  ").c_str(), stdout);
    }
    return all_identical ? 0 : 1;
}
