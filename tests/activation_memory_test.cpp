// The engine's memory besides weights and KV cache is what model/activation_memory.h counts and
// the plan reserves: an engine with its CPU backend is created and driven through its largest
// batch and then decoded to the end of its context, and the most bytes it had allocated at once
// (allocation_counter.h: every operator new, plain and aligned, on every thread) stay within the
// count. The KV cache (an AlignedBuffer) is not in either figure; the plan counts it apart.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocation_counter.h"
#include "engine/engine.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "model/activation_memory.h"
#include "runtime/backend_factory.h"
#include "store/model_store.h"
#include "store/store_layout.h"

namespace strata {
namespace {

struct Case {
    std::string preset;
    TensorType weights;
    KvType kv;
    uint32_t max_batch, n_ctx;
};

std::string case_name(const Case& c) {
    std::string n = c.preset + "_" + std::string(tensor_type_name(c.weights)) + "_" +
                    std::string(kv_type_name(c.kv)) + "_b" + std::to_string(c.max_batch);
    for (char& ch : n) {
        if (ch == '-') ch = '_';
    }
    return n;
}

class ActivationMemoryCount : public ::testing::TestWithParam<Case> {};

TEST_P(ActivationMemoryCount, EngineAllocatesWithinTheCount) {
    const Case c = GetParam();
    const std::string& path = test::synth_test_model(c.preset, c.weights, 1);
    auto file = read_gguf(path);
    ASSERT_TRUE(file) << file.error().message;
    auto info = load_model_info(std::move(*file));
    ASSERT_TRUE(info) << info.error().message;
    auto store = ModelStore::open(*info, resident_layout(*info));
    ASSERT_TRUE(store) << store.error().message;

    engine::EngineOptions o;
    o.threads = 2;
    o.n_ctx = c.n_ctx;
    o.kv_type = c.kv;
    o.max_batch = c.max_batch;
    ActivationShape shape;
    shape.max_batch = c.max_batch;
    shape.n_ctx = c.n_ctx;
    shape.kv_type = c.kv;
    shape.threads = o.threads;
    shape.logit_rows = 1;
    const ActivationMemory counted = activation_memory(*info, shape);

    test::start_counting_allocations();
    uint64_t peak = 0;
    {
        auto e = engine::Engine::create(*info->hparams, **store, o, make_backend);
        ASSERT_TRUE(e) << e.error().message;
        // The largest batch first, from position 0, then one token at a time to the end of the
        // context: every attention span and every buffer at its largest.
        const uint32_t rows = batch_rows(c.max_batch, c.n_ctx);
        std::vector<int32_t> prompt(rows);
        for (uint32_t i = 0; i < rows; ++i) prompt[i] = int32_t((7 + 13 * i) % (*e)->n_vocab());
        std::vector<float> logits;
        ASSERT_TRUE((*e)->eval(prompt, engine::LogitsWanted::Last, logits));
        for (uint32_t pos = rows; pos < c.n_ctx; ++pos) {
            const int32_t t = int32_t((3 + 11 * pos) % (*e)->n_vocab());
            ASSERT_TRUE((*e)->eval({&t, 1}, engine::LogitsWanted::Last, logits));
        }
        peak = test::counted_peak_bytes();
    }
    test::stop_counting_allocations();

    // What the engine and its backend may allocate: the backend's buffers, the driver's, one row
    // of logits, and the thread pool's own bookkeeping (its threads are counted apart).
    const uint64_t bound = counted.backend() + counted.engine +
                           uint64_t(info->hparams->n_vocab) * sizeof(float) + (64u << 10);
    EXPECT_LE(peak, bound) << "rows " << counted.rows << ", ffn " << counted.ffn << ", matmul "
                           << counted.matmul << ", attention " << counted.attention << ", engine "
                           << counted.engine;
    // And the count is of what is there, not a blanket allowance.
    EXPECT_GE(peak, counted.backend() / 2) << "the count is far above what the backend takes";
}

INSTANTIATE_TEST_SUITE_P(
    Models, ActivationMemoryCount,
    ::testing::Values(Case{"tiny", TensorType::Q8_0, KvType::F16, 64, 96},
                      Case{"tiny", TensorType::F32, KvType::Q8_0, 48, 80},
                      Case{"tiny", TensorType::Q4_K, KvType::F16, 512, 72},
                      Case{"tiny-qwen3", TensorType::Q8_0, KvType::F16, 40, 64},
                      Case{"tiny-moe", TensorType::Q8_0, KvType::F16, 64, 96},
                      Case{"tiny-qwen2moe", TensorType::Q8_0, KvType::Q8_0, 33, 70},
                      Case{"tiny-qwen35", TensorType::Q8_0, KvType::F16, 80, 100},
                      Case{"tiny-qwen35moe", TensorType::Q8_0, KvType::Q8_0, 40, 64},
                      Case{"tiny-qwen3next", TensorType::Q8_0, KvType::F16, 40, 64},
                      Case{"tiny-glm4moe", TensorType::Q8_0, KvType::F16, 40, 64},
                      Case{"tiny-deepseek2", TensorType::Q8_0, KvType::F16, 40, 64},
                      Case{"tiny-deepseek2", TensorType::F32, KvType::Q8_0, 33, 70},
                      Case{"tiny-deepseek2-kvb", TensorType::Q8_0, KvType::F16, 64, 96}),
    [](const auto& p) { return case_name(p.param); });

}  // namespace
}  // namespace strata
