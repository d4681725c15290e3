// strata_bench_matmul: speed of the CPU matvec / matmul kernels per weight type, shape and path.
//
// Decode (matvec) is memory-bound: its figure is weight GB/s read on all threads, and the
// fraction of the memory-read ceiling measured in the same run (every thread streaming through
// a buffer much larger than the last-level cache). Weights rotate among enough matrices that the
// working set is larger than the cache too, so every call reads its weights from memory.
// Batches (matmul) are compute-bound: their figure is GFLOP/s (2 * rows * cols * batch / time).
//
// A working set smaller than the cache measures the kernels' compute ceiling instead: e.g.
// --threads 1 --shapes 512x4096 --working-set-mib 2 gives one core's GB/s with the weights in
// its cache, the most that core can consume from memory.
//
//   strata_bench_matmul [--threads N] [--types Q4_K,Q8_0] [--paths avx512,avx2]
//                       [--shapes 4096x4096,512x4096] [--working-set-mib M] [--cpu-time] [--json]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_path.h"
#include "backend/cpu/matmul.h"
#include "profile/memory_bandwidth.h"
#include "quant/quant.h"
#include "util/table.h"
#include "util/thread_pool.h"
#include "util/units.h"

namespace {

using namespace strata;
// Seconds on the wall clock, or (--cpu-time) on the calling thread's CPU-time clock: with one
// thread that is the time the kernels actually ran, which on a machine busy with other work is
// the only stable measure of what one core can do.
bool g_cpu_time = false;

double now_seconds() {
    timespec ts{};
    clock_gettime(g_cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// 64-byte aligned bytes that are actually backed by memory (written once).
struct AlignedBuffer {
    explicit AlignedBuffer(size_t n)
        : size(n), data(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {
        std::memset(data, 1, size);
    }
    ~AlignedBuffer() { std::free(data); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    size_t size;
    uint8_t* data;
};

struct Shape {
    int64_t rows, cols, batch;
};

struct Measurement {
    std::string type, path, kernel;
    Shape shape;
    double ms_per_call, weight_gbps, fraction_of_ceiling, gflops;
};

// Fills `buffer` with as many copies of a rows x cols matrix of type t as fit (rows quantized
// once from random data, then replicated: the content does not change the speed).
std::vector<cpu::QuantMatrix> make_matrices(TensorType t, const Shape& s, AlignedBuffer& buffer) {
    const size_t row_bytes = quant::quant_row_bytes(t, s.cols).value();
    const size_t matrix_bytes = (row_bytes * size_t(s.rows) + 63) / 64 * 64;
    constexpr int64_t kDistinctRows = 64;
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> row(size_t(s.cols));
    std::vector<uint8_t> pattern(row_bytes * kDistinctRows);
    for (int64_t r = 0; r < kDistinctRows; ++r) {
        for (auto& v : row) v = normal(rng);
        quant::quantize_row(t, row.data(), pattern.data() + size_t(r) * row_bytes, s.cols);
    }
    std::vector<cpu::QuantMatrix> matrices;
    for (size_t offset = 0; offset + matrix_bytes <= buffer.size; offset += matrix_bytes) {
        uint8_t* m = buffer.data + offset;
        for (int64_t r = 0; r < s.rows; ++r) {
            std::memcpy(m + size_t(r) * row_bytes,
                        pattern.data() + size_t(r % kDistinctRows) * row_bytes, row_bytes);
        }
        matrices.push_back(cpu::make_quant_matrix(t, m, s.rows, s.cols).value());
    }
    return matrices;
}

Measurement measure(TensorType t, cpu::CpuPath path, const Shape& s,
                    const std::vector<cpu::QuantMatrix>& matrices, double ceiling,
                    double min_seconds, ThreadPool& pool) {
    std::vector<float> x(size_t(s.batch * s.cols)), y(size_t(s.batch * s.rows));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0, 1);
    for (auto& v : x) v = normal(rng);
    // Warm-up call (scratch buffers, thread wake-up), then whole rotations until min_seconds.
    cpu::matmul_on_path(path, matrices.back(), x.data(), y.data(), s.batch, pool);
    size_t calls = 0;
    const double t0 = now_seconds();
    double elapsed = 0;
    do {
        cpu::matmul_on_path(path, matrices[calls % matrices.size()], x.data(), y.data(), s.batch,
                            pool);
        ++calls;
        elapsed = (now_seconds() - t0);
    } while (elapsed < min_seconds || calls < 3);
    const double per_call = elapsed / double(calls);
    const double bytes = double(quant::quant_row_bytes(t, s.cols).value()) * double(s.rows);
    Measurement m;
    m.type = std::string(tensor_type_name(t));
    m.path = std::string(cpu::cpu_path_name(path));
    m.kernel = std::string(cpu::matmul_kernel_name(path, t));
    m.shape = s;
    m.ms_per_call = per_call * 1e3;
    m.weight_gbps = bytes / per_call / 1e9;
    m.fraction_of_ceiling = m.weight_gbps / ceiling;
    m.gflops = 2.0 * double(s.rows) * double(s.cols) * double(s.batch) / per_call / 1e9;
    return m;
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Speed of the CPU matvec / matmul kernels against the memory-read ceiling"};
    int threads = 0;
    std::string types_arg =
        "Q8_0,Q4_K,Q6_K,Q4_0,Q5_K,IQ4_NL,Q5_0,Q4_1,Q5_1,Q3_K,Q2_K,IQ4_XS,F16,BF16,F32,MXFP4";
    std::string paths_arg;
    std::string batches_arg = "32,128";
    std::string shapes_arg = "4096x4096,14336x4096,4096x14336";
    std::string batch_shapes_arg = "4096x4096";
    int working_set_mib = 1536;
    double min_seconds = 0.4;
    bool json = false;
    app.add_option("--threads", threads, "compute threads (0: physical cores)");
    app.add_option("--types", types_arg, "weight types, comma-separated");
    app.add_option("--paths", paths_arg,
                   "CPU paths (scalar, avx2, avx512); default: all this CPU runs");
    app.add_option("--shapes", shapes_arg, "matvec shapes, rows x cols, comma-separated");
    app.add_option("--batches", batches_arg,
                   "matmul batch sizes, on each of --batch-shapes (empty: none)");
    app.add_option(
        "--batch-shapes", batch_shapes_arg,
        "matmul shapes, rows x cols, comma-separated (a MoE expert's: 768x2048,2048x768)");
    app.add_option("--working-set-mib", working_set_mib,
                   "bytes of weights to rotate through; keep it well above the last-level cache");
    app.add_option("--min-seconds", min_seconds, "timed seconds per measurement");
    app.add_flag("--cpu-time", g_cpu_time,
                 "time by the calling thread's CPU time (meaningful with --threads 1 only)");
    app.add_flag("--json", json, "print JSON instead of a table");
    CLI11_PARSE(app, argc, argv);
    if (g_cpu_time && threads != 1) {
        std::fprintf(stderr, "strata_bench_matmul: --cpu-time needs --threads 1\n");
        return 2;
    }

    std::vector<TensorType> types;
    for (const auto& name : split_list(types_arg)) {
        const auto t = tensor_type_from_name(name);
        if (!t || !cpu::matmul_supports(*t)) {
            std::fprintf(stderr, "strata_bench_matmul: %s is not a CPU matmul weight type\n",
                         name.c_str());
            return 2;
        }
        types.push_back(*t);
    }
    const cpu::CpuFeatures features = cpu::detect_cpu_features();
    std::vector<cpu::CpuPath> paths;
    for (const auto& name : paths_arg.empty() ? std::vector<std::string>{"avx512", "avx2", "scalar"}
                                              : split_list(paths_arg)) {
        const auto p = cpu::parse_cpu_path(name);
        if (!p) {
            std::fprintf(stderr, "strata_bench_matmul: unknown path %s\n", name.c_str());
            return 2;
        }
        if (cpu::cpu_path_runs_on(*p, features))
            paths.push_back(*p);
        else if (!paths_arg.empty())
            std::fprintf(stderr, "strata_bench_matmul: this CPU cannot run %s; skipped\n",
                         name.c_str());
    }
    std::vector<Shape> shapes;
    const auto parse_shape = [](const std::string& item, Shape& out) {
        long long rows = 0, cols = 0;
        char sep = 0;
        if (std::sscanf(item.c_str(), "%lld%c%lld", &rows, &sep, &cols) != 3 || sep != 'x' ||
            rows <= 0 || cols <= 0) {
            std::fprintf(stderr, "strata_bench_matmul: bad shape %s (want ROWSxCOLS)\n",
                         item.c_str());
            return false;
        }
        out = {rows, cols, 1};
        return true;
    };
    for (const auto& item : split_list(shapes_arg)) {
        Shape sh{};
        if (!parse_shape(item, sh)) return 2;
        shapes.push_back(sh);
    }
    for (const auto& item : split_list(batch_shapes_arg)) {
        Shape sh{};
        if (!parse_shape(item, sh)) return 2;
        for (const auto& b : split_list(batches_arg)) {
            sh.batch = std::stoll(b);
            shapes.push_back(sh);
        }
    }

    ThreadPool pool(threads);
    AlignedBuffer buffer(size_t(working_set_mib) << 20);
    const double ceiling =
        measure_read_ceiling(reinterpret_cast<const std::byte*>(buffer.data), buffer.size, pool) /
        1e9;
    if (!json) {
        std::printf("threads %d, working set %d MiB, memory-read ceiling %.1f GB/s\n", pool.size(),
                    working_set_mib, ceiling);
    }

    std::vector<Measurement> results;
    for (TensorType t : types) {
        for (const Shape& s : shapes) {
            const auto matrices = make_matrices(t, s, buffer);
            // One matrix is allowed: a working set that small is meant to stay in the cache.
            if (matrices.empty()) {
                std::fprintf(stderr,
                             "strata_bench_matmul: %s %lld x %lld: the working set holds "
                             "no matrix; skipped\n",
                             std::string(tensor_type_name(t)).c_str(), (long long)s.rows,
                             (long long)s.cols);
                continue;
            }
            for (cpu::CpuPath p : paths) {
                // A path without a kernel of its own for t runs the scalar one: measured once.
                if (p != cpu::CpuPath::scalar && cpu::matmul_kernel_name(p, t) == "scalar")
                    continue;
                // The scalar path is slow on batches; one decode shape says enough.
                if (p == cpu::CpuPath::scalar && (s.batch > 1 || &s != &shapes.front())) continue;
                results.push_back(measure(t, p, s, matrices, ceiling, min_seconds, pool));
                if (!json) {
                    const auto& m = results.back();
                    std::fprintf(stderr, "  %s %s %lldx%lld n=%lld: %.1f GB/s\n", m.type.c_str(),
                                 m.path.c_str(), (long long)s.rows, (long long)s.cols,
                                 (long long)s.batch, m.weight_gbps);
                }
            }
        }
    }

    if (json) {
        nlohmann::json out;
        out["threads"] = pool.size();
        out["working_set_bytes"] = uint64_t(working_set_mib) << 20;
        out["read_ceiling_gbps"] = ceiling;
        out["results"] = nlohmann::json::array();
        for (const auto& m : results) {
            out["results"].push_back({{"type", m.type},
                                      {"path", m.path},
                                      {"kernel", m.kernel},
                                      {"rows", m.shape.rows},
                                      {"cols", m.shape.cols},
                                      {"batch", m.shape.batch},
                                      {"ms_per_call", m.ms_per_call},
                                      {"weight_gbps", m.weight_gbps},
                                      {"fraction_of_ceiling", m.fraction_of_ceiling},
                                      {"gflops", m.gflops}});
        }
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    TextTable table({{"type"},
                     {"path"},
                     {"rows x cols"},
                     {"batch", Align::Right},
                     {"ms/call", Align::Right},
                     {"weight GB/s", Align::Right},
                     {"of ceiling", Align::Right},
                     {"GFLOP/s", Align::Right}});
    for (const auto& m : results) {
        table.add_row(
            {m.type, m.path, std::to_string(m.shape.rows) + " x " + std::to_string(m.shape.cols),
             std::to_string(m.shape.batch), format_fixed(m.ms_per_call, 3),
             format_fixed(m.weight_gbps, 1), format_fixed(100 * m.fraction_of_ceiling, 0) + "%",
             format_fixed(m.gflops, 1)});
    }
    std::fputs(table.render().c_str(), stdout);
    return 0;
}
