// strata_bench_cuda_matvec: speed of the CUDA backend's quantized products per weight type.
//
// Decode (n <= 8 tokens) is bound by reading the weights: its figure is weight GB/s and the
// fraction of the device's read bandwidth measured in the same run (gpu::measure_read_bandwidth,
// a kernel that only reads). Each call reads a different copy of the matrix, the copies together
// larger than the L2 cache, so every call reads from HBM. Prompt batches (n > 8) are bound by
// arithmetic: their figure is TFLOP/s (2 rows cols n / time), dequantization included.
// Decode products run in a CUDA graph (as in a decode step); each call includes the rounding
// of x to the kernels' activation format.
// Weights are random bytes: the kernels' speed does not depend on the values.
//
//   strata_bench_cuda_matvec [--types Q4_K,Q8_0] [--shapes 4096x14336,14336x4096]
//                            [--tokens 1,8,512] [--min-seconds S] [--json]
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/quant_matmul.h"
#include "gpu/gpu.h"
#include "quant/quant.h"

namespace {

using namespace strata;

constexpr TensorType kAllTypes[] = {
    TensorType::F32,  TensorType::F16,    TensorType::BF16,   TensorType::Q4_0,
    TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,
    TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,
    TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4,
};

// Bytes that make the working set of the rotating copies larger than any L2 cache.
constexpr size_t kWorkingSet = size_t(512) << 20;

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "strata_bench_cuda_matvec: %s\n", what.c_str());
    std::exit(1);
}

template <typename T>
T must(Result<T> r, const char* what) {
    if (!r.ok()) die(std::string(what) + ": " + r.error().message);
    return std::move(r).value();
}

void must(Result<void> r, const char* what) {
    if (!r.ok()) die(std::string(what) + ": " + r.error().message);
}

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Figure {
    std::string type, shape;
    int64_t n = 0;
    double us = 0, gbps = 0, fraction = 0, tflops = 0;
};

