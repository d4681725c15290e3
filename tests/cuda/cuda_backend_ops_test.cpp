// Every block of the Backend interface on the CUDA backend against the CPU backend, on random
// activations: the same weights (a synthetic model loaded once into RAM and once into GPU
// memory), the same inputs written to both, and each block's output compared. The bound is
// relative to the output's norm and comes from how the two round activations: the CPU converts
// them to the weight's dot-product type (int8 blocks with a step of 1/254 of the block's range
// for quantized weights, fp16 or bf16 for float ones), the GPU keeps more; a wrong kernel (a
// nibble order, a scale, a head's offset) is off by the size of the output itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matvec_q8.h"
#include "engine/routing.h"
#include "engine_test_support.h"
#include "model/rope.h"
#include "runtime/loaded_model.h"
#include "test_support.h"

namespace strata {
namespace {

double bound(TensorType t) {
    switch (t) {
        case TensorType::F32:
            return 1e-5;
        case TensorType::F16:
            return 2e-3;  // fp16 activations on the CPU: 2^-11 relative, summed
        case TensorType::BF16:
            return 1e-2;  // bf16: 2^-8
        default:
            return 2e-2;  // 8-bit activation blocks
    }
}

struct Pair {
    std::unique_ptr<LoadedModel> host, device;
    std::unique_ptr<Backend> cpu, cuda;
    ModelHparams hp;
};

Pair make_pair(const std::string& path) {
    Pair p;
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 64;
    auto h = LoadedModel::load(path, o);
    EXPECT_TRUE(h) << (h ? "" : h.error().message);
    o.gpu = 0;
    auto d = LoadedModel::load(path, o);
    EXPECT_TRUE(d) << (d ? "" : d.error().message);
    if (!h || !d) return p;
    p.host = std::move(*h);
    p.device = std::move(*d);
    p.hp = *p.host->info.hparams;
    BackendConfig c;
    c.hp = p.hp;
    auto rope = make_rope_config(p.hp, &p.host->store->globals().weight(TensorRole::RopeFreqs));
    EXPECT_TRUE(rope);
    if (!rope) return p;
    c.rope = *rope;
    c.n_ctx = 64;
    c.n_seq = 2;
    c.max_batch = 16;
    c.threads = 2;
    auto cpu = make_cpu_backend(c);
    auto cuda = make_cuda_backend(c, 0);
    EXPECT_TRUE(cpu && cuda) << (cuda ? "" : cuda.error().message);
    if (!cpu || !cuda) return p;
    p.cpu = std::move(*cpu);
    p.cuda = std::move(*cuda);
    return p;
}

std::vector<float> random_rows(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(size_t(rows * cols));
    for (float& v : x) v = nd(rng);
    return x;
}

// Compares activation `a` (rows x cols) of the two backends.
void expect_close(Pair& p, Act a, int64_t rows, int64_t cols, double tol, const char* what) {
    const float* want = p.cpu->peek(a, rows);
    std::vector<float> w(want, want + rows * cols);
    const float* got = p.cuda->peek(a, rows);
    const double e = test::rel_l2({got, w.size()}, w);
    EXPECT_LE(e, tol) << what << " (" << act_name(a) << ")";
    std::printf("  %-22s relative error %.2e (bound %.0e)\n", what, e, tol);
}

class CudaBackendOps : public ::testing::TestWithParam<TensorType> {};

TEST_P(CudaBackendOps, EveryBlockMatchesTheCpuBackend) {
    STRATA_REQUIRE_GPU();
    const TensorType type = GetParam();
    for (const char* preset : {"tiny", "tiny-qwen3", "tiny-qwen2moe"}) {
        SCOPED_TRACE(preset);
        std::printf("%s %s\n", preset, std::string(tensor_type_name(type)).c_str());
        Pair p = make_pair(test::synth_test_model(preset, type));
        ASSERT_TRUE(p.cpu && p.cuda);
        const double tol = bound(type);
        const int64_t d = p.hp.n_embd, n = 11;
        const LayerView& hw = **p.host->store->acquire_layer(0);
        const LayerView& dw = **p.device->store->acquire_layer(0);
        const auto both = [&](auto&& f) {
            f(*p.cpu, hw);
            f(*p.cuda, dw);
        };
        const std::vector<float> x = random_rows(n, d, 7);
        both([&](Backend& b, const LayerView&) { b.write_act(Act::Hidden, x.data(), n, d); });
        both([&](Backend& b, const LayerView& w) {
            b.rms_norm(Act::Hidden, w.weight(TensorRole::AttnNorm), Act::Normed, n);
        });
        expect_close(p, Act::Normed, n, d, 1e-5, "rms_norm");
        both([&](Backend& b, const LayerView& w) {
            const LinearJob jobs[] = {
                {&w.weight(TensorRole::AttnQ), &w.bias(TensorRole::AttnQ), Act::Q},
                {&w.weight(TensorRole::AttnK), &w.bias(TensorRole::AttnK), Act::K},
                {&w.weight(TensorRole::AttnV), &w.bias(TensorRole::AttnV), Act::V}};
            b.linear(jobs, Act::Normed, n);
        });
        const int64_t dq = int64_t(p.hp.n_head) * p.hp.head_dim_k;
        const int64_t dk = int64_t(p.hp.n_head_kv) * p.hp.head_dim_k;
        expect_close(p, Act::Q, n, dq, tol, "linear q");
        expect_close(p, Act::K, n, dk, tol, "linear k");
        // Rope, the cache and attention: a prompt of n tokens, then two decode steps.
        both([&](Backend& b, const LayerView& w) {
            const SeqRun prompt{0, 0, n, 0};
            b.rope_store_kv(0, w.weight(TensorRole::AttnQNorm), w.weight(TensorRole::AttnKNorm),
                            {&prompt, 1});
            b.attention(0, TensorView{}, {&prompt, 1});
        });
        expect_close(p, Act::Q, n, dq, tol, "rope (+ q norm)");
        const int64_t da = int64_t(p.hp.n_head) * p.hp.head_dim_v;
        // The CPU rounds the normalised attention weights to fp16 before they multiply the
        // values (as the reference does); the GPU's online softmax never holds normalised weights
        // and keeps them in fp32: 2^-11 relative per weight, whatever the weight type.
        const double attention_tol = std::max(2 * tol, 1e-3);
        expect_close(p, Act::AttnOut, n, da, attention_tol, "attention, prompt");
        for (int64_t pos = n; pos < n + 2; ++pos) {
            both([&](Backend& b, const LayerView& w) {
                const SeqRun step{0, 0, 1, pos};
                b.rope_store_kv(0, w.weight(TensorRole::AttnQNorm), w.weight(TensorRole::AttnKNorm),
                                {&step, 1});
                b.attention(0, TensorView{}, {&step, 1});
            });
        }
        expect_close(p, Act::AttnOut, 1, da, attention_tol, "attention, decode");
        // Two sequences in one batch: row 0 continues sequence 0, rows 1.. start sequence 1,
        // which must see only its own keys.
        both([&](Backend& b, const LayerView& w) {
            const SeqRun runs[] = {{0, 0, 1, n + 2}, {1, 1, n - 1, 0}};
            b.rope_store_kv(0, w.weight(TensorRole::AttnQNorm), w.weight(TensorRole::AttnKNorm),
                            runs);
            b.attention(0, TensorView{}, runs);
        });
        expect_close(p, Act::AttnOut, n, da, attention_tol, "attention, two sequences");

        both([&](Backend& b, const LayerView&) { b.write_act(Act::Hidden, x.data(), n, d); });
        both([&](Backend& b, const LayerView& w) {
            b.rms_norm(Act::Hidden, w.weight(TensorRole::FfnNorm), Act::Normed, n);
        });
        if (!p.hp.is_moe()) {
            both([&](Backend& b, const LayerView& w) {
                b.swiglu_ffn(w.weight(TensorRole::FfnGate), w.weight(TensorRole::FfnUp),
                             w.weight(TensorRole::FfnDown), Act::Normed, Act::Out, n);
            });
            expect_close(p, Act::Out, n, d, 2 * tol, "swiglu ffn");
        } else {
            // Experts 0 and 3 for every token, with weights 0.75 and 0.25; then the shared
            // expert with its sigmoid gate.
            const int k = 2;
            std::vector<int64_t> slots0, slots3;
            std::vector<float> w0, w3;
            for (int64_t t = 0; t < n; ++t) {
                slots0.push_back(t * k);
                w0.push_back(0.75f);
                slots3.push_back(t * k + 1);
                w3.push_back(0.25f);
            }
            p.cpu->begin_experts(n, k, false);
            p.cuda->begin_experts(n, k, false);
            for (auto [e, slots, weights] :
                 {std::tuple{0, &slots0, &w0}, std::tuple{3, &slots3, &w3}}) {
                const ExpertView he = *p.host->store->acquire_expert(0, e);
                const ExpertView de = *p.device->store->acquire_expert(0, e);
                p.cpu->expert(he, *slots, *weights, Act::Normed);
                p.cuda->expert(de, *slots, *weights, Act::Normed);
            }
            p.cpu->end_experts(Act::Out, n);
            p.cuda->end_experts(Act::Out, n);
            expect_close(p, Act::Out, n, d, 2 * tol, "routed experts");
            // The same with expert 3 copied into the GPU's expert entries and computed there,
            // expert 0 on the CPU: each side's slots of the other count as zero, and the CPU's
            // partial sum added to the GPU's gives the whole.
            const ExpertView host3 = *p.host->store->acquire_expert(0, 3);
            ExpertEntryMemory* entries = p.cuda->expert_entry_memory();
            ASSERT_NE(entries, nullptr);
            EXPECT_EQ(p.cpu->expert_entry_memory(), nullptr);
            ASSERT_TRUE(entries->reserve_expert_entries(expert_entry_bytes(host3), 2));
            auto entry = entries->load_expert_entry(1, host3);
            ASSERT_TRUE(entry) << entry.error().message;
            EXPECT_EQ(entry->gate.where.kind, MemoryKind::Device);
            entries->wait_expert_loads();
            EXPECT_TRUE(entries->expert_entry_ready(1));
            p.cuda->begin_experts(n, k, true);
            p.cuda->expert(*entry, slots3, w3, Act::Normed);
            p.cuda->end_experts(Act::Out, n);
            p.cpu->begin_experts(n, k, true);
            p.cpu->expert(*p.host->store->acquire_expert(0, 0), slots0, w0, Act::Normed);
            p.cpu->end_experts(Act::Side, n);
            std::vector<float> side(size_t(n * d));
            p.cpu->read_act(Act::Side, side.data(), n, d);
            p.cuda->write_act(Act::Side, side.data(), n, d);
            p.cuda->add(Act::Out, Act::Side, n);
            expect_close(p, Act::Out, n, d, 2 * tol, "experts split by entry");
            // Routed on the GPU (a decode step: token 0; a batch: all n tokens), against the
            // host's routing of the same tokens and the CPU's experts.
            const auto stack = p.device->store->resident_experts(0);
            ASSERT_TRUE(stack);
            const int ne = int(p.hp.n_expert), ku = int(p.hp.n_expert_used);
            for (const auto& [rows, norm] : {std::pair{int64_t(1), false}, std::pair{n, true}}) {
                std::vector<float> router_logits(static_cast<size_t>(rows * ne));
                const HostProjection router{&hw.weight(TensorRole::MoeRouter),
                                            router_logits.data()};
                p.cpu->project_to_host({&router, 1}, Act::Normed, 0, rows);
                std::vector<int32_t> chosen(static_cast<size_t>(rows * ku));
                std::vector<float> weights(static_cast<size_t>(rows * ku));
                for (int64_t t = 0; t < rows; ++t) {
                    engine::route_token(&router_logits[size_t(t * ne)],
                                        {ne, ku, norm, nullptr, 0, ExpertGating::Softmax},
                                        &chosen[size_t(t * ku)], &weights[size_t(t * ku)]);
                }
                p.cpu->begin_experts(rows, ku, false);
                for (int e = 0; e < ne; ++e) {
                    std::vector<int64_t> slots;
                    std::vector<float> slot_weights;
                    for (int64_t i = 0; i < rows * ku; ++i) {
                        if (chosen[size_t(i)] != e) continue;
                        slots.push_back(i);
                        slot_weights.push_back(weights[size_t(i)]);
                    }
                    if (slots.empty()) continue;
                    p.cpu->expert(*p.host->store->acquire_expert(0, e), slots, slot_weights,
                                  Act::Normed);
                }
                p.cpu->end_experts(Act::Out, rows);
                const bool taken =
                    p.cuda->routed_experts(dw.weight(TensorRole::MoeRouter), {}, {}, *stack, ku,
                                           norm, Act::Normed, Act::Out, rows);
                if (!cuda::matvec_q8_supports(type)) {
                    EXPECT_FALSE(taken) << "routed a type the int8 matvec does not take";
                    continue;
                }
                ASSERT_TRUE(taken);
                expect_close(p, Act::Out, rows, d, 2 * tol,
                             rows == 1 ? "experts routed on GPU, 1" : "experts routed on GPU, n");
            }
            both([&](Backend& b, const LayerView& w) {
                b.swiglu_ffn(w.weight(TensorRole::SharedGate), w.weight(TensorRole::SharedUp),
                             w.weight(TensorRole::SharedDown), Act::Normed, Act::Side, n);
                b.sigmoid_gate(w.weight(TensorRole::SharedExpertGate), Act::Normed, Act::Side, n);
            });
            expect_close(p, Act::Side, n, d, 2 * tol, "shared expert, gated");
        }
        both([&](Backend& b, const LayerView&) { b.add(Act::Hidden, Act::Normed, n); });
        expect_close(p, Act::Hidden, n, d, 1e-5, "add");

        // Embedding rows and the output head.
        const std::vector<int32_t> tokens{0, 5, 17, 99, 3};
        p.cpu->embed(p.host->store->globals().weight(TensorRole::TokenEmbedding), tokens);
        p.cuda->embed(p.device->store->globals().weight(TensorRole::TokenEmbedding), tokens);
        expect_close(p, Act::Hidden, 5, d, 1e-6, "embedding rows");
        const int64_t v = p.host->store->head_view().rows();
        std::vector<float> want(size_t(5 * v)), got(size_t(5 * v));
        p.cpu->output_head(p.host->store->globals().weight(TensorRole::OutputNorm),
                           p.host->store->head_view(), 0, 5, want.data());
        p.cuda->output_head(p.device->store->globals().weight(TensorRole::OutputNorm),
                            p.device->store->head_view(), 0, 5, got.data());
        const double e = test::rel_l2(got, want);
        EXPECT_LE(e, tol) << "output head";
        std::printf("  %-22s relative error %.2e (bound %.0e)\n", "output head", e, tol);
        p.host->store->release_layer(0);
        p.device->store->release_layer(0);
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaBackendOps,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::BF16,
                                           TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                                           TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K,
                                           TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                           TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
                                           TensorType::MXFP4),
                         [](const auto& p) { return std::string(tensor_type_name(p.param)); });

}  // namespace
}  // namespace strata
