// matmul_multi runs several matrices over the same activations as one job; each result must be
// exactly what matmul gives for that matrix alone (same activation conversion, same kernels,
// rows only distributed differently), for mixed weight types sharing or not sharing an
// activation type, for decode (n = 1) and batches, on every CPU path this machine runs.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "quant/quant.h"

namespace strata::cpu {
namespace {

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

TEST(CpuMatmulMulti, EqualsMatmulOfEachMatrix) {
    std::mt19937 rng(5);
    const int64_t cols = 512;
    const TensorType types[] = {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0,
                                TensorType::F16};
    const int64_t rows[] = {300, 64, 129, 7};
    std::vector<Owned> owned;
    std::vector<QuantMatrix> ws;
    for (size_t i = 0; i < 4; ++i) owned.push_back(random_matrix(types[i], rows[i], cols, rng));
    for (const Owned& o : owned) ws.push_back(o.m);
    ThreadPool pool(2);
    for (CpuPath path : kAllCpuPaths) {
        if (!cpu_path_runs_on(path, detect_cpu_features())) continue;
        ASSERT_TRUE(set_cpu_path(path));
        for (int64_t n : {1, 3, 17}) {
            std::normal_distribution<float> nd(0, 1);
            std::vector<float> x(size_t(n * cols));
            for (float& v : x) v = nd(rng);
            std::vector<std::vector<float>> multi(4), single(4);
            std::vector<float*> ys;
            for (size_t i = 0; i < 4; ++i) {
                multi[i].assign(size_t(n * rows[i]), -1.0f);
                single[i].assign(size_t(n * rows[i]), -2.0f);
                ys.push_back(multi[i].data());
                matmul(ws[i], x.data(), single[i].data(), n, pool);
            }
            matmul_multi(ws, x.data(), ys, n, pool);
            for (size_t i = 0; i < 4; ++i) {
                EXPECT_EQ(multi[i], single[i])
                    << cpu_path_name(path) << " n=" << n << " " << tensor_type_name(types[i]);
            }
        }
    }
    ASSERT_TRUE(set_cpu_path(best_cpu_path(detect_cpu_features())));
}

}  // namespace
}  // namespace strata::cpu