Figure measure(TensorType t, int64_t rows, int64_t cols, int64_t n, double min_seconds,
               double read_bandwidth, cudaStream_t stream) {
    const size_t row_bytes = quant::quant_row_bytes(t, cols).value();
    const size_t matrix = row_bytes * size_t(rows);
    const size_t copies = std::max<size_t>(1, (kWorkingSet + matrix - 1) / matrix);
    gpu::DeviceBuffer weights = must(gpu::DeviceBuffer::allocate(matrix * copies), "weights");
    {
        std::vector<uint64_t> bytes((matrix + 7) / 8);
        std::mt19937_64 rng(uint64_t(t) * 1000003u + uint64_t(rows));
        for (uint64_t& b : bytes) b = rng();
        for (size_t c = 0; c < copies; ++c) {
            must(gpu::copy(weights.data() + c * matrix, bytes.data(), matrix,
                           gpu::CopyKind::HostToDevice),
                 "copy");
        }
    }
    std::vector<float> x(size_t(n * cols));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 1);
    for (float& v : x) v = normal(rng);
    gpu::DeviceBuffer dx = must(gpu::DeviceBuffer::allocate(x.size() * 4), "x");
    must(gpu::copy(dx.data(), x.data(), x.size() * 4, gpu::CopyKind::HostToDevice), "copy");
    gpu::DeviceBuffer dy = must(gpu::DeviceBuffer::allocate(size_t(n * rows) * 4), "y");
    auto matmul =
        must(cuda::Matmul::create(rows * cols, n, cols, stream, Tuning{}), "Matmul::create");

    TensorView w;
    w.type = t;
    w.ne = {cols, rows, 1, 1};
    w.row_bytes = row_bytes;
    w.where = {MemoryKind::Device, 0};
    auto call = [&](size_t i) {
        w.data = weights.data() + (i % copies) * matrix;
        matmul->linear(w, nullptr, reinterpret_cast<const float*>(dx.data()),
                       reinterpret_cast<float*>(dy.data()), n);
    };
    for (size_t i = 0; i < copies + 2; ++i) call(i);  // warm-up (and the first cuBLAS plans)
    check(cudaStreamSynchronize(stream), "warm-up");

    // Decode products are timed as a decode step runs them: captured in a CUDA graph and
    // replayed, so the figure is the GPU's time, not the host's launch rate (a launch costs
    // the host about as long as a small matvec takes). Prompt GEMMs are launched directly.
    const bool graphed = n <= 8;
    const size_t per_graph = std::max<size_t>(copies, 32);
    cudaGraphExec_t exec = nullptr;
    if (graphed) {
        cudaGraph_t graph = nullptr;
        check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
        for (size_t i = 0; i < per_graph; ++i) call(i);
        check(cudaStreamEndCapture(stream, &graph), "capture");
        check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
        cudaGraphDestroy(graph);
        check(cudaGraphLaunch(exec, stream), "graph warm-up");
        check(cudaStreamSynchronize(stream), "graph warm-up");
    }
    const size_t unit = graphed ? per_graph : 1;  // calls per launch below

    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    size_t launches = graphed ? 1 : 8, done = 0;
    double seconds = 0;
    while (true) {
        check(cudaEventRecord(start, stream), "record");
        for (size_t i = 0; i < launches; ++i) {
            if (graphed) {
                check(cudaGraphLaunch(exec, stream), "graph launch");
            } else {
                call(done + i);
            }
        }
        check(cudaEventRecord(stop, stream), "record");
        check(cudaEventSynchronize(stop), "run");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
        done += launches;
        seconds = ms * 1e-3;
        if (seconds >= min_seconds || launches >= (size_t(1) << 20)) break;
        launches *= 4;
    }
    const size_t calls = launches * unit;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (exec) cudaGraphExecDestroy(exec);

    Figure f;
    f.type = std::string(tensor_type_name(t));
    f.shape = std::to_string(rows) + "x" + std::to_string(cols);
    f.n = n;
    f.us = seconds / double(calls) * 1e6;
    f.gbps = double(matrix) / (f.us * 1e-6) / 1e9;
    f.fraction = read_bandwidth > 0 ? f.gbps * 1e9 / read_bandwidth : 0;
    f.tflops = 2.0 * double(rows) * double(cols) * double(n) / (f.us * 1e-6) / 1e12;
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Speed of the CUDA quantized matvec / GEMM against the device read bandwidth"};
    std::string types_arg, shapes_arg = "4096x14336", tokens_arg = "1";
    double min_seconds = 0.2;
    bool json = false;
    app.add_option("--types", types_arg, "weight types, comma-separated (default: all)");
    app.add_option("--shapes", shapes_arg, "rows x cols, comma-separated");
    app.add_option("--tokens", tokens_arg, "tokens per call, comma-separated");
    app.add_option("--min-seconds", min_seconds, "timed seconds per measurement");
    app.add_flag("--json", json, "print JSON instead of a table");
    CLI11_PARSE(app, argc, argv);

    if (gpu::devices().list.empty()) die("no GPU: " + gpu::devices().reason);
    std::vector<TensorType> types;
    if (types_arg.empty()) {
        types.assign(std::begin(kAllTypes), std::end(kAllTypes));
    } else {
        for (const std::string& name : split(types_arg)) {
            const auto t = tensor_type_from_name(name);
            if (!t || !cuda::linear_supports(*t)) die("unsupported type " + name);
            types.push_back(*t);
        }
    }
    std::vector<std::pair<int64_t, int64_t>> shapes;
    for (const std::string& s : split(shapes_arg)) {
        const size_t x = s.find('x');
        if (x == std::string::npos) die("bad shape " + s + " (want ROWSxCOLS)");
        shapes.emplace_back(std::stoll(s.substr(0, x)), std::stoll(s.substr(x + 1)));
    }
    std::vector<int64_t> tokens;
    for (const std::string& s : split(tokens_arg)) tokens.push_back(std::stoll(s));

    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    double read_bandwidth = 0;
    {
        gpu::DeviceBuffer probe = must(gpu::DeviceBuffer::allocate(size_t(1) << 30), "probe");
        read_bandwidth = must(gpu::measure_read_bandwidth(probe, 10), "read bandwidth");
    }
    if (!json) {
        std::printf("%s\ndevice read bandwidth: %.0f GB/s\n\n", gpu::describe_devices().c_str(),
                    read_bandwidth / 1e9);
        std::printf("%-7s %-12s %5s %10s %9s %7s %9s\n", "type", "rows x cols", "n", "us/call",
                    "GB/s", "of read", "TFLOP/s");
    }
    nlohmann::json results = nlohmann::json::array();
    for (const TensorType t : types) {
        for (const auto& [rows, cols] : shapes) {
            if (cols % int64_t(tensor_type_info(t)->block_size) != 0) continue;
            for (const int64_t n : tokens) {
                const Figure f = measure(t, rows, cols, n, min_seconds, read_bandwidth, stream);
                if (json) {
                    results.push_back({{"type", f.type},
                                       {"shape", f.shape},
                                       {"tokens", f.n},
                                       {"us_per_call", f.us},
                                       {"weight_gb_per_s", f.gbps},
                                       {"fraction_of_read_bandwidth", f.fraction},
                                       {"tflop_per_s", f.tflops}});
                } else {
                    std::printf("%-7s %-12s %5lld %10.2f %9.0f %6.0f%% %9.2f\n", f.type.c_str(),
                                f.shape.c_str(), static_cast<long long>(f.n), f.us, f.gbps,
                                100 * f.fraction, f.tflops);
                }
            }
        }
    }
    if (json) {
        nlohmann::json out;
        out["device"] = gpu::describe_devices();
        out["read_bandwidth_gb_per_s"] = read_bandwidth / 1e9;
        out["results"] = results;
        std::printf("%s\n", out.dump(2).c_str());
    }
    cudaStreamDestroy(stream);
    return 0;
}
